"""Supervised fine-tuning (§3.2): L3 = L2 + lambda * L1, the task heads, and layer transfer.

    P(y | x^1..x^m) = softmax(h_l^m W_y)      L2(C) = sum log P(y | x^1..x^m)
    L3(C) = L2(C) + lambda * L1(C),  lambda = 0.5

``h_l^m`` is the final block's state at the ``_classify_`` token of each sequence (never "the
last index" of a padded batch). The only new parameters are W_y and the embeddings of the three
special tokens. Heads, as in the released code: classification and entailment read one extract
vector; similarity ADDS the extract vectors of its two orders, then W_y; multiple choice maps
each answer's extract vector to one scalar and takes a softmax over the answers, with ONE
classifier-dropout mask shared by an example's answers. STS-B is a regression: W_y gives one
number and the loss is the mean squared error to the gold 0-5 score (the paper does not say;
the choice is ours). The loss is ``mean(task loss) + lambda * mean(per-sequence mean LM loss
over the whole transformed sequence)``, as in the released code.

Layer transfer (§5, Figure 2 left), the released code's meaning: ``n_transfer = K`` copies the
embeddings and the first K blocks; K = 0 copies the embeddings only; K = -1 copies nothing.
What is not copied keeps its fresh N(0, 0.02) initialisation.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn
from tqdm.auto import tqdm

from .model import GPT, SPECIAL_TOKENS, lm_loss
from .pretrain import PretrainConfig, make_optimizer
from .records import append_records, make_record, provenance
from .runtime import pick_device, seed_everything
from .tasks import Example, TaskSpec, get_task
from .transforms import Batch, Encoded, collate, encode_example


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
    n_transfer: int | None = None  # blocks transferred (None: all; 0: embeddings; -1: nothing)
    max_len: int | None = None  # longest sequence (None: the model's context)
    length_grouped: bool = True  # batches of similar lengths, padded to their longest
    pad_to_context: bool = False  # pad every batch to max_len (the slow way, for comparison)
    eval_batch_size: int = 64
    eval_train_examples: int = 0  # also score this many training examples each epoch
    bf16: bool = True
    compile: bool = False
    seed: int = 0
    experiment: str = "finetune"


#: Fine-tuning at each scale: smoke uses a larger rate and more epochs so a tiny model learns
#: from the fixtures in seconds; cpu uses smaller batches for its few examples; small and paper
#: use the paper's settings.
FINETUNE_PRESETS: dict[str, FinetuneConfig] = {
    "smoke": FinetuneConfig(lr=2e-3, epochs=4, batch_size=8),
    "cpu": FinetuneConfig(batch_size=16),
    "small": FinetuneConfig(),
    "paper": FinetuneConfig(),
}


#: Examples per task at each scale, (train, eval) by task family or "default" (None: all),
#: subsampled with the seed; the records say so. At cpu scale they keep the whole book near
#: 1.5 hours on two cores; a multiple-choice example is four sequences, so it gets a quarter.
DATA_LIMITS: dict[str, dict[str, tuple[int | None, int | None]]] = {
    "cpu": {"default": (800, 400), "multiple_choice": (200, 200)},
    "small": {"default": (20_000, None)},
}


def default_limits(
    scale: str, task: str, limit: int | None = None, eval_limit: int | None = None
) -> dict[str, int | None]:
    """``run_task``'s ``limit`` and ``eval_limit``: as given, or where None the scale's default
    for ``task``."""
    by_family = DATA_LIMITS.get(scale, {})
    train, evals = by_family.get(get_task(task).family, by_family.get("default", (None, None)))
    return {
        "limit": train if limit is None else limit,
        "eval_limit": evals if eval_limit is None else eval_limit,
    }


def warmup_linear(x: float, warmup: float) -> float:
    """The released code's fine-tuning schedule at fraction ``x`` of training: ``x / warmup``
    during warm-up, then ``1 - x`` (linear decay to 0)."""
    return x / warmup if x < warmup else max(0.0, 1.0 - x)


class TaskOutput(NamedTuple):
    scores: torch.Tensor  # (examples, classes), (examples, answers) or (examples,) for STS-B
    lm_logits: torch.Tensor | None = None  # (sequences, T, tokens), if asked for
    lm_loss: torch.Tensor | None = None  # L1 as a loss (the mean of each sequence's mean)


class TaskModel(nn.Module):
    """GPT-1 (or the LSTM baseline) with the special tokens and the task head W_y of one task
    family."""

    def __init__(self, transformer: nn.Module, task: TaskSpec, clf_pdrop: float = 0.1) -> None:
        super().__init__()
        if transformer.config.n_special < len(SPECIAL_TOKENS):
            raise ValueError("the transformer has no special tokens: call add_special_tokens()")
        self.transformer = transformer
        self.family = task.family
        self.regression = task.family == "similarity" and not task.labels
        n_out = 1 if self.regression or task.family == "multiple_choice" else len(task.labels)
        self.head = nn.Linear(transformer.config.n_embd, n_out)  # W_y
        nn.init.normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)
        self.clf_pdrop = clf_pdrop

    def forward(self, batch: Batch, lm: bool = True, return_logits: bool = False) -> TaskOutput:
        """The task scores, and with ``lm`` the auxiliary L1 over each sequence's real tokens,
        computed from the hidden states (``fused_lm_loss``); the LM logits only if asked for."""
        lm_args = {"targets": batch.ids[:, 1:], "loss_mask": batch.mask[:, 1:]} if lm else {}
        out = self.transformer(
            batch.ids,
            return_logits=return_logits,
            validate=False,
            reduction="mean_of_sequences",
            **lm_args,
        )
        h = out.hidden[torch.arange(batch.ids.size(0), device=batch.ids.device), batch.extract]
        h = h.view(-1, batch.n_seq, h.size(-1))  # (examples, sequences, n_embd)
        if self.family == "similarity":
            h = h.sum(1)  # the two orders' extract vectors, added
        elif self.family != "multiple_choice":
            h = h[:, 0]
        if self.training and self.clf_pdrop > 0:
            # one mask per example: shared by its answers in multiple choice
            keep = torch.full(
                (h.size(0), 1, h.size(-1)) if h.dim() == 3 else h.shape,
                1 - self.clf_pdrop,
                device=h.device,
                dtype=h.dtype,
            )
            h = h * torch.bernoulli(keep) / (1 - self.clf_pdrop)
        scores = self.head(h)
        if self.family == "multiple_choice" or self.regression:
            scores = scores.squeeze(-1)
        return TaskOutput(scores, out.logits, out.loss)


def task_loss(
    out: TaskOutput, batch: Batch, model: TaskModel, lm_coef: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """L3 as a loss to minimise: (total, task part, LM part), each a mean over the batch."""
    if model.regression:
        l2 = F.mse_loss(out.scores.float(), batch.labels.float())
    else:
        l2 = F.cross_entropy(out.scores.float(), batch.labels)
    if lm_coef == 0 or (out.lm_loss is None and out.lm_logits is None):
        return l2, l2, torch.zeros_like(l2)
    l1 = out.lm_loss
    if l1 is None:
        l1 = lm_loss(
            out.lm_logits[:, :-1], batch.ids[:, 1:], batch.mask[:, 1:], reduction="per_sequence"
        ).mean()
    return l2 + lm_coef * l1, l2, l1


def transfer(src: GPT, dst: GPT, n_transfer: int | None) -> list[str]:
    """Copy the embeddings and the first ``n_transfer`` blocks of ``src`` into ``dst``.

    None: all blocks; 0: the embeddings only; -1: nothing. Returns the names copied.
    """
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
    pretrained: GPT,
    task: TaskSpec,
    n_transfer: int | None = None,
    clf_pdrop: float = 0.1,
    seed: int = 0,
    max_len: int | None = None,
) -> TaskModel:
    """A fresh N(0, 0.02) model of ``pretrained``'s kind (GPT or LSTM) with the special tokens,
    given ``n_transfer`` layers of ``pretrained``, and a new head W_y for ``task``."""
    cfg = pretrained.config
    n_special = max(cfg.n_special, len(SPECIAL_TOKENS))
    cfg = replace(cfg, n_special=n_special, n_ctx=min(cfg.n_ctx, max_len or cfg.n_ctx))
    seed_everything(seed)
    fresh = type(pretrained)(cfg)
    transfer(pretrained, fresh, n_transfer)
    return TaskModel(fresh, task, clf_pdrop)


# ---------------------------------------------------------------- data and metrics


def encode_all(examples: Sequence[Example], task: TaskSpec, tok, n_ctx: int) -> list[Encoded]:
    """Every example's token sequences (labels checked against the task first)."""
    out = []
    for ex in examples:
        if (
            task.family == "multiple_choice"
            and task.n_answers
            and len(ex.answers) != task.n_answers
        ):
            raise ValueError(
                f"{task.name} example {ex.uid!r} has {len(ex.answers)} answers; "
                f"the task has {task.n_answers}"
            )
        out.append(encode_example(ex, task.family, tok, n_ctx))
    return out


def batches(
    items: Sequence[Encoded],
    batch_size: int,
    rng: random.Random | None,
    length_grouped: bool = True,
) -> list[list[int]]:
    """Batches of indices: shuffled (with ``rng``), grouped by length when asked.

    Length grouping sorts each window of 50 batches by length before cutting it, then shuffles
    the batches, so padding is small and the order still random.
    """
    idx = list(range(len(items)))
    if rng is not None:
        rng.shuffle(idx)
    if length_grouped:
        window = 50 * batch_size
        key = lambda i: max(len(q) for q in items[i].seqs)  # noqa: E731
        idx = [i for w in range(0, len(idx), window) for i in sorted(idx[w : w + window], key=key)]
    out = [idx[i : i + batch_size] for i in range(0, len(idx), batch_size)]
    if rng is not None and length_grouped:
        rng.shuffle(out)
    return out


def compute_metrics(
    task: TaskSpec, predictions: np.ndarray, labels: np.ndarray
) -> dict[str, float]:
    """The task's metrics (scikit-learn and scipy), as percentages like the paper's."""
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

    fns = {
        "accuracy": lambda: accuracy_score(labels, predictions),
        "matthews": lambda: matthews_corrcoef(labels, predictions),
        "f1": lambda: f1_score(labels, predictions),
        "pearson": lambda: pearsonr(predictions, labels)[0],
        "spearman": lambda: spearmanr(predictions, labels)[0],
    }
    return {m: 100.0 * float(fns[m]()) for m in task.metrics}


@torch.no_grad()
def predict(
    model: TaskModel,
    items: Sequence[Encoded],
    batch_size: int = 64,
    device: torch.device | None = None,
    bf16: bool = False,
) -> np.ndarray:
    """Scores for ``items`` in their order (inference mode, length-grouped batches)."""
    device = device or next(model.parameters()).device
    was = model.training
    model.eval()
    scores: list[tuple[list[int], torch.Tensor]] = []
    for b in batches(items, batch_size, None, length_grouped=True):
        batch = collate([items[i] for i in b]).to(device)
        with torch.autocast(device.type, torch.bfloat16, enabled=bf16):
            scores.append((b, model(batch, lm=False).scores.float().cpu()))
    model.train(was)
    out = [None] * len(items)
    for b, s in scores:
        for i, v in zip(b, s, strict=True):
            out[i] = v.numpy()
    return np.stack(out)


def evaluate(
    model: TaskModel,
    task: TaskSpec,
    items: Sequence[Encoded],
    batch_size: int = 64,
    device: torch.device | None = None,
    bf16: bool = False,
) -> dict[str, float]:
    """The task's metrics on labelled ``items``."""
    scores = predict(model, items, batch_size, device, bf16)
    preds = scores if model.regression else scores.argmax(-1)
    return compute_metrics(task, preds, np.array([e.label for e in items]))


# ---------------------------------------------------------------- training


@dataclass
class FinetuneResult:
    """Metrics by epoch and split, the best epoch, and the trained model."""

    task: str
    metrics: object  # DataFrame: epoch, split, metric, value
    best: dict[str, float]  # the eval split's metrics at the best epoch
    best_epoch: int
    wall_time: float
    train_time: float
    model: TaskModel = field(repr=False)
    records: list[dict] = field(default_factory=list, repr=False)


def finetune(
    pretrained: GPT,
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
) -> FinetuneResult:
    """Fine-tune ``pretrained`` on ``task`` with L3; evaluate on ``evals`` after each epoch.

    ``evals`` maps a split name to labelled examples; the first is the one the best epoch is
    chosen on. With ``out_dir``, records go to ``out_dir/records.jsonl`` and the best and last
    models to ``out_dir/{best,last}.safetensors``.
    """
    task = get_task(task) if isinstance(task, str) else task
    device = pick_device(device)
    if not train:
        raise ValueError(f"no training examples for {task.name}")
    if not evals or any(not v for v in evals.values()):
        raise ValueError(
            f"give labelled evaluation examples for {task.name}, e.g. "
            "{'dev': load_examples(task, 'dev', source)}"
        )
    for split, exs in {"train": train, **evals}.items():
        unlabeled = [e.uid for e in exs if e.label is None]
        if unlabeled:
            raise ValueError(
                f"{task.name} {split} has {len(unlabeled)} unlabelled examples (e.g. "
                f"{unlabeled[0]!r}): train and evaluate on labelled splits"
            )
    t_start = time.perf_counter()
    model = build_task_model(
        pretrained, task, cfg.n_transfer, cfg.clf_pdrop, cfg.seed, cfg.max_len
    ).to(device)
    n_ctx = model.transformer.config.n_ctx
    train_items = encode_all(train, task, tok, n_ctx)
    eval_items = {k: encode_all(v, task, tok, n_ctx) for k, v in evals.items()}
    if cfg.eval_train_examples:
        pick = random.Random(cfg.seed).sample(
            range(len(train_items)), min(cfg.eval_train_examples, len(train_items))
        )
        eval_items["train"] = [train_items[i] for i in pick]
    opt = make_optimizer(model, _optimizer_config(cfg))
    net = torch.compile(model) if cfg.compile else model
    bf16 = cfg.bf16 and device.type == "cuda"
    rng = random.Random(cfg.seed)
    steps_per_epoch = math.ceil(len(train_items) / cfg.batch_size)
    total = steps_per_epoch * cfg.epochs
    base = {
        "experiment": cfg.experiment,
        "task": task.name,
        "scale": scale,
        "seed": cfg.seed,
        "config": asdict(cfg)
        | {"model": asdict(model.transformer.config), "train_examples": len(train_items)},
        "data": data,
        **provenance(device),
    }
    rows, records, best, best_epoch = [], [], None, 0
    out_dir = Path(out_dir) if out_dir else None
    main = next(iter(evals))
    step, train_time = 0, 0.0
    bar = tqdm(total=total, disable=not progress, desc=f"{task.name}", unit="step")
    for epoch in range(1, cfg.epochs + 1):
        model.train()
        t0 = time.perf_counter()
        loss_sum = torch.zeros((), device=device)
        for b in batches(train_items, cfg.batch_size, rng, cfg.length_grouped):
            pad_to = (cfg.max_len or n_ctx) if cfg.pad_to_context else None
            batch = collate([train_items[i] for i in b], pad_to=pad_to)
            batch = batch.to(device, non_blocking=True)
            lr = cfg.lr * warmup_linear((step + 1) / total, cfg.warmup)
            for g in opt.param_groups:
                g["lr"] = lr
            with torch.autocast(device.type, torch.bfloat16, enabled=bf16):
                out = net(batch, lm=cfg.lm_coef > 0)
            loss, _, _ = task_loss(out, batch, model, cfg.lm_coef)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            opt.zero_grad(set_to_none=True)
            loss_sum += loss.detach()
            step += 1
            bar.update(1)
        train_loss = loss_sum.item() / steps_per_epoch
        train_time += time.perf_counter() - t0
        bar.set_postfix(loss=f"{train_loss:.3f}")
        epoch_metrics = {"train_loss": {"loss": train_loss}}
        for split, items in eval_items.items():
            epoch_metrics[split] = evaluate(model, task, items, cfg.eval_batch_size, device, bf16)
        wall = time.perf_counter() - t_start
        for split, ms in epoch_metrics.items():
            for metric, value in ms.items():
                rows.append({"epoch": epoch, "split": split, "metric": metric, "value": value})
                records.append(
                    make_record(metric, value, split=split, step=epoch, wall_time=wall, **base)
                )
        score = epoch_metrics[main][task.metrics[0]]
        if best is None or score > best[task.metrics[0]]:
            best, best_epoch = dict(epoch_metrics[main]), epoch
            if out_dir:
                _save_model(model, out_dir / "best.safetensors")
    bar.close()
    if out_dir:
        _save_model(model, out_dir / "last.safetensors")
        append_records(out_dir / "records.jsonl", records)
    import pandas as pd

    return FinetuneResult(
        task.name,
        pd.DataFrame(rows),
        best,
        best_epoch,
        time.perf_counter() - t_start,
        train_time,
        model,
        records,
    )


def _optimizer_config(cfg: FinetuneConfig) -> PretrainConfig:
    """Pre-training's optimiser (AdamW, the same decay scope) at fine-tuning's rate and decay."""
    return PretrainConfig(max_lr=cfg.lr, weight_decay=cfg.weight_decay)


def _save_model(model: nn.Module, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    save_file({k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}, str(tmp))
    os.replace(tmp, path)


# ---------------------------------------------------------------- one task, end to end


def _short(path: str) -> str:
    """A data file named relative to the fixtures, so records do not hold this machine's paths."""
    from .tasks import FIXTURES

    return path.replace(str(FIXTURES), "fixture:")


def run_task(
    pretrained: GPT,
    tok,
    task: str,
    source: str | os.PathLike = "fixture",
    cfg: FinetuneConfig = FinetuneConfig(),
    *,
    limit: int | None = None,
    eval_limit: int | None = None,
    also: Sequence[str] = (),
    eval_split: str | None = None,
    out_dir: str | os.PathLike | None = None,
    scale: str | None = None,
    device: str | None = None,
    progress: bool = True,
) -> FinetuneResult:
    """Load ``task`` from ``source``, fine-tune on its train split, score its eval split.

    ``also`` names tasks that share the training data and are scored by the same model on
    their own eval split (MNLI mismatched beside matched; RACE-m and RACE-h beside RACE).
    ``limit`` and ``eval_limit`` subsample (seeded) for quicker runs; the records say so.
    ``eval_split`` overrides the task's (e.g. RACE's dev instead of its test).
    """
    from .tasks import describe_source, load_examples

    spec = get_task(task)
    train = load_examples(spec, "train", source, limit, cfg.seed)
    split = eval_split or spec.eval_split
    evals = {split: load_examples(spec, split, source, eval_limit, cfg.seed)}
    data = (
        f"{_short(describe_source(spec, 'train', source))} ({len(train)} examples"
        f"{'' if limit is None else f', limit {limit}'})"
    )
    out = Path(out_dir) / spec.name if out_dir else None
    result = finetune(
        pretrained,
        tok,
        spec,
        train,
        evals,
        cfg,
        out_dir=out,
        device=device,
        progress=progress,
        scale=scale,
        data=data,
    )
    for other in also:
        o = get_task(other)
        items = encode_all(
            load_examples(o, o.eval_split, source, eval_limit, cfg.seed),
            o,
            tok,
            result.model.transformer.config.n_ctx,
        )
        metrics = evaluate(
            result.model, o, items, cfg.eval_batch_size, bf16=cfg.bf16 and torch.cuda.is_available()
        )
        base = {k: v for k, v in result.records[0].items() if k not in ("metric", "value")}
        recs = [
            make_record(m, v, **{**base, "task": o.name, "split": o.eval_split, "step": cfg.epochs})
            for m, v in metrics.items()
        ]
        result.records.extend(recs)
        if out is not None:
            append_records(out / "records.jsonl", recs)
    return result
