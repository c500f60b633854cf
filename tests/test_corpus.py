"""The pre-training corpus: documents, tokenising once, blocks, random contiguous batches."""

import numpy as np
import pytest

from gpt1lib.corpus import (
    FIXTURE,
    TokenBlocks,
    build_corpus,
    load_documents,
    split_documents,
    tokenize,
)


class ByteTokenizer:
    """Bytes as tokens: enough of the tokenizer interface to test the corpus alone."""

    vocab_size = n_tokens = 256
    calls = 0

    def encode_batch(self, texts):
        ByteTokenizer.calls += 1
        return [list(t.encode("utf-8")) for t in texts]

    def fingerprint(self):
        return "bytes-v1"


def test_fixture_corpus_has_train_and_valid_documents():
    train, valid = load_documents("fixture", "train"), load_documents("fixture", "valid")
    assert len(train.texts) == len(list((FIXTURE / "train").glob("*.txt"))) >= 4
    assert len(valid.texts) >= 1
    assert not set(train.texts) & set(valid.texts)


def test_tokens_are_the_documents_in_order_and_cached(tmp_path):
    docs = load_documents("fixture", "train")
    ids = tokenize(docs, ByteTokenizer(), tmp_path)
    assert bytes(ids.astype(np.uint8)) == "".join(docs.texts).encode("utf-8")
    calls = ByteTokenizer.calls
    again = tokenize(docs, ByteTokenizer(), tmp_path)
    assert ByteTokenizer.calls == calls and np.array_equal(ids, again)  # read from the cache
    assert len(list(tmp_path.glob("tokens-*.npy"))) == 1


def test_validation_is_held_out_by_whole_documents(tmp_path):
    for i in range(10):
        (tmp_path / f"{i}.txt").write_text(f"document {i} " * 50)
    docs = load_documents(tmp_path, "train")
    train, valid = split_documents(docs, 0.2, seed=1)
    assert len(train.texts) == 8 and len(valid.texts) == 2
    assert sorted(train.texts + valid.texts) == sorted(docs.texts)
    corpus = build_corpus(ByteTokenizer(), 16, tmp_path, valid_fraction=0.2, seed=1)
    assert corpus.stats()["valid_tokens"] == sum(len(t) for t in valid.texts)


def test_batches_are_random_contiguous_blocks_fixed_by_their_position():
    tokens = np.arange(1000, dtype=np.int32)
    blocks = TokenBlocks(tokens, n_ctx=9)
    seen = []
    for epoch, b, x in blocks.batches(4, seed=0):
        if epoch == 2:
            break
        assert x.shape == (4, 10)
        assert (x[:, 1:] - x[:, :-1] == 1).all()  # contiguous
        seen.append((epoch, b, x))
    e0 = [x for e, _, x in seen if e == 0]
    e1 = [x for e, _, x in seen if e == 1]
    starts0 = sorted(int(x[i, 0]) for x in e0 for i in range(4))
    assert len(set(starts0)) == len(starts0)  # an epoch visits each block once
    assert starts0 != sorted(int(x[i, 0]) for x in e1 for i in range(4))  # a fresh offset/order
    assert int(e0[0][0, 0]) != 0 or int(e0[1][0, 0]) != 10  # shuffled, not in order
    # resuming at a position gives exactly the batches that followed it
    _, _, x = next(blocks.batches(4, seed=0, epoch=1, start_batch=3))
    assert np.array_equal(x, next(x for e, b, x in seen if (e, b) == (1, 3)))


def test_eval_batches_are_fixed_and_in_order():
    blocks = TokenBlocks(np.arange(100), n_ctx=9)
    xs = list(blocks.eval_batches(4, max_batches=2))
    assert [x.shape[0] for x in xs] == [4, 4] and int(xs[1][0, 0]) == 40


def test_missing_local_path_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="neither a local path"):
        load_documents(tmp_path / "nope" / "corpus", "train")


def test_novels_corpus_layout(shared_data):
    docs = load_documents(shared_data / "corpus" / "gutenberg_small", "valid")
    assert len(docs.texts) == 1 and docs.n_bytes > 100_000
