"""Unsupervised pre-training (§3.1, §4.1): maximise L1 with the paper's recipe.

    L1(U) = sum_i log P(u_i | u_{i-k}, ..., u_{i-1}; Theta)

The recipe: AdamW with the released code's decay scope and global gradient clip
(``optim.py``), the learning rate warmed up linearly from 0 to 2.5e-4 over 2,000 updates and
then annealed to 0 on a cosine, mini-batches of 64 random contiguous sequences of 512 tokens.
The paper ran 100 epochs over BooksCorpus.

``pretrain`` is one function of a config that returns its history; it runs on a CPU, on one GPU
(bf16 autocast, or float16 with loss scaling on GPUs without bf16; optional
``torch.compile``) and on many with PyTorch's DDP under ``torchrun``.
Checkpoints (``checkpoint.py``) hold everything a run needs to go on exactly where it stopped
and are checked against the run's config before it resumes. ``python -m gpt1lib.pretrain`` is
its command line (``pretrain/__main__.py``, above the scales it takes its defaults from).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
import warnings
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from ..checkpoint import (
    CheckpointError,
    clean_run,
    config_diff,
    latest_checkpoint,
    load_checkpoint,
    model_meta,
    read_state,
    save_and_prune,
    save_model,
)
from ..checks import check_pretrain_config, check_tokenizer
from ..corpus import Corpus
from ..optim import cosine_lr, make_optimizer, train_step
from ..records import append_records, keep_records, make_record, provenance, read_records, run_lock
from ..runtime import (
    FLOAT32,
    Dist,
    Precision,
    init_distributed,
    pick_device,
    pick_precision,
    progress_bar,
    seed_everything,
)


@dataclass(frozen=True)
class PretrainConfig:
    """The optimisation of §4.1; defaults are the paper's."""

    total_steps: int | None = None  # updates; None: `epochs` over the training blocks
    epochs: float = 100.0  # the paper: 100 epochs over BooksCorpus
    batch_size: int = 64  # sequences per update, over all processes
    micro_batch_size: int | None = None  # sequences per forward pass; accumulate up to batch_size
    max_lr: float = 2.5e-4
    warmup_steps: int = 2000  # linear warm-up from 0, then cosine annealing to 0
    weight_decay: float = 0.01  # decoupled (Loshchilov & Hutter), on weights of rank >= 2
    grad_clip: float = 1.0  # one global norm (released code; the paper does not say)
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    seed: int = 0
    log_interval: int = 10  # updates between training-loss records
    eval_interval: int = 500  # updates between validation losses
    eval_batches: int = 20  # validation batches of batch_size sequences
    ckpt_interval: int = 1000  # updates between resumable checkpoints
    n_log_checkpoints: int = 10  # log-spaced model checkpoints kept for the zero-shot chapter
    log_from: int = 1  # the update of the first of them
    bf16: bool = True  # mixed precision on CUDA: bf16, or fp16 without it (runtime.pick_precision)
    compile: bool = False  # torch.compile the model
    # how L1 is computed (``loss_path``): "fused" (chunked, never the full logits: the least
    # memory), "logits" (full logits, then cross-entropy), or "auto": "logits" where the model
    # is compiled on CUDA (an H100, 2026-11-24: 481k tokens/s against the fused loss's 343k at
    # the paper's preset), "fused" elsewhere
    loss: str = "auto"
    experiment: str = "pretrain"

    def steps_for(self, n_blocks: int) -> int:
        """Total updates for a corpus of ``n_blocks`` training blocks."""
        if self.total_steps is not None:
            return self.total_steps
        return max(1, int(self.epochs * n_blocks) // self.batch_size)


def loss_path(cfg: PretrainConfig, device: torch.device) -> str:
    """The L1 path a run of ``cfg`` takes on ``device`` (``PretrainConfig.loss``)."""
    if cfg.loss != "auto":
        return cfg.loss
    return "logits" if cfg.compile and device.type == "cuda" else "fused"


def learning_rate(step: int, cfg: PretrainConfig, total_steps: int) -> float:
    """The learning rate of update ``step + 1`` (``optim.cosine_lr`` with ``cfg``'s peak)."""
    return cosine_lr(step, cfg.max_lr, cfg.warmup_steps, total_steps)


def log_spaced_steps(total_steps: int, n: int, first: int = 1) -> list[int]:
    """About ``n`` update counts spread evenly on a log scale from ``first`` (at most
    ``total_steps``) to ``total_steps``."""
    if n <= 0:
        return []
    return sorted({int(round(s)) for s in np.geomspace(min(first, total_steps), total_steps, n)})


@dataclass
class PretrainResult:
    """What a run leaves: where, how far, its history and its log-spaced checkpoints."""

    out_dir: Path
    step: int
    total_steps: int
    val_loss: float | None
    wall_time: float
    history: object = field(repr=False)  # a DataFrame of this run's records
    log_checkpoints: list[Path] = field(default_factory=list)


def run_config(model, cfg: PretrainConfig, tokenizer, corpus: Corpus, out_dir=None) -> dict:
    """What must not change between a run and its resumption, as JSON reads it back (tuples
    are lists), so that it compares equal to the one a checkpoint holds. The corpus is its
    texts' sha256 (a moved corpus is the same corpus) and where to find it again: "fixture",
    a hub id, or its path relative to ``out_dir`` (a moved checkout still finds it)."""
    where = corpus.source
    if out_dir is not None and where and where != "fixture" and Path(where).exists():
        where = os.path.relpath(Path(where).resolve(), Path(out_dir).resolve())
    run = {
        "model": model_meta(model),
        "pretrain": _recipe(cfg),
        "tokenizer": tokenizer.fingerprint(),
        "corpus": {"sha256": corpus.sha256, "source": where},
    }
    return json.loads(json.dumps(run))


def _recipe(cfg: PretrainConfig) -> dict:
    """``cfg`` but how fast the run goes and what its records call it."""
    return {k: v for k, v in asdict(cfg).items() if k not in ("compile", "loss", "experiment")}


def settings_diff(run_cfg: dict, model, cfg: PretrainConfig) -> list[str]:
    """``config_diff`` of a checkpoint's ``run_config`` and a run of ``model`` with ``cfg`` in
    what is known before the corpus is loaded: the model and the recipe (``total_steps`` only
    where ``cfg`` gives it; epochs are counted in the corpus's blocks). A command that resumes
    checks it first, so that another scale is refused in a second rather than after the
    corpus is tokenised (``pretrain`` compares the rest)."""
    old = json.loads(json.dumps({k: run_cfg.get(k) for k in ("model", "pretrain")}))
    new = json.loads(json.dumps({"model": model_meta(model), "pretrain": _recipe(cfg)}))
    if cfg.total_steps is None:
        for recipe in (old["pretrain"], new["pretrain"]):
            recipe.pop("total_steps", None)
    return config_diff(old, new)


@torch.no_grad()
def evaluate(
    model, corpus: Corpus, batch_size: int, max_batches: int | None, device, precision=FLOAT32
):
    """Mean next-token loss (nats) on the validation blocks."""
    was_training = model.training
    model.eval()
    total, count = torch.zeros((), device=device), 0
    for x in corpus.valid.eval_batches(batch_size, max_batches):
        x = x.to(device)
        with precision.autocast(device.type):
            total += model(x[:, :-1], targets=x[:, 1:]).loss * x.size(0)
        count += x.size(0)
    model.train(was_training)
    return (total / count).item()


def _check_inputs(model, tokenizer, corpus: Corpus, cfg, proc: Dist, out_dir, stop_after) -> int:
    """Everything that can be wrong, before any work; returns the micro-batch size."""
    check_pretrain_config(cfg, stop_after)
    if Path(out_dir).is_file():
        raise ValueError(f"out_dir={str(out_dir)!r} is a file: give a folder for the run")
    model_cfg = model.config
    fix = "build the model with vocab_size=tokenizer.vocab_size (or load its own tokenizer)"
    check_tokenizer(tokenizer, model, fix)
    if corpus.train.block != model_cfg.n_ctx + 1:
        raise ValueError(
            f"the corpus was cut into blocks of {corpus.train.block} tokens but the "
            f"model's context is {model_cfg.n_ctx}: build_corpus(n_ctx={model_cfg.n_ctx})"
        )
    if int(corpus.train.tokens.max()) >= model_cfg.vocab_size:
        raise ValueError(
            "the corpus holds token ids outside the model's vocabulary: tokenise "
            "it with the tokenizer the model was built for"
        )
    micro = cfg.micro_batch_size or cfg.batch_size // proc.world
    if cfg.batch_size % (micro * proc.world):
        raise ValueError(
            f"batch_size={cfg.batch_size} is not a multiple of micro_batch_size="
            f"{micro} x {proc.world} processes"
        )
    return micro


def _start(
    out_dir: Path, run_cfg: dict, resume: bool, model, opt, scaler, device
) -> tuple[int, int, int, dict | None]:
    """(step, epoch, next batch, the training loss summed since the last record) to start
    from: 0 (and None) for a new run, else the newest checkpoint's, after checking that it is
    this run's; its model, optimiser, RNG and (float16) loss-scale states are restored."""
    ckpt = latest_checkpoint(out_dir)
    if ckpt is None:
        if resume:
            warnings.warn(
                f"resume=True, but {out_dir} holds no checkpoint to resume (a new folder, or a "
                "run stopped before its first): starting a new run at step 0. Check out_dir "
                "if you meant to continue a run",
                stacklevel=3,
            )
        return 0, 0, 0, None
    if not resume:
        raise FileExistsError(
            f"{out_dir} already holds a run (newest checkpoint {ckpt.name}): "
            "pass resume=True to continue it, or choose a new out_dir"
        )
    state = read_state(ckpt)
    if not {"run_config", "epoch", "next_batch"} <= set(state):
        raise CheckpointError(f"{ckpt} is not a pretrain() checkpoint (no run_config in it)")
    diff = config_diff(state["run_config"], run_cfg)
    if diff:
        raise CheckpointError(
            f"{ckpt} was made with another config; differences:\n  "
            + "\n  ".join(diff)
            + "\nresume with the same config, or start a new run in another out_dir"
        )
    state = load_checkpoint(ckpt, model, opt, device)
    if scaler is not None and "grad_scaler" in state:  # else a run begun in bf16 or float32
        scaler.load_state_dict(state["grad_scaler"])
    since = state.get("loss_since_log")  # None in a checkpoint from before it was kept
    return state["step"], state["epoch"], state["next_batch"], since


def _micro_losses(net, rows: torch.Tensor, micro: int, device, precision: Precision, ddp: bool):
    """The loss of each micro-batch of ``rows``, scaled to the update's mean; under DDP the
    gradients are synchronised only at the last one."""
    accum = rows.size(0) // micro
    for i in range(accum):
        xb = rows[i * micro : (i + 1) * micro]
        xb = xb.pin_memory().to(device, non_blocking=True) if device.type == "cuda" else xb
        last = i == accum - 1
        with contextlib.nullcontext() if last or not ddp else net.no_sync():
            with precision.autocast(device.type):
                loss = net(xb[:, :-1], targets=xb[:, 1:]).loss / accum
            yield loss


def pretrain(
    model,
    tokenizer,
    corpus: Corpus,
    cfg: PretrainConfig,
    out_dir: str | os.PathLike,
    *,
    resume: bool = False,
    scale: str | None = None,
    device: str | torch.device | None = None,
    progress: bool = True,
    stop_after: int | None = None,
) -> PretrainResult:
    """Pre-train ``model`` on ``corpus`` (L1) into ``out_dir``; returns the run's history.

    ``resume=True`` continues the newest checkpoint in ``out_dir`` (and starts afresh, with a
    warning, if there is none); without it, an ``out_dir`` that already holds a run is an
    error, so nothing is overwritten. ``stop_after`` ends this call after that many updates
    (the schedule still runs to ``total_steps``), for a run done in parts. A run that starts
    or resumes removes what a crash left half-written in ``out_dir`` and the records logged
    after its checkpoint, so that ``records.jsonl`` holds each step once. It holds ``out_dir``
    while it runs (``records.run_lock``), and stops at a loss that is not finite (``_Logger``).
    """
    device = pick_device(str(device) if device else None)
    proc = init_distributed(device)
    if proc.world > 1 and device.type == "cuda":
        device = torch.device("cuda", proc.local_rank)
    out_dir = Path(out_dir)
    micro = _check_inputs(model, tokenizer, corpus, cfg, proc, out_dir, stop_after)
    total_steps = cfg.steps_for(len(corpus.train))
    run_cfg = run_config(model, replace(cfg, total_steps=total_steps), tokenizer, corpus, out_dir)
    precision = pick_precision(device, cfg.bf16)
    validate = partial(evaluate, model, corpus, cfg.batch_size, cfg.eval_batches, device, precision)
    with run_lock(out_dir) if proc.main else contextlib.nullcontext():  # one run a folder
        if proc.main:  # what a crash mid-write left
            clean_run(out_dir)
        seed_everything(cfg.seed)
        model.to(device).train()
        if hasattr(model, "loss_path"):  # FastGPT: the device's faster L1 (the LSTM has one)
            model.loss_path = loss_path(cfg, device)
        opt = make_optimizer(model, cfg.max_lr, cfg.weight_decay, cfg.betas, cfg.eps)
        scaler = precision.scaler(device)
        step, epoch, index, since = _start(out_dir, run_cfg, resume, model, opt, scaler, device)
        first = step
        net = model
        if proc.world > 1:
            ids = [device.index] if device.type == "cuda" else None
            net = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)
        net = torch.compile(net) if cfg.compile else net
        log = _Logger(out_dir, cfg, run_cfg, step, proc, device, scale, progress, corpus, since)
        log.base["config"]["loss_path"] = getattr(model, "loss_path", "fused")  # the records say
        data = corpus.train.batches(cfg.batch_size, cfg.seed, epoch, index)
        end = total_steps if stop_after is None else min(total_steps, step + stop_after)
        log_steps = set(log_spaced_steps(total_steps, cfg.n_log_checkpoints, cfg.log_from))
        share = cfg.batch_size // proc.world
        while step < end:
            epoch, index, x = next(data)
            lr = learning_rate(step, cfg, total_steps)
            rows = x[proc.rank * share : (proc.rank + 1) * share]
            losses = _micro_losses(net, rows, micro, device, precision, proc.world > 1)
            loss = train_step(model, opt, lr, losses, cfg.grad_clip, scaler, check=step == first)
            step += 1
            log.after_step(step, end, loss, lr, validate)
            if proc.main and step in log_steps:
                tokenizer.save(save_model(model, out_dir / "log_checkpoints" / f"step_{step:08d}"))
            if step % cfg.ckpt_interval == 0 or step == end:
                state = {"step": step, "epoch": epoch, "next_batch": index + 1}
                state["loss_since_log"] = log.since_log()  # the next record's share from before
                if scaler is not None:  # float16's loss scale, which a resumed run goes on from
                    state["grad_scaler"] = scaler.state_dict()
                if proc.main:
                    save_and_prune(out_dir, model, opt, tokenizer, state | {"run_config": run_cfg})
                if proc.world > 1:
                    dist.barrier()
        log.bar.close()
        logs = sorted((out_dir / "log_checkpoints").glob("step_*"))
        history, wall = read_records(log.path), time.perf_counter() - log.t0
        return PretrainResult(out_dir, step, total_steps, log.val_loss, wall, history, logs)


class _Logger:
    """A run's progress bar and records, appended to ``records.jsonl``: training loss,
    throughput and rate every ``log_interval`` updates, validation loss every ``eval_interval``.

    A training-loss record averages the updates since the one before, which may straddle a
    resume (a checkpoint every 12 updates, a record every 5): ``since`` is the checkpoint's
    sum of the losses before it and the update the sum started after (``since_log``), so
    that the record after a resume averages the same updates as an uninterrupted run's (it
    averaged only those after the resume). Without it (a new run, or a checkpoint from
    before it was kept) the sum starts at the resume, as it used to.

    A training loss that is not finite stops the run at its update (a ``FloatingPointError``
    naming its last good checkpoint), before a checkpoint keeps it. After the warm-up, a
    validation loss at or above the entropy of the training tokens' unigram distribution (a
    collapse) is recorded (metric "collapse", the entropy in its config) and said; the run goes
    on."""

    def __init__(
        self, out_dir: Path, cfg, run_cfg, step, proc: Dist, device, scale, progress, corpus, since
    ):
        self.path, self.cfg, self.proc = out_dir / "records.jsonl", cfg, proc
        if proc.main:  # what was logged after the checkpoint is logged again from it
            keep_records(self.path, lambda r: r.get("step") is not None and r["step"] <= step)
        self.total_steps = run_cfg["pretrain"]["total_steps"]
        self.tokens_per_step = cfg.batch_size * run_cfg["model"]["config"]["n_ctx"]
        self.base = {
            "experiment": cfg.experiment,
            "scale": scale,
            "seed": cfg.seed,
            "task": "lm",
            "data": corpus.train_source,
            "config": run_cfg | {"total_steps": self.total_steps},
            **provenance(device),
        }
        self.t0 = self.last_t = time.perf_counter()
        self.timed_from = step  # the update last_t was taken at: throughput counts this process's
        since = since or {"step": step, "sum": 0.0}
        self.last_step = since["step"]  # the update the loss sum started after
        self.loss_sum = torch.tensor(float(since["sum"]), device=device)
        self.val_loss: float | None = None
        self.entropy = corpus.train.unigram_entropy()  # nats: what a collapsed model scores
        self.said = False
        on = progress and proc.main
        self.bar = progress_bar(
            total=self.total_steps, initial=step, desc=cfg.experiment, unit="update", enabled=on
        )

    def record(self, metric: str, value: float, step: int, **fields) -> dict:
        wall = time.perf_counter() - self.t0
        return make_record(metric, value, step=step, wall_time=wall, **(self.base | fields))

    def since_log(self) -> dict:
        """What a checkpoint keeps for the next training-loss record: the loss summed since the
        last record (the whole batch's under DDP) and the update the sum started after."""
        return {"step": self.last_step, "sum": self._loss_sum()}

    def _loss_sum(self) -> float:
        total = self.loss_sum.clone()
        if self.proc.world > 1:  # the loss of the whole batch, not of this process's share
            dist.all_reduce(total)
            total /= self.proc.world
        return total.item()

    def after_step(self, step: int, end: int, loss: torch.Tensor, lr: float, validate) -> None:
        """Count update ``step`` and its ``loss``; record what is due (``validate()``: val loss)."""
        cfg, recs = self.cfg, []
        if not torch.isfinite(loss):  # waits for the device once an update
            raise FloatingPointError(
                f"update {step}: the training loss is {loss.item()} at learning rate {lr:.2e}: "
                f"stopped. Last good checkpoint: {latest_checkpoint(self.path.parent)} (None: none"
                " yet); resume from it (resume=True, --resume); should it diverge there again, "
                "start anew with a lower max_lr or a longer warm-up"
            )
        self.loss_sum += loss
        self.bar.update(1)
        if step % cfg.log_interval == 0 or step == end:
            now = time.perf_counter()
            train_loss = self._loss_sum() / (step - self.last_step)
            tok_s = (step - self.timed_from) * self.tokens_per_step / (now - self.last_t)
            self.last_t, self.timed_from = now, step
            if step % cfg.log_interval == 0:  # else a stop part-way (stop_after): the sum goes
                self.loss_sum.zero_()  # on in its checkpoint, as in a run that did not stop
                self.last_step = step
            self.bar.set_postfix(loss=f"{train_loss:.3f}", tok_s=f"{tok_s:,.0f}", lr=f"{lr:.2e}")
            recs += [
                self.record("train_loss", train_loss, step, split="train"),
                self.record("tokens_per_s", tok_s, step),
                self.record("lr", lr, step),
            ]
        if step % cfg.eval_interval == 0 or step == self.total_steps:
            self.val_loss = validate()
            recs += [
                self.record("val_loss", self.val_loss, step, split="valid"),
                self.record("val_ppl", math.exp(self.val_loss), step, split="valid"),
            ]
            if step > cfg.warmup_steps and self.val_loss >= self.entropy:  # a collapse
                c = self.base["config"] | {"unigram_entropy": self.entropy}
                recs.append(self.record("collapse", self.val_loss, step, split="valid", config=c))
                if self.proc.main and not self.said:  # said once, recorded at each validation
                    self.said = True
                    getattr(self.bar, "write", print)(
                        f"update {step}: a collapse: validation loss {self.val_loss:.3f} nats >= "
                        f"{self.entropy:.3f}, the entropy of the training tokens' unigram "
                        "distribution (no better than their frequencies); recorded, the run goes on"
                    )
        if self.proc.main and recs:
            append_records(self.path, recs)
