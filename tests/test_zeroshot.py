"""§5 zero-shot heuristics: each gives the score computed by hand on a tiny model."""

import math

import numpy as np
import pytest
import torch

from gpt1lib import GPT, preset
from gpt1lib.facts import ZERO_SHOT_BASELINES as BASELINES
from gpt1lib.tasks import Example
from gpt1lib.zeroshot import (
    best_threshold,
    cola_scores,
    continuation_logprobs,
    dprd_predictions,
    normalise,
    pronoun_span,
    race_predictions,
    sst2_margins,
    zero_shot_score,
)

WORDS = (
    "<unk> the film was very good bad positive negative leo paid paul because he fixed "
    "roof it a doc q yes no"
).split()


class WordTok:
    """One token per known word (anything else is <unk>)."""

    vocab_size = len(WORDS)

    def encode(self, text):
        return [WORDS.index(w) if w in WORDS else 0 for w in text.lower().replace(".", "").split()]


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return GPT(preset("tiny", vocab_size=len(WORDS), n_ctx=16)).eval()


def _logp(model, seq):
    """log P(seq[t] | seq[:t]) for t >= 1, by hand."""
    logits = model(torch.tensor([seq])).logits[0].log_softmax(-1)
    return [logits[t - 1, seq[t]].item() for t in range(1, len(seq))]


def test_continuation_logprobs_score_only_the_continuation(model):
    ((s, n),) = continuation_logprobs(model, [[1, 2, 3]], [[4, 5]])
    lp = _logp(model, [1, 2, 3, 4, 5])
    assert n == 2 and s == pytest.approx(lp[2] + lp[3], abs=1e-5)
    # too long for the context: the prefix loses its start, the continuation stays whole
    ((s2, n2),) = continuation_logprobs(model, [list(range(1, 20))], [[4, 5]])
    seq = list(range(1, 20))[-14:] + [4, 5]
    assert n2 == 2 and s2 == pytest.approx(sum(_logp(model, seq)[-2:]), abs=1e-5)


def test_a_gpus_padded_batches_score_the_same(model, monkeypatch):
    """On a GPU the lengths are rounded up to a multiple (few shapes) and a batch holds a
    token budget: the same log-probabilities."""
    prefixes = [[1, 2, 3], [4], list(range(1, 12)), [5, 6]]
    conts = [[4, 5], [1, 2, 3], [7], [8, 9, 10]]
    exact = continuation_logprobs(model, prefixes, conts)
    monkeypatch.setattr("gpt1lib.zeroshot.pad_multiple", lambda device: 8)
    monkeypatch.setattr("gpt1lib.zeroshot.GPU_BATCH_TOKENS", 16)  # two rows of 8 a batch
    padded = continuation_logprobs(model, prefixes, conts)
    assert [n for _, n in padded] == [n for _, n in exact]
    assert [s for s, _ in padded] == pytest.approx([s for s, _ in exact], abs=1e-5)


def test_cola_score_is_the_average_token_logprob(model):
    tok = WordTok()
    (score,) = cola_scores(model, tok, ["the film was good"])
    assert score == pytest.approx(np.mean(_logp(model, tok.encode("the film was good"))), abs=1e-5)
    assert best_threshold(np.array([0.1, 0.2, 0.8, 0.9]), np.array([0, 0, 1, 1])) == pytest.approx(
        0.5
    )


def test_sst2_picks_the_likelier_word_after_very(model):
    tok = WordTok()
    seq = tok.encode("the film was very")
    logits = model(torch.tensor([seq])).logits[0, -1]
    expected = int(logits[WORDS.index("positive")] > logits[WORDS.index("negative")])
    assert (sst2_margins(model, tok, ["the film was"]) > 0).tolist() == [bool(expected)]


def test_race_picks_the_answer_with_the_highest_average_logprob(model):
    tok = WordTok()
    ex = Example(("a doc", "q"), answers=("yes", "no good", "the", "bad"), label=0)
    ctx = tok.encode("a doc q")
    avg = [np.mean(_logp(model, ctx + tok.encode(a))[len(ctx) - 1 :]) for a in ex.answers]
    assert race_predictions(model, tok, [ex]).tolist() == [int(np.argmax(avg))]


def test_dprd_scores_only_the_tokens_after_the_substituted_span(model):
    tok = WordTok()
    ex = Example(
        ("Leo paid Paul because he fixed the roof.", "he"), answers=("Leo", "Paul"), label=1
    )
    assert pronoun_span(ex.texts[0], "he", ex.answers) == (22, 24)
    scores = []
    for cand in ex.answers:
        prefix = tok.encode(f"Leo paid Paul because {cand}")
        rest = tok.encode("fixed the roof")
        scores.append(np.mean(_logp(model, prefix + rest)[len(prefix) - 1 :]))
    assert dprd_predictions(model, tok, [ex]).tolist() == [int(np.argmax(scores))]


def test_zero_shot_score_and_normalisation(model):
    tok = WordTok()
    exs = [Example(("the film was good",), label=1), Example(("the film was bad",), label=0)]
    acc = zero_shot_score(model, tok, "sst2", exs)
    assert acc in (0.0, 50.0, 100.0)
    with pytest.raises(ValueError, match="train="):
        zero_shot_score(model, tok, "cola", exs)
    assert normalise("sst2", 50.0) == 0.0 and normalise("sst2", 93.2) == pytest.approx(1.0)
    # every normalising value says where it comes from and whether it is confirmed
    assert all(
        status.split(":")[0].split(",")[0] in ("confirmed", "unconfirmed")
        for *_, status in BASELINES.values()
    )
    assert "ensemble" in BASELINES["race"][2] and "stands in" in BASELINES["race"][3]
    assert math.isclose(normalise("race_h", 25.0), 0.0)


def test_each_record_names_the_split_it_scored(tmp_path):
    """RACE's heuristic scores dev (test is Table 3's): its records used to say "test"."""
    from gpt1lib.checkpoint import save_model
    from gpt1lib.corpus import load_documents
    from gpt1lib.tokenizer import GPT1Tokenizer
    from gpt1lib.zeroshot import evaluate_checkpoints, load_zero_shot

    tok = GPT1Tokenizer.train(texts=load_documents("fixture").texts, n_merges=100)
    torch.manual_seed(0)
    folder = tmp_path / "step_00000001"
    tok.save(save_model(GPT(preset("tiny", vocab_size=tok.vocab_size)), folder))
    data, skipped = load_zero_shot("fixture", limit=4)
    assert not skipped and data["race"].split == "dev" and len(data["race"].examples) == 4
    recs = evaluate_checkpoints([folder], data, progress=False, seed=0)
    splits = {(r["task"], r["split"], r["config"]["examples_split"]) for r in recs}
    assert splits == {
        ("cola", "dev", "dev"),
        ("sst2", "dev", "dev"),
        ("race", "dev", "dev"),
        ("dprd", "test", "test"),
    }


def test_thresholds_are_the_best_on_training_examples():
    """The vectorised search finds what sklearn's metric, tried at every candidate, finds."""
    from sklearn.metrics import accuracy_score, matthews_corrcoef

    rng = np.random.default_rng(0)
    scores, labels = rng.normal(size=300), rng.integers(0, 2, 300)
    scores[:20] = scores[20:40]  # ties
    for metric, score in (("matthews", matthews_corrcoef), ("accuracy", accuracy_score)):
        th = best_threshold(scores, labels, metric)
        s = np.sort(np.unique(scores))
        best = max(
            score(labels, (scores > t).astype(int))
            for t in np.concatenate([[s[0] - 1], (s[:-1] + s[1:]) / 2, [s[-1] + 1]])
        )
        assert score(labels, (scores > th).astype(int)) == pytest.approx(best)


def test_sst2_has_the_papers_heuristic_and_a_calibrated_one_beside(tmp_path):
    """The calibrated threshold is chosen on training examples and recorded as not the paper's;
    where every margin leans one way, the paper's gives one answer and the calibrated may not."""
    from gpt1lib.checkpoint import save_model
    from gpt1lib.corpus import load_documents
    from gpt1lib.tokenizer import GPT1Tokenizer
    from gpt1lib.zeroshot import evaluate_checkpoints, load_zero_shot

    tok = GPT1Tokenizer.train(texts=load_documents("fixture").texts, n_merges=100)
    torch.manual_seed(0)
    folder = tmp_path / "step_00000001"
    model = GPT(preset("tiny", vocab_size=tok.vocab_size))
    tok.save(save_model(model, folder))
    data, _ = load_zero_shot("fixture", limit=8)
    assert data["sst2"].train and data["cola"].train and data["race"].train is None
    recs = [
        r
        for r in evaluate_checkpoints([folder], data, progress=False)
        if r["task"] == "sst2" and r["metric"] == "accuracy"
    ]
    assert [r["config"]["heuristic"] for r in recs] == ["sst2", "sst2_calibrated"]
    texts = [e.texts[0] for e in data["sst2"].examples]
    margins = sst2_margins(model, tok, texts)
    labels = np.array([e.label for e in data["sst2"].examples])
    assert recs[0]["value"] == pytest.approx(100 * ((margins > 0) == labels).mean())
    with pytest.raises(ValueError, match="SST-2 calibrated's threshold"):
        zero_shot_score(model, tok, "sst2_calibrated", data["sst2"].examples)
    calibrated = zero_shot_score(
        model, tok, "sst2_calibrated", data["sst2"].examples, data["sst2"].train
    )
    assert calibrated == pytest.approx(recs[1]["value"])


def test_gpu_scoring_batches_hold_a_token_budget():
    from gpt1lib.zeroshot import GPU_BATCH_TOKENS, _batches

    seqs = [[1] * n for n in (5, 70, 300, 64, 512, 3) * 200]
    got = _batches(seqs, 64, 64, 512)
    assert sorted(i for b in got for i in b) == list(range(len(seqs)))
    for b in got:
        width = -(-max(len(seqs[i]) for i in b) // 64) * 64
        assert len(b) * width <= GPU_BATCH_TOKENS
    assert len({len(b) for b in got}) > 1  # short sequences, many to a batch
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    assert _batches(seqs, 64, 1, 512) == [order[k : k + 64] for k in range(0, len(seqs), 64)]


def test_a_constant_answer_is_no_point_of_the_curve():
    """A heuristic that gives every example one answer scores that answer's share of the
    labels: normalised by 50% as chance, two such models would be ranked by the label balance
    alone. Its points say which answer it gave and have no normalised value."""
    from gpt1lib.evaluations import zero_shot_points
    from gpt1lib.records import make_record, per_example_record

    labels = [1] * 52 + [0] * 48
    recs = []
    for arch, preds in (("GPT", [1] * 100), ("LSTMLM", [0] * 100), ("GPT", labels)):
        step = 2 if preds is labels else 1
        fields = dict(
            experiment="zero_shot",
            task="sst2",
            split="dev",
            step=step,
            scale="small",
            commit="abc",
            device="cpu",
            seed=0,
            config={"arch": arch, "heuristic": "sst2", "examples_split": "dev"},
        )
        value = 100 * np.mean(np.equal(preds, labels))
        recs += [
            make_record("accuracy", value, **fields),
            per_example_record(preds, labels, map(str, range(100)), **fields),
        ]
    pts = zero_shot_points(recs).set_index(["model", "step"])
    assert pts.loc[("Transformer", 1), "answer"] == "'positive'"
    assert pts.loc[("LSTM", 1), "answer"] == "'negative'"
    assert np.isnan(pts.loc[("Transformer", 1), "normalised"])  # not +0.046
    assert np.isnan(pts.loc[("LSTM", 1), "normalised"])  # nor -0.046
    assert pts.loc[("Transformer", 2), "normalised"] == pytest.approx(normalise("sst2", 100.0))


def test_each_checkpoint_records_what_it_says_greedily(tmp_path):
    """Chapter 3's recorded text: each prompt continued by the checkpoint's most likely next
    token, step by step (an argmax loop here, not ``generate``), and the text that decodes."""
    from gpt1lib.checkpoint import save_model
    from gpt1lib.corpus import load_documents
    from gpt1lib.experiments import PROMPTS, checkpoint_samples
    from gpt1lib.tokenizer import GPT1Tokenizer

    tok = GPT1Tokenizer.train(texts=load_documents("fixture").texts, n_merges=100)
    torch.manual_seed(0)
    model = GPT(preset("tiny", vocab_size=tok.vocab_size)).eval()
    folder = tmp_path / "step_00000040"
    tok.save(save_model(model, folder))
    recs = checkpoint_samples([folder], tokens=5, device="cpu", scale="smoke")
    assert [r["config"]["prompt"] for r in recs] == list(PROMPTS)
    for r in recs:
        ids = tok.encode(r["config"]["prompt"])
        for _ in range(5):
            with torch.no_grad():
                ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
        assert r["config"]["text"] == tok.decode(ids[-5:])
        assert (r["experiment"], r["step"], r["value"]) == ("samples", 40, 5)
