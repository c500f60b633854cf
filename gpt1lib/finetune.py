"""Supervised fine-tuning (§3.2): L3 = L2 + lambda * L1, the task heads, and layer transfer.

    P(y | x^1..x^m) = softmax(h_l^m W_y)      L2(C) = sum log P(y | x^1..x^m)
    L3(C) = L2(C) + lambda * L1(C),  lambda = 0.5

``h_l^m`` is the final block's state at the ``_classify_`` token of each sequence (never "the
last index" of a padded batch). The only new parameters are W_y and the embeddings of the three
special tokens. Heads, as in the released code: classification and entailment read one extract
vector; similarity ADDS the extract vectors of its two orders, then W_y; multiple choice maps
each answer's extract vector to one scalar and takes a softmax over the answers, with ONE
classifier-dropout mask shared by an example's answers. STS-B, scored on a scale of 0 to 5, is
trained by default on the released code's soft labels over 6 classes and predicts the expected
score (``regression="soft_labels"``), or with one output on the squared error (``"mse"``); see
``loss``. The loss is ``mean(task loss) + lambda * mean(per-sequence mean LM loss over the whole
transformed sequence)``, as in the released code (``loss.task_loss``).

Layer transfer (§5, Figure 2 left), the released code's meaning: ``n_transfer = K`` copies the
embeddings and the first K blocks; K = 0 copies the embeddings only; K = -1 copies nothing.
What is not copied keeps its fresh N(0, 0.02) initialisation.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

from .checks import check_batches, check_finetune, check_tokenizer, warn_truncated
from .fast import FastGPT
from .loss import REGRESSIONS, STSB_CLASSES, prior_loss, regression_predictions, task_loss
from .model import GPT
from .optim import make_optimizer, train_step, warmup_linear
from .records import append_records, make_record, per_example_record, provenance
from .runtime import (
    FLOAT32,
    Precision,
    attention_backends,
    attention_name,
    pad_multiple,
    pick_device,
    pick_precision,
    progress_bar,
    seed_everything,
)
from .tasks import (
    Example,
    TaskSpec,
    compute_metrics,
    get_task,
)
from .tokenizer import SPECIAL_TOKENS
from .transforms import Batch, Encoded, batches, collate, encode_example


@dataclass(frozen=True)
class FinetuneConfig:
    """Fine-tuning settings of §4.1; the defaults are the paper's."""

    lr: float = 6.25e-5
    batch_size: int = 32
    epochs: int = 3
    warmup: float = 0.002  # fraction of training spent warming up (0.2%), then linear decay
    weight_decay: float = 0.01  # as in pre-training: weights of rank >= 2
    grad_clip: float = 1.0
    lm_coef: float = 0.5  # lambda of L3; 0 for the "w/o aux LM" ablation
    clf_pdrop: float = 0.1
    regression: str = "soft_labels"  # STS-B's head: the released code's soft labels, or "mse"
    n_transfer: int | None = None  # blocks transferred (None: all; 0: embeddings; -1: nothing)
    max_len: int | None = None  # longest sequence (None: the model's context)
    eval_batch_size: int = 64
    eval_train_examples: int = 0  # also score this many training examples each epoch
    score_every_epoch: bool = True  # False: the eval splits scored after the last epoch only
    bf16: bool = True  # mixed precision on CUDA: bf16, or fp16 without it (runtime.pick_precision)
    compile: bool = False
    seed: int = 0
    experiment: str = "finetune"


class TaskModel(nn.Module):
    """GPT-1 (or the LSTM baseline) with the special tokens and the task head W_y of one task
    family."""

    def __init__(
        self,
        transformer: nn.Module,
        task: TaskSpec,
        clf_pdrop: float = 0.1,
        regression: str = "soft_labels",
    ) -> None:
        super().__init__()
        if transformer.config.n_special < len(SPECIAL_TOKENS):
            raise ValueError("the transformer has no special tokens: call add_special_tokens()")
        if regression not in REGRESSIONS:
            raise ValueError(f"regression={regression!r}: choose one of {REGRESSIONS}")
        self.transformer = transformer
        self.family = task.family
        # None for a task with classes or answers; else how its score is trained (STS-B)
        self.regression = regression if task.family == "similarity" and not task.labels else None
        n_out = {None: len(task.labels), "mse": 1, "soft_labels": STSB_CLASSES}[self.regression]
        n_out = 1 if task.family == "multiple_choice" else n_out
        self.head = nn.Linear(transformer.config.n_embd, n_out)  # W_y
        nn.init.normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)
        self.clf_pdrop = clf_pdrop

    def forward(self, batch: Batch, lm: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The task scores (examples, classes or answers; STS-B: (examples, 6) logits, or
        (examples,) with MSE), and with ``lm`` the auxiliary L1, the mean of each sequence's mean
        over its real tokens."""
        l1 = None
        if lm:
            out = self.transformer(
                batch.ids,
                targets=batch.ids[:, 1:],
                loss_mask=batch.mask[:, 1:],
                reduction="mean_of_sequences",
            )
            hidden, l1 = out.hidden, out.loss
        else:
            hidden, _ = self.transformer.hidden(batch.ids)
        rows = torch.arange(batch.ids.size(0), device=batch.ids.device)
        h = hidden[rows, batch.extract].view(-1, batch.n_seq, hidden.size(-1))
        if self.family == "similarity":
            h = h.sum(1)  # the two orders' extract vectors, added
        elif self.family != "multiple_choice":
            h = h[:, 0]
        if self.training and self.clf_pdrop > 0:
            # one mask per example: shared by its answers in multiple choice
            shape = (h.size(0), 1, h.size(-1)) if h.dim() == 3 else h.shape
            keep = torch.full(shape, 1 - self.clf_pdrop, device=h.device, dtype=h.dtype)
            h = h * torch.bernoulli(keep) / (1 - self.clf_pdrop)
        scores = self.head(h)
        if self.family == "multiple_choice" or self.regression == "mse":
            scores = scores.squeeze(-1)
        return scores, l1


def transfer(src, dst, n_transfer: int | None) -> list[str]:
    """Copy the embeddings and the first ``n_transfer`` blocks (None: all; -1: not even the
    embeddings) of ``src`` into ``dst``; returns the names copied."""
    if n_transfer is None:
        n_transfer = src.config.n_layer
    if n_transfer < -1 or n_transfer > src.config.n_layer:
        raise ValueError(
            f"n_transfer={n_transfer}: use -1 (nothing), 0 (embeddings only) up "
            f"to {src.config.n_layer} (every block)"
        )
    if n_transfer == -1:
        return []
    copied = []
    with torch.no_grad():
        rows = src.tokens_embed.weight.size(0)
        dst.tokens_embed.weight[:rows] = src.tokens_embed.weight
        copied.append("tokens_embed.weight")
        if hasattr(src, "positions_embed"):  # the LSTM has none
            n_pos = min(src.config.n_ctx, dst.config.n_ctx)
            dst.positions_embed.weight[:n_pos] = src.positions_embed.weight[:n_pos]
            copied.append("positions_embed.weight")
        for i in range(n_transfer):
            dst.h[i].load_state_dict(src.h[i].state_dict())
            copied += [f"h.{i}.{k}" for k in src.h[i].state_dict()]
    return copied


def build_task_model(
    pretrained,
    task: TaskSpec,
    n_transfer: int | None = None,
    clf_pdrop: float = 0.1,
    seed: int = 0,
    max_len: int | None = None,
    regression: str = "soft_labels",
) -> TaskModel:
    """A fresh N(0, 0.02) model of ``pretrained``'s kind (GPT-1, run as ``FastGPT``, or the
    LSTM) with the special tokens, given ``n_transfer`` layers of ``pretrained``, and a new
    head W_y for ``task`` (``regression``: STS-B's, see ``TaskModel``)."""
    cfg = pretrained.config
    n_special = max(cfg.n_special, len(SPECIAL_TOKENS))
    cfg = replace(cfg, n_special=n_special, n_ctx=min(cfg.n_ctx, max_len or cfg.n_ctx))
    seed_everything(seed)
    fresh = FastGPT(cfg) if isinstance(pretrained, GPT) else type(pretrained)(cfg)
    transfer(pretrained, fresh, n_transfer)
    return TaskModel(fresh, task, clf_pdrop, regression)


# ---------------------------------------------------------------- data and metrics


class _BatchEncoded:
    """``tok`` whose ``encode`` answers from one ``encode_batch`` of every distinct text of
    ``examples`` (in parallel, and a RACE article once for its questions): the same ids."""

    def __init__(self, tok, examples: Sequence[Example]) -> None:
        texts = list(dict.fromkeys(t for ex in examples for t in (*ex.texts, *ex.answers)))
        self.tok, self.ids = tok, dict(zip(texts, tok.encode_batch(texts), strict=True))

    def encode(self, text: str) -> list[int]:
        ids = self.ids.get(text)
        return list(ids) if ids is not None else self.tok.encode(text)

    def __getattr__(self, name: str):
        return getattr(self.tok, name)


#: Encodings already made in this process, by (tokenizer, task, n_ctx, examples): a plan or a
#: sweep fine-tunes on the same examples many times (layer transfer: 14 runs on RACE's 20,000),
#: and encoding them is CPU work the accelerator would wait on. The last few are kept.
_ENCODED: dict[tuple, tuple[Encoded, ...]] = {}


def encode_all(examples: Sequence[Example], task: TaskSpec, tok, n_ctx: int) -> list[Encoded]:
    """Every example's token sequences (answer counts checked against the task first)."""
    fingerprint = getattr(tok, "fingerprint", None)  # a stand-in tokenizer may have none
    key = (fingerprint(), task, n_ctx, tuple(examples)) if fingerprint else None
    try:
        if key in _ENCODED:
            return list(_ENCODED[key])
    except TypeError:  # an example built with lists: not kept
        key = None
    out = []
    if hasattr(tok, "encode_batch"):  # GPT1Tokenizer: every distinct text in one call
        tok = _BatchEncoded(tok, examples)
    for ex in examples:
        n = task.n_answers
        if task.family == "multiple_choice" and n and len(ex.answers) != n:
            raise ValueError(
                f"{task.name} example {ex.uid!r} has {len(ex.answers)} answers; the task has {n}"
            )
        out.append(encode_example(ex, task.family, tok, n_ctx, task.truncation))
    if key is not None:
        if len(_ENCODED) >= 8:
            _ENCODED.pop(next(iter(_ENCODED)))
        _ENCODED[key] = tuple(out)
    return out


@torch.no_grad()
def predict(
    model: TaskModel,
    items: Sequence[Encoded],
    batch_size: int = 64,
    device: torch.device | None = None,
    precision: Precision = FLOAT32,
    multiple: int | None = None,
) -> np.ndarray:
    """Scores for ``items`` in their order (inference mode, length-grouped batches, lengths
    rounded up to ``multiple``: None, ``runtime.pad_multiple``'s for the device)."""
    device = device or next(model.parameters()).device
    multiple, cap = pad_multiple(device, multiple), model.transformer.config.n_ctx
    was = model.training
    model.eval()
    out: list = [None] * len(items)
    with attention_backends(device):
        for b in batches(items, batch_size, None):
            batch = collate([items[i] for i in b], multiple=multiple, cap=cap).to(device)
            with precision.autocast(device.type):
                scores = model(batch, lm=False)[0].float().cpu()
            for i, v in zip(b, scores, strict=True):
                out[i] = v.numpy()
    model.train(was)
    return np.stack(out)


def predictions(
    model: TaskModel,
    items: Sequence[Encoded],
    batch_size: int = 64,
    device: torch.device | None = None,
    precision: Precision = FLOAT32,
) -> np.ndarray:
    """What the model predicts for each of ``items``: a class or answer index, or STS-B's
    score."""
    scores = predict(model, items, batch_size, device, precision)
    if model.regression:  # STS-B: the predicted score
        return regression_predictions(torch.from_numpy(scores), model.regression).numpy()
    return scores.argmax(-1)


def evaluate(
    model: TaskModel,
    task: TaskSpec,
    items: Sequence[Encoded],
    batch_size: int = 64,
    device: torch.device | None = None,
    precision: Precision = FLOAT32,
    return_predictions: bool = False,
):
    """The task's metrics on labelled ``items`` (with ``return_predictions``: and the
    predictions and labels they were computed from, for ``per_example_record``)."""
    preds = predictions(model, items, batch_size, device, precision)
    labels = np.array([e.label for e in items])
    metrics = compute_metrics(task, preds, labels)
    return (metrics, preds, labels) if return_predictions else metrics


@dataclass
class FinetuneResult:
    """Metrics by epoch and split, the first eval split's metrics at the last epoch, and the
    trained model. Nothing is selected on any split: the result is the last epoch's (the
    paper's recipe is a fixed 3 epochs), never the best epoch of the split it reports."""

    task: str
    metrics: pd.DataFrame  # epoch, split, metric, value
    final: dict[str, float]  # the first eval split's metrics after the last epoch
    wall_time: float
    train_time: float
    model: TaskModel = field(repr=False)
    records: list[dict] = field(default_factory=list, repr=False)


def _epoch(net, model, opt, items, rng, cfg, epoch, total, device, amp, bar) -> dict:
    """One pass over ``items`` in batches shuffled with ``rng``; returns the mean losses: L3
    (``loss``), and its parts L2 (``task_loss``) and L1 (``lm_loss``, 0 where lambda is 0).
    ``amp``: the run's ``Precision`` and its ``GradScaler`` (None but for float16)."""
    precision, scaler = amp
    model.train()
    order = batches(items, cfg.batch_size, rng, drop_last=True)
    sums = torch.zeros(3, device=device)  # L3, L2, L1, summed over the epoch's updates
    # lengths rounded up (a GPU: few shapes); padding after _classify_ changes nothing
    shape = {"multiple": pad_multiple(device), "cap": model.transformer.config.n_ctx}
    for step, b in enumerate(order, start=(epoch - 1) * len(order)):  # updates taken before
        batch = collate([items[j] for j in b], **shape).to(device, non_blocking=True)
        lr = cfg.lr * warmup_linear(step / total, cfg.warmup)

        def losses(batch=batch):
            with precision.autocast(device.type), attention_backends(device):
                scores, l1 = net(batch, lm=cfg.lm_coef > 0)
            parts = task_loss(scores, batch.labels, model.regression, l1, cfg.lm_coef)
            sums.add_(torch.stack(parts).detach())
            yield parts[0]

        train_step(model, opt, lr, losses(), cfg.grad_clip, scaler, check=step == 0)
        bar.update(1)
    means = (sums / len(order)).tolist()
    bar.set_postfix(loss=f"{means[0]:.3f}")
    return dict(zip(("loss", "task_loss", "lm_loss"), means, strict=True))


def _encoded(model: TaskModel, task: TaskSpec, tok, train, evals: dict, cfg: FinetuneConfig):
    """The §3.3 encodings a run trains and scores on (truncations warned of), the scored ones
    by split (``cfg.eval_train_examples`` of the training examples as "train"), and the ids
    of the examples each scored split holds, in order."""
    n_ctx = model.transformer.config.n_ctx
    train_items = encode_all(train, task, tok, n_ctx)
    eval_items = {k: encode_all(v, task, tok, n_ctx) for k, v in evals.items()}
    warn_truncated(task, dict(evals, train=train), dict(eval_items, train=train_items), tok, n_ctx)
    uids = {k: [e.uid for e in v] for k, v in evals.items()}
    if cfg.eval_train_examples:
        n = min(cfg.eval_train_examples, len(train_items))
        picked = random.Random(cfg.seed).sample(range(len(train_items)), n)
        eval_items["train"] = [train_items[i] for i in picked]
        uids["train"] = [train[i].uid for i in picked]
    return train_items, eval_items, uids


def finetune(
    pretrained,
    tok,
    task: str | TaskSpec,
    train: Sequence[Example],
    evals: dict[str, Sequence[Example]],
    cfg: FinetuneConfig = FinetuneConfig(),
    *,
    out_dir: str | os.PathLike | None = None,
    device: str | None = None,
    progress: bool = True,
    scale: str | None = None,
    data: str | None = None,
    limits: dict[str, int | None] | None = None,
    init: str | None = None,
) -> FinetuneResult:
    """Fine-tune ``pretrained`` on ``task`` with L3; evaluate on ``evals`` after each epoch.

    ``evals`` maps a split name to labelled examples, each scored after every epoch (the last
    alone without ``cfg.score_every_epoch``); ``final`` holds the first one's metrics after the
    last epoch (none is chosen on any split). With ``out_dir``, the records go to
    ``out_dir/records.jsonl``: each split's metrics, and after the last epoch its predictions
    (``per_example_record``); their config keeps ``limits`` (``run_task``'s) and ``init``.
    """
    task = get_task(task) if isinstance(task, str) else task
    device = pick_device(device)
    check_finetune(task, cfg, train, evals)
    check_tokenizer(tok, pretrained, "fine-tune with the model's own tokenizer")
    t_start = time.perf_counter()
    model = build_task_model(
        pretrained, task, cfg.n_transfer, cfg.clf_pdrop, cfg.seed, cfg.max_len, cfg.regression
    ).to(device)
    train_items, eval_items, uids = _encoded(model, task, tok, train, evals, cfg)
    check_batches(len(train_items), cfg)
    opt = make_optimizer(model, cfg.lr, cfg.weight_decay)
    net = torch.compile(model) if cfg.compile else model
    precision, rng = pick_precision(device, cfg.bf16), random.Random(cfg.seed)
    scaler = precision.scaler(device)
    total = len(train_items) // cfg.batch_size * cfg.epochs  # full batches only
    config = {"model": asdict(model.transformer.config), "train_examples": len(train_items)}
    config |= {"pad_multiple": pad_multiple(device), "attention": attention_name(device)}
    config |= {k: v for k, v in (("limits", limits), ("init", init)) if v is not None}
    base = {"experiment": cfg.experiment, "task": task.name, "scale": scale, "seed": cfg.seed}
    base |= {"config": asdict(cfg) | config, "data": data, **provenance(device)}
    # beside L3's metrics: L2 and L1 each epoch, and the L2 of predicting the labels' prior
    prior = prior_loss([e.label for e in train], model.regression, task.n_answers)
    parts = [make_record("prior_task_loss", prior, **base, split="train_loss", step=0)]
    records, train_time = [], 0.0
    bar = progress_bar(
        total=total, desc=f"fine-tuning {task.name}", unit="update", enabled=progress
    )
    for epoch in range(1, cfg.epochs + 1):
        t0 = time.perf_counter()
        args = (epoch, total, device, (precision, scaler), bar)
        train_losses = _epoch(net, model, opt, train_items, rng, cfg, *args)
        train_time += time.perf_counter() - t0
        scored = {
            split: evaluate(model, task, items, cfg.eval_batch_size, device, precision, True)
            for split, items in eval_items.items()
            if cfg.score_every_epoch or epoch == cfg.epochs
        }  # each split's (metrics, predictions, labels)
        epoch_metrics = {"train_loss": {"loss": train_losses.pop("loss")}}
        epoch_metrics |= {split: got[0] for split, got in scored.items()}
        wall = time.perf_counter() - t_start
        for split, ms in epoch_metrics.items():
            records += _records(ms, **base, split=split, step=epoch, wall_time=wall)
        parts += _records(train_losses, **base, split="train_loss", step=epoch, wall_time=wall)
    bar.close()
    metrics = pd.DataFrame(records)[["step", "split", "metric", "value"]]
    metrics = metrics.rename(columns={"step": "epoch"})
    # the last epoch's predictions, one record per split: what a bootstrap interval needs
    records += [
        per_example_record(*scored[split][1:], uids[split], **base, split=split, step=epoch)
        for split in eval_items
    ] + parts
    if out_dir:
        append_records(Path(out_dir) / "records.jsonl", records)
    wall = time.perf_counter() - t_start
    final = dict(epoch_metrics[next(iter(evals))])
    return FinetuneResult(task.name, metrics, final, wall, train_time, model, records)


def _records(metrics: dict[str, float], **fields) -> list[dict]:
    return [make_record(metric, value, **fields) for metric, value in metrics.items()]
