"""Supervised fine-tuning (§3.2): L3 = L2 + lambda * L1, one run at a time.

    L2(C) = sum log P(y | x^1..x^m)      L3(C) = L2(C) + lambda * L1(C),  lambda = 0.5

A run (``FinetuneRun``) is one call of ``finetune``: a task model from the pre-trained one
(``heads.build_task_model``, layer transfer there), the examples encoded once, then each epoch
its updates and its scores (``scoring``). The loss is ``mean(task loss) + lambda *
mean(per-sequence mean LM loss over the whole transformed sequence)``, as in the released code
(``loss.task_loss``).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from .checks import (
    check_batches,
    check_config,
    check_finetune,
    check_run_task,
    check_tokenizer,
    warn_truncated,
)
from .heads import TaskModel, build_task_model
from .loss import prior_loss, task_loss
from .optim import make_optimizer, train_step, warmup_linear
from .records import PER_EXAMPLE, append_records, make_record, per_example_record, provenance
from .runtime import (
    attention_backends,
    attention_name,
    fitting,
    pad_multiple,
    pick_device,
    pick_precision,
    progress_bar,
)
from .scoring import encode_all, evaluate
from .settings import FinetuneConfig
from .steps import GraphedSteps, graphs_pay
from .tasks import Example, TaskSpec, compute_metrics, data_location, get_task, load_examples
from .transforms import batches, collate


@dataclass
class FinetuneResult:
    """A run's metrics and model: the last epoch's (the paper's fixed 3), never the best
    epoch of the split it reports."""

    task: str
    metrics: pd.DataFrame  # epoch, split, metric, value
    final: dict[str, float]  # the first eval split's metrics after the last epoch
    wall_time: float
    train_time: float
    model: TaskModel = field(repr=False)
    records: list[dict] = field(default_factory=list, repr=False)


@dataclass(frozen=True)
class FinetuneRun:
    """One fine-tuning run. The examples are loaded from ``source`` (``limit`` and
    ``eval_limit`` subsample with the seed; ``eval_split`` overrides the task's; ``also``: tasks
    sharing the training data, scored by the same model after the last epoch, MNLI-mm beside
    MNLI-m), or given as ``examples`` (train, {split: examples})."""

    task: str | TaskSpec | None = None  # None: a template, each run's task set where it runs
    cfg: FinetuneConfig = FinetuneConfig()
    source: str | os.PathLike = "fixture"
    limit: int | None = None
    eval_limit: int | None = None
    eval_split: str | None = None
    also: Sequence[str] = ()
    examples: tuple[Sequence[Example], dict[str, Sequence[Example]]] | None = None
    out_dir: str | os.PathLike | None = None  # records go to out_dir/records.jsonl
    scale: str | None = None
    init: str | None = None  # where ``pretrained`` came from, for the records
    device: str | torch.device | None = None
    progress: bool = True

    @property
    def spec(self) -> TaskSpec:
        return get_task(self.task) if isinstance(self.task, str) else self.task

    def load(self) -> RunData:
        """The run's examples, every argument checked first (``checks``)."""
        spec, cfg = self.spec, self.cfg
        check_config(cfg)
        if self.examples is not None:
            train, evals = self.examples
            check_finetune(spec, train, evals)
            return RunData(train, dict(evals), {}, None, None)
        check_run_task(spec, self.source, self.limit, self.eval_limit, self.also, self.eval_split)
        train = load_examples(spec, "train", self.source, self.limit, cfg.seed)
        split = self.eval_split or spec.eval_split
        evals = {split: load_examples(spec, split, self.source, self.eval_limit, cfg.seed)}
        check_finetune(spec, train, evals)
        beside = {
            o: load_examples(o, get_task(o).eval_split, self.source, self.eval_limit, cfg.seed)
            for o in self.also
        }
        where = data_location(spec, "train", self.source)  # relative to source: no machine path
        said = f"{where} ({len(train)} examples" + (f", limit {self.limit})" if self.limit else ")")
        limits = {"limit": self.limit, "eval_limit": self.eval_limit}
        return RunData(train, evals, beside, said, limits)


@dataclass
class RunData:
    """A run's examples: trained on, scored each epoch, scored beside after the last (by task),
    and where they came from."""

    train: Sequence[Example]
    evals: dict[str, Sequence[Example]]
    beside: dict[str, Sequence[Example]]
    data: str | None
    limits: dict | None


def finetune(pretrained, tok, run: FinetuneRun) -> FinetuneResult:
    """Fine-tune ``pretrained`` on ``run``'s task with L3 and score it: its evaluation splits
    after each epoch (the last alone without ``cfg.score_every_epoch``), the tasks beside it
    after the last. With ``run.out_dir``, the records go to ``out_dir/records.jsonl``: each
    split's metrics, each epoch's L3, L2 and L1, and each scored example's prediction."""
    spec, cfg, data = run.spec, run.cfg, run.load()
    check_tokenizer(tok, pretrained, "fine-tune with the model's own tokenizer")
    device, t_start = pick_device(run.device), time.perf_counter()
    model = build_task_model(pretrained, spec, cfg).to(device)
    train, scored, uids = _encoded(model, spec, tok, data.train, data.evals, cfg)
    check_batches(len(train), cfg)
    precision, rng = pick_precision(device, cfg.bf16), random.Random(cfg.seed)
    graphs = graphs_pay(device, model, cfg, precision)
    opt = make_optimizer(model, cfg.lr, cfg.weight_decay, graphs=graphs)
    net = torch.compile(model) if cfg.compile else model
    steps = Updates(run, net, model, opt, precision, graphs)
    log = _RunLog(run, model, data, device, t_start)
    total = len(train) // cfg.batch_size * cfg.epochs  # full batches only
    bar = progress_bar(
        total=total, desc=f"fine-tuning {spec.name}", unit="update", enabled=run.progress
    )
    for epoch in range(1, cfg.epochs + 1):
        t0 = time.perf_counter()
        steps.sums.zero_()  # L3, L2, L1, summed over the epoch's updates on the device
        order = batches(train, cfg.batch_size, rng, drop_last=True)
        for b in order:
            lr = cfg.lr * warmup_linear(steps.done / total, cfg.warmup)
            steps.update([train[j] for j in b], lr)
            bar.update(1)
        steps.check()
        log.train_time += time.perf_counter() - t0
        means = (steps.sums / len(order)).tolist()
        losses = dict(zip(("loss", "task_loss", "lm_loss"), means, strict=True))
        bar.set_postfix(loss=f"{losses['loss']:.3f}")
        last = epoch == cfg.epochs
        got = {
            split: evaluate(model, spec, items, cfg.eval_batch_size, precision)
            for split, items in scored.items()
            if cfg.score_every_epoch or last
        }
        log.epoch(epoch, losses, got, uids if last else None)
    bar.close()
    if steps.graphs:
        steps.graphs.close()
    return log.result(tok, precision, steps)


class Updates:
    """A run's updates (``train_step``, or on CUDA each batch shape's graph), their losses
    summed on the device, the first non-finite one an error (checked every ``CHECK`` updates),
    and out of GPU memory the batch split into ``split`` micro-batches (the same update)."""

    CHECK = 32

    def __init__(self, run: FinetuneRun, net, model: TaskModel, opt, precision, graphs) -> None:
        self.run, self.net, self.model, self.opt, self.precision = run, net, model, opt, precision
        self.device = next(model.parameters()).device
        self.graphs = GraphedSteps(model, opt, self._losses, run.cfg.grad_clip) if graphs else None
        self.scaler = precision.scaler(self.device)
        self.sums = torch.zeros(3, device=self.device)
        self.bad = torch.tensor(-1, device=self.device)  # the first non-finite update, or -1
        self.done, self.split, self.lrs = 0, 1, []

    def update(self, items: list, lr: float) -> None:
        cfg = self.run.cfg
        if self.graphs and self.done and self.split == 1:  # the first update checks eagerly
            out = self.graphs.step(self.batch(items), lr)
            if out is not None:
                return self._updated(out, lr)
        check = self.done == 0
        sums, bad = self.sums.clone(), self.bad  # before this update

        def step(chunks: list[list]) -> None:
            # what an update out of memory left: its gradients, and its first parts' losses
            self.opt.zero_grad(set_to_none=True)
            self.sums.copy_(sums)
            self.bad = bad
            losses = (self._loss(c, len(c) / len(items)) for c in chunks)
            train_step(self.model, self.opt, lr, losses, cfg.grad_clip, self.scaler, check)

        split = fitting(items, step, self._alone, self.split)
        if split != self.split:
            self.split = split
            print(
                f"{self.run.spec.name}: out of GPU memory at batch {len(items)}: each update now "
                f"in {split} micro-batches (the same update; recorded)"
            )
        self._updated(None, lr)

    def _updated(self, losses: torch.Tensor | None, lr: float) -> None:
        """Count an update (its ``losses`` summed, where a graph's replay gave them)."""
        if losses is not None:
            self._add(losses)
        self.lrs.append(lr)
        self.done += 1
        if self.done % self.CHECK == 0:
            self.check()

    def batch(self, items: list):
        """``items`` padded on the CPU to a length the device meets often (``pad_multiple``)."""
        n_ctx = self.model.transformer.config.n_ctx
        return collate(items, multiple=pad_multiple(self.device), cap=n_ctx)

    def _losses(self, batch) -> torch.Tensor:
        """L3, L2 and L1 of a batch on the device, stacked."""
        cfg, device = self.run.cfg, self.device
        with self.precision.autocast(device.type), attention_backends(device):
            scores, l1 = self.net(batch, lm=cfg.lm_coef > 0)
        return torch.stack(task_loss(scores, batch.labels, self.model.regression, l1, cfg.lm_coef))

    def _add(self, losses: torch.Tensor) -> None:
        """Sum an update's losses, and note it if L3 is not finite (no wait for the GPU)."""
        self.sums.add_(losses.detach())
        first = (self.bad < 0) & ~torch.isfinite(losses[0])
        self.bad = torch.where(first, self.done, self.bad)

    def _loss(self, chunk: list, share: float) -> torch.Tensor:
        """L3 of a micro-batch, weighted by its ``share`` of the batch (1: the whole batch)."""
        parts = self._losses(self.batch(chunk).to(self.device, non_blocking=True))
        parts = parts if share == 1 else parts * share
        self._add(parts)
        return parts[0]

    def _alone(self, items: list) -> str:
        n = max(len(s) for it in items for s in it.seqs)
        return (
            f"{self.run.spec.name}: one example of up to {n} tokens a sequence runs out of GPU "
            "memory even alone: lower FinetuneConfig.max_len, or use a GPU with more memory"
        )

    def check(self) -> None:
        """An error naming the first update whose loss was not finite, if one was."""
        if (bad := int(self.bad)) >= 0:
            raise FloatingPointError(
                f"{self.run.spec.name}: the fine-tuning loss is not finite at update {bad + 1} "
                f"(learning rate {self.lrs[bad]:.2e}): the run stopped, none of its records "
                "kept (fine-tuning keeps no checkpoint: it starts again from the pre-trained "
                "model). Lower FinetuneConfig.lr or lengthen its warm-up, and run it again"
            )


def _encoded(model: TaskModel, task: TaskSpec, tok, train, evals: dict, cfg: FinetuneConfig):
    """The §3.3 encodings a run trains on, those it scores by split (with
    ``cfg.eval_train_examples`` training examples as "train"), and their examples' ids."""
    n_ctx = model.transformer.config.n_ctx
    train_items = encode_all(train, task, tok, n_ctx)
    eval_items = {k: encode_all(v, task, tok, n_ctx) for k, v in evals.items()}
    warn_truncated(task, dict(eval_items, train=train_items), n_ctx)
    uids = {k: [e.uid for e in v] for k, v in evals.items()}
    if cfg.eval_train_examples:
        n = min(cfg.eval_train_examples, len(train_items))
        picked = random.Random(cfg.seed).sample(range(len(train_items)), n)
        eval_items["train"] = [train_items[i] for i in picked]
        uids["train"] = [train[i].uid for i in picked]
    return train_items, eval_items, uids


class _RunLog:
    """What a run records, and its result."""

    def __init__(self, run: FinetuneRun, model: TaskModel, data: RunData, device, t_start) -> None:
        spec, cfg = run.spec, run.cfg
        config = {"model": asdict(model.transformer.config), "train_examples": len(data.train)}
        config |= {"pad_multiple": pad_multiple(device), "attention": attention_name(device)}
        config |= {k: v for k, v in (("limits", data.limits), ("init", run.init)) if v is not None}
        self.base = {
            "experiment": cfg.experiment,
            "task": spec.name,
            "scale": run.scale,
            "seed": cfg.seed,
            "config": asdict(cfg) | config,
            "data": data.data,
            **provenance(device),
        }
        # beside L3's metrics: L2 and L1 each epoch, and the L2 of predicting the labels' prior
        prior = prior_loss([e.label for e in data.train], model.regression, spec.n_answers)
        first = make_record("prior_task_loss", prior, **self.base, split="train_loss", step=0)
        self.parts = [first]
        self.run, self.model, self.data, self.device = run, model, data, device
        self.records, self.outcomes, self.besides, self.final, self.last = [], [], [], {}, {}
        self.train_time, self.t0 = 0.0, time.perf_counter()
        self.setup_time = self.t0 - t_start  # the model built and moved, the examples encoded

    def epoch(self, epoch: int, losses: dict, scored: dict, uids: dict | None) -> None:
        wall = time.perf_counter() - self.t0
        fields = {**self.base, "step": epoch, "wall_time": wall}
        metrics = {"train_loss": {"loss": losses.pop("loss")}}
        metrics |= {split: got[0] for split, got in scored.items()}
        for split, ms in metrics.items():
            self.records += [make_record(m, v, **fields, split=split) for m, v in ms.items()]
        self.parts += [make_record(m, v, **fields, split="train_loss") for m, v in losses.items()]
        if uids is not None:  # the last epoch: what a bootstrap interval needs
            self.outcomes = [
                per_example_record(*scored[s][1:], uids[s], **fields, split=s) for s in scored
            ]
            first = next(iter(self.data.evals))
            self.final = dict(scored[first][0])
            exs = map(repr, self.data.evals[first])  # an example's every field: the same input
            self.last = dict(zip(exs, zip(*scored[first][1:], strict=True), strict=True))

    def result(self, tok, precision, steps: Updates) -> FinetuneResult:
        """After the last epoch: the records of the seconds of the set-up and of the updates, of
        the graphs' replays and failures, the micro-batches out of GPU memory, and the tasks
        beside, written; the run's result."""
        fields = {**self.base, "split": "train_loss", "step": self.run.cfg.epochs}
        times = {"setup_seconds": self.setup_time, "update_seconds": self.train_time}
        self.parts += [make_record(m, v, **fields) for m, v in times.items()]
        if steps.split > 1:
            self.parts.append(make_record("micro_batches", steps.split, **fields))
        if steps.graphs:
            self.parts.append(make_record("graphed_updates", steps.graphs.replays, **fields))
            failed = len(steps.graphs.failed)
            self.parts += [make_record("graph_failures", failed, **fields)] if failed else []
        n_ctx, cfg = self.model.transformer.config.n_ctx, self.run.cfg
        for name, examples in self.data.beside.items():
            other, uids, exs = get_task(name), [e.uid for e in examples], list(map(repr, examples))
            if not all(e in self.last for e in exs):  # else RACE-m/h: RACE's own predictions
                items = encode_all(examples, other, tok, n_ctx)
                got = evaluate(self.model, other, items, cfg.eval_batch_size, precision)[1:]
                self.last |= dict(zip(exs, zip(*got, strict=True), strict=True))
            preds, labels = map(np.array, zip(*map(self.last.get, exs), strict=True))
            metrics = compute_metrics(other, preds, labels)
            where = {"task": other.name, "split": other.eval_split, "step": cfg.epochs}
            fields = {**self.records[0], **where}
            fields = {k: v for k, v in fields.items() if k not in ("metric", "value", PER_EXAMPLE)}
            self.besides += [make_record(m, v, **fields) for m, v in metrics.items()]
            self.besides.append(per_example_record(preds, labels, uids, **fields))
        wall = time.perf_counter() - self.t0 + self.setup_time
        records = self.records + self.outcomes + self.parts + self.besides
        if self.run.out_dir:
            append_records(Path(self.run.out_dir) / "records.jsonl", records)
        metrics = pd.DataFrame(self.records)[["step", "split", "metric", "value"]]
        metrics = metrics.rename(columns={"step": "epoch"})
        spec = self.run.spec.name
        return FinetuneResult(spec, metrics, self.final, wall, self.train_time, self.model, records)
