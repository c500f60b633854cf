"""Fine-tuning updates replayed per batch shape (``steps.GraphedSteps``).

On the CPU the graph is ``eager_stand_in`` (each replay runs the captured update again on the
shape's buffers), so these tests hold the bookkeeping around a graph to the plain loop: buffers,
the rate as a tensor, gradients written rather than added, which update of a shape is eager.
A real CUDA graph is held to eager fine-tuning below (on a GPU); a capture that fails is a
fault of ``tests/test_faults.py``.
"""

import numpy as np
import pytest
import torch

import gpt1lib.loss as loss_module
from gpt1lib import GPT, preset
from gpt1lib.corpus import load_documents
from gpt1lib.finetune import FinetuneRun, finetune
from gpt1lib.loss import fused_lm_loss
from gpt1lib.optim import make_optimizer, train_step
from gpt1lib.settings import FinetuneConfig
from gpt1lib.steps import MAX_TOKENS, GraphedSteps, cuda_graph, eager_stand_in
from gpt1lib.tasks import load_examples
from gpt1lib.tokenizer import GPT1Tokenizer
from gpt1lib.transforms import Batch


def _fine_tune(monkeypatch, graphed: bool, capture=eager_stand_in, device="cpu", pdrop=0.1):
    """Fine-tune a tiny model on 24 SST-2 fixture examples, batches padded to a multiple of 8
    (several shapes, each met several times)."""
    monkeypatch.setattr("gpt1lib.finetune.pad_multiple", lambda d, asked=None: 8)
    monkeypatch.setattr("gpt1lib.finetune.graphs_pay", lambda *a: graphed)
    monkeypatch.setattr("gpt1lib.steps.cuda_graph", capture)
    tok = GPT1Tokenizer.train(texts=load_documents("fixture").texts, n_merges=300)
    train, dev = load_examples("sst2", "train")[:24], load_examples("sst2", "dev")[:8]
    torch.manual_seed(0)
    drops = {"embd_pdrop": pdrop, "attn_pdrop": pdrop, "resid_pdrop": pdrop}
    pre = GPT(preset("tiny", vocab_size=tok.vocab_size, **drops))
    cfg = FinetuneConfig(lr=1e-3, epochs=4, batch_size=4, clf_pdrop=pdrop)
    run = FinetuneRun("sst2", cfg, examples=(train, {"dev": dev}), device=device)
    return finetune(pre, tok, run)


def _values(result, split):
    rows = result.metrics.query(f"split == '{split}'")
    return rows.set_index(["epoch", "metric"])["value"]


def test_replayed_updates_train_exactly_as_the_plain_loop(monkeypatch):
    plain = _fine_tune(monkeypatch, graphed=False)
    graphed = _fine_tune(monkeypatch, graphed=True)
    replays = {r["metric"]: r["value"] for r in graphed.records if r["split"] == "train_loss"}
    assert replays["graphed_updates"] >= 12  # of 24: most updates were replays
    assert "graphed_updates" not in {r["metric"] for r in plain.records}
    for split in ("train_loss", "dev"):
        np.testing.assert_allclose(_values(graphed, split), _values(plain, split), rtol=1e-5)
    for a, b in zip(plain.model.parameters(), graphed.model.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_a_cuda_graph_trains_as_eager_updates(monkeypatch):
    """On a GPU, real CUDA graphs: without dropout, the losses of eager updates (bf16 both;
    the captured LM loss sums its rows in another order)."""
    plain = _fine_tune(monkeypatch, False, device="cuda", pdrop=0.0)
    graphed = _fine_tune(monkeypatch, True, cuda_graph, device="cuda", pdrop=0.0)
    records = {r["metric"]: r["value"] for r in graphed.records if r["split"] == "train_loss"}
    assert records["graphed_updates"] >= 12 and "graph_failures" not in records
    np.testing.assert_allclose(_values(graphed, "train_loss"), _values(plain, "train_loss"), 2e-2)


def _batch(n: int, T: int) -> Batch:
    ids = torch.randint(0, 50, (n, T))
    return Batch(ids, torch.full((n,), T - 1), torch.ones(n, T, dtype=torch.bool), ids[:, 0], 1)


def test_which_update_of_a_shape_is_replayed():
    model = torch.nn.Linear(4, 2)
    opt = make_optimizer(model, 0.1, graphs=True)
    calls = []

    def losses(batch):
        calls.append(batch.ids.shape)
        out = model(batch.ids[:, :4].float()).logsumexp(-1).mean()
        return torch.stack([out, out, out * 0])

    steps = GraphedSteps(model, opt, losses, 1.0, capture=eager_stand_in)
    assert steps.step(_batch(2, 8), 0.1) is None  # the first of a shape: the caller's, eager
    assert steps.step(_batch(2, 8), 0.1) is not None and calls == [(2, 8)]  # captured, replayed
    assert steps.step(_batch(2, 16), 0.1) is None  # a new shape
    long = MAX_TOKENS // 64 + 1
    assert steps.step(_batch(long, 64), 0.1) is None  # too long to pay: eager every time
    assert steps.step(_batch(long, 64), 0.1) is None and steps.replays == 1


def test_the_rate_a_replay_reads_is_the_one_asked_for():
    """``train_step`` and a replay set the same tensor rate: a replay at rate 0 moves nothing."""
    model = torch.nn.Linear(4, 2)
    opt = make_optimizer(model, 0.1, graphs=True)
    before = [p.detach().clone() for p in model.parameters()]

    def losses(batch):
        out = model(batch.ids[:, :4].float()).pow(2).mean()
        return torch.stack([out, out, out * 0])

    train_step(model, opt, 0.0, [losses(_batch(2, 8))[0]])
    steps = GraphedSteps(model, opt, losses, 1.0, capture=eager_stand_in)
    steps.step(_batch(2, 8), 0.5)
    steps.step(_batch(2, 8), 0.0)
    for p, q in zip(model.parameters(), before, strict=True):
        torch.testing.assert_close(p, q)
    steps.step(_batch(2, 8), 0.5)
    assert not torch.equal(model.weight, before[0])
    assert all(float(g["lr"]) == 0.5 for g in opt.param_groups)


@pytest.mark.parametrize("reduction", ["mean", "mean_of_sequences"])
def test_a_captured_lm_loss_scores_every_row_to_the_same_loss(monkeypatch, reduction):
    """In a capture the LM loss cannot pick the real rows (a shape from the data): it scores
    every row, the masked ones with weight 0. The same loss and gradients."""
    torch.manual_seed(0)
    h = torch.randn(3, 7, 16, requires_grad=True)
    W = torch.randn(40, 16, requires_grad=True)
    targets = torch.randint(0, 40, (3, 6))
    mask = torch.arange(6) < torch.tensor([6, 2, 4])[:, None]
    got = []
    for capturing in (False, True):
        monkeypatch.setattr(loss_module, "capturing", lambda c=capturing: c)
        loss = fused_lm_loss(h, W, targets, mask, reduction)
        got.append((loss, *torch.autograd.grad(loss, (h, W))))
    for a, b in zip(*got, strict=True):
        torch.testing.assert_close(a, b)
