"""§3.3 input transformations: golden token sequences, extract positions, truncation."""

import pytest
import torch

from gpt1lib.tasks import Example, get_task
from gpt1lib.transforms import collate, encode_example, truncated_count


class WordTokenizer:
    """Each word one token, ids in order of first sight; specials after a 100-word vocabulary."""

    vocab_size, start, delimiter, classify = 100, 100, 101, 102

    def __init__(self):
        self.ids: dict[str, int] = {}

    def encode(self, text):
        return [self.ids.setdefault(w, len(self.ids)) for w in text.split()]


S, D, C = 100, 101, 102


def test_classification_golden():
    enc = encode_example(Example(("a good film",), label=1), "classification", WordTokenizer(), 16)
    assert enc.seqs == ((S, 0, 1, 2, C),) and enc.extract == (4,) and enc.label == 1


def test_entailment_golden():
    enc = encode_example(
        Example(("a man sleeps", "a person rests")), "entailment", WordTokenizer(), 16
    )
    assert enc.seqs == ((S, 0, 1, 2, D, 0, 3, 4, C),) and enc.extract == (8,)


def test_similarity_has_both_orders():
    enc = encode_example(Example(("x y", "z")), "similarity", WordTokenizer(), 16)
    assert enc.seqs == ((S, 0, 1, D, 2, C), (S, 2, D, 0, 1, C))
    assert enc.extract == (5, 5)


def test_multiple_choice_golden():
    ex = Example(("the doc", "why ?"), answers=("yes", "no way"), label=1)
    enc = encode_example(ex, "multiple_choice", WordTokenizer(), 16)
    # no delimiter between context and question; one sequence per answer
    assert enc.seqs == ((S, 0, 1, 2, 3, D, 4, C), (S, 0, 1, 2, 3, D, 5, 6, C))
    assert enc.extract == (7, 8) and enc.label == 1


def test_truncation_keeps_specials_trims_the_longer_side():
    tok = WordTokenizer()
    ex = Example((" ".join(f"p{i}" for i in range(20)), "h1 h2"))
    (seq,) = encode_example(ex, "entailment", tok, 10).seqs
    assert len(seq) == 10 and seq[0] == S and seq[-1] == C
    assert seq[-4:] == (D, tok.ids["h1"], tok.ids["h2"], C)  # the short side is whole


def test_truncation_trims_the_context_and_never_an_answer():
    tok = WordTokenizer()
    context = " ".join(f"c{i}" for i in range(30))
    ex = Example((context, "q"), answers=("a1", "a2 a3 a4"), label=0)
    enc = encode_example(ex, "multiple_choice", tok, 12)
    assert all(len(s) <= 12 and s[-1] == C for s in enc.seqs)
    assert enc.seqs[1][-5:] == (D, tok.ids["a2"], tok.ids["a3"], tok.ids["a4"], C)
    assert enc.seqs[0][:6] == enc.seqs[1][:6]  # the same context for every answer
    assert enc.seqs[0][1] == tok.ids["c0"]  # cut from the end of the context


def test_story_cloze_truncation_is_the_released_halves_keeping_the_storys_end():
    tok = WordTokenizer()
    story = " ".join(f"s{i}" for i in range(10))
    ex = Example((story, ""), answers=("e1 e2 e3", " ".join(f"f{i}" for i in range(8))), label=0)
    assert get_task("story_cloze").truncation == "halves"
    enc = encode_example(ex, "multiple_choice", tok, 16, "halves")  # parts of 16 // 2 - 2 = 6
    kept = tuple(tok.ids[f"s{i}"] for i in range(4, 10))  # the story's last 6 tokens
    assert enc.seqs[0] == (S, *kept, D, tok.ids["e1"], tok.ids["e2"], tok.ids["e3"], C)
    assert enc.seqs[1] == (S, *kept, D, *(tok.ids[f"f{i}"] for i in range(6)), C)
    assert [len(q) for q in enc.seqs] == [12, 15] and enc.truncated
    short = encode_example(ex, "multiple_choice", tok, 64, "halves")
    assert not short.truncated and short.seqs[0][1] == tok.ids["s0"]
    # the family's rule on the same example cuts the story's END, the sentence nearest the endings
    family = encode_example(ex, "multiple_choice", tok, 16)
    assert family.seqs[0][1] == tok.ids["s0"] and tok.ids["s9"] not in family.seqs[0]
    with pytest.raises(ValueError, match="'halves' for multiple choice"):
        encode_example(Example(("a", "b")), "entailment", tok, 16, "halves")


def test_truncated_flag_and_count():
    tok = WordTokenizer()
    long_text = " ".join(f"w{i}" for i in range(20))
    assert encode_example(Example((long_text,)), "classification", tok, 10).truncated
    assert not encode_example(Example(("a b",)), "classification", tok, 10).truncated
    assert encode_example(Example((long_text, "h")), "entailment", tok, 10).truncated
    assert not encode_example(Example(("p q", "h")), "similarity", tok, 10).truncated
    exs = [Example((long_text,), label=0), Example(("a b",), label=1)]
    assert truncated_count(exs, get_task("sst2"), tok, 10) == 1
    # the flag does not take part in equality: an Encoded is its sequences and label
    a = encode_example(Example((long_text,)), "classification", tok, 10)
    assert a == type(a)(a.seqs, a.label)


def test_collate_pads_right_and_points_at_classify():
    tok = WordTokenizer()
    items = [
        encode_example(Example((t,), label=i), "classification", tok, 16)
        for i, t in enumerate(["a b c d", "e"])
    ]
    b = collate(items)
    assert b.ids.shape == (2, 6) and b.extract.tolist() == [5, 2]
    assert (b.ids[torch.arange(2), b.extract] == C).all()
    assert b.mask.sum(1).tolist() == [6, 3] and b.labels.tolist() == [0, 1]
    padded = collate(items, pad_to=10, pad_id=7)
    assert padded.ids.shape == (2, 10) and padded.ids[1, :3].tolist() == list(items[1].seqs[0])
    assert (padded.ids[1, 3:] == 7).all() and padded.ids[0, :6].tolist() == list(items[0].seqs[0])
    with pytest.raises(ValueError, match="6 tokens does not fit pad_to=4"):
        collate(items, pad_to=4)


def test_unknown_family_is_an_error():
    with pytest.raises(ValueError, match="unknown family"):
        encode_example(Example(("a",)), "regression", WordTokenizer(), 8)


def test_encodings_kept_the_last_8_and_older_ones_within_a_token_budget(monkeypatch):
    """``scoring.encode_all`` answers examples it encoded before from what it kept (the same
    encodings, none encoded again); beyond the last 8 it keeps older ones only while all fit
    ``KEPT_TOKENS``."""
    from gpt1lib import scoring

    class Counted(WordTokenizer):
        calls = 0

        def fingerprint(self):
            return "words"

        def encode(self, text):
            Counted.calls += 1
            return super().encode(text)

    tok, task = Counted(), get_task("sst2")
    sets = [[Example((f"set {i} word{j}",), label=0) for j in range(5)] for i in range(10)]
    for budget, kept in ((0, 8), (10**6, 10)):
        monkeypatch.setattr(scoring, "_ENCODED", {})
        monkeypatch.setattr(scoring, "KEPT_TOKENS", budget)
        first = [scoring.encode_all(s, task, tok, 16) for s in sets]
        assert len(scoring._ENCODED) == kept
        calls = Counted.calls
        again = [scoring.encode_all(list(s), task, tok, 16) for s in sets[-kept:]]
        assert again == first[-kept:] and Counted.calls == calls  # equal examples: kept
        scoring.encode_all(sets[0], task, tok, 16)
        assert Counted.calls - calls == 5 * (kept < 10)  # the first, not kept, encoded again
