"""Unsupervised pre-training (§3.1, §4.1): maximise L1 with the paper's recipe.

    L1(U) = sum_i log P(u_i | u_{i-k}, ..., u_{i-1}; Theta)

AdamW (``optim``), the rate warmed up linearly and annealed on a cosine, mini-batches of random
contiguous blocks (``settings.PretrainConfig``). ``pretrain`` runs on a CPU, one GPU (bf16, or
float16 with loss scaling; optional ``torch.compile``) or many under ``torchrun`` (DDP); its
checkpoints let a run go on exactly where it stopped; ``Logger`` keeps its records.
"""

from __future__ import annotations

import contextlib
import json
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
from ..checks import check_pretrain
from ..corpus import Corpus
from ..optim import cosine_lr, make_optimizer, train_step
from ..records import read_records, run_lock
from ..runtime import (
    FLOAT32,
    Dist,
    Precision,
    init_distributed,
    pick_device,
    pick_precision,
    seed_everything,
)
from ..settings import PretrainConfig
from .logger import Logger


def loss_path(cfg: PretrainConfig, device: torch.device) -> str:
    """The L1 path a run of ``cfg`` takes on ``device`` (``PretrainConfig.loss``)."""
    if cfg.loss != "auto":
        return cfg.loss
    return "logits" if cfg.compile and device.type == "cuda" else "fused"


def learning_rate(step: int, cfg: PretrainConfig, total_steps: int) -> float:
    """The learning rate of update ``step + 1``."""
    return cosine_lr(step, cfg.max_lr, cfg.warmup_steps, total_steps)


@dataclass
class PretrainResult:
    """What a run leaves: where, how far, its records and its log-spaced checkpoints."""

    out_dir: Path
    step: int
    total_steps: int
    val_loss: float | None
    wall_time: float
    history: object = field(repr=False)  # a DataFrame of this run's records
    log_checkpoints: list[Path] = field(default_factory=list)


def run_config(
    model, cfg: PretrainConfig, tokenizer=None, corpus: Corpus | None = None, out_dir=None
):
    """What must not change between a run and its resumption, as JSON reads it back (tuples
    are lists): the model, the recipe (``cfg`` but how fast the run goes and what its records
    call it) and, with ``corpus``, the tokenizer and the corpus: its texts' sha256 (a moved
    corpus is the same corpus) and where to find it again: "fixture", a hub id, or its path
    relative to ``out_dir`` (a moved checkout still finds it)."""
    recipe = {k: v for k, v in asdict(cfg).items() if k not in ("compile", "loss", "experiment")}
    run = {"model": model_meta(model), "pretrain": recipe}
    if corpus is not None:
        where = corpus.source
        if out_dir is not None and where and where != "fixture" and Path(where).exists():
            where = os.path.relpath(Path(where).resolve(), Path(out_dir).resolve())
        run["tokenizer"] = tokenizer.fingerprint()
        run["corpus"] = {"sha256": corpus.sha256, "source": where}
    return json.loads(json.dumps(run))


def check_resume(
    ckpt: Path,
    run_cfg: dict,
    what: str = "config",
    fix: str = "resume with the same config, or start a new run in another out_dir",
) -> None:
    """A ``CheckpointError`` unless ``ckpt`` is a ``pretrain`` checkpoint of ``run_cfg``
    (``run_config``) in what ``run_cfg`` holds (a ``total_steps`` of None is not compared),
    naming ``what`` the run is, each difference and ``fix``."""
    state = read_state(ckpt)
    if not {"run_config", "epoch", "next_batch"} <= set(state):
        raise CheckpointError(f"{ckpt} is not a pretrain() checkpoint (no run_config in it)")
    diff = config_diff({k: state["run_config"].get(k) for k in run_cfg}, run_cfg)
    if run_cfg["pretrain"]["total_steps"] is None:
        diff = [d for d in diff if not d.startswith("pretrain.total_steps:")]
    if diff:
        raise CheckpointError(
            f"{ckpt} is a run of another {what}; they differ in\n  "
            + "\n  ".join(diff)
            + f"\n{fix}"
        )


@torch.no_grad()
def evaluate(
    model, corpus: Corpus, batch_size: int, max_batches: int | None, device, precision=FLOAT32
):
    """Mean next-token loss (nats) on the validation blocks."""
    was_training = model.training
    model.eval()
    total, count = torch.zeros((), device=device), 0
    stance = getattr(torch.compiler, "set_stance", None)  # torch 2.6 on: not compiled again
    with stance("force_eager") if stance else contextlib.nullcontext():
        for x in corpus.valid.eval_batches(batch_size, max_batches):
            x = x.to(device)
            with precision.autocast(device.type):
                total += model(x[:, :-1], targets=x[:, 1:]).loss * x.size(0)
            count += x.size(0)
    model.train(was_training)
    return (total / count).item()


def _start(
    out_dir: Path, run_cfg: dict, resume: bool, model, cfg: PretrainConfig, device, precision
):
    """``model`` seeded, on ``device``, training; its optimiser, its loss scaler, and (step,
    epoch, next batch, the loss summed since the last record) to start from: 0 (and None) for
    a new run, else the newest checkpoint's, its states restored."""
    seed_everything(cfg.seed)
    model.to(device).train()
    if hasattr(model, "loss_path"):  # FastGPT: the device's faster L1 (the LSTM has one)
        model.loss_path = loss_path(cfg, device)
    opt = make_optimizer(model, cfg.max_lr, cfg.weight_decay, cfg.betas, cfg.eps)
    scaler = precision.scaler(device)
    ckpt = latest_checkpoint(out_dir)
    if ckpt is None:
        if resume:
            warnings.warn(
                f"resume=True, but {out_dir} holds no checkpoint to resume (a new folder, or a "
                "run stopped before its first): starting a new run at step 0. Check out_dir "
                "if you meant to continue a run",
                stacklevel=3,
            )
        return opt, scaler, (0, 0, 0, None)
    if not resume:
        raise FileExistsError(
            f"{out_dir} already holds a run (newest checkpoint {ckpt.name}): "
            "pass resume=True to continue it, or choose a new out_dir"
        )
    check_resume(ckpt, run_cfg)
    state = load_checkpoint(ckpt, model, opt, device)
    if scaler is not None and "grad_scaler" in state:  # else a run begun in bf16 or float32
        scaler.load_state_dict(state["grad_scaler"])
    since = state.get("loss_since_log")  # None where the checkpoint lacks it
    return opt, scaler, (state["step"], state["epoch"], state["next_batch"], since)


def _micro_losses(net, batch: torch.Tensor, micro: int, proc: Dist, device, precision: Precision):
    """The loss of each micro-batch of this process's share of ``batch``, scaled to the
    update's mean; under DDP the gradients are synchronised only at the last one."""
    share = batch.size(0) // proc.world
    rows = batch[proc.rank * share : (proc.rank + 1) * share]
    accum = rows.size(0) // micro
    for i in range(accum):
        xb = rows[i * micro : (i + 1) * micro]
        xb = xb.pin_memory().to(device, non_blocking=True) if device.type == "cuda" else xb
        last = i == accum - 1
        with contextlib.nullcontext() if last or proc.world == 1 else net.no_sync():
            with precision.autocast(device.type):
                loss = net(xb[:, :-1], targets=xb[:, 1:]).loss / accum
            yield loss


def _parallel(model, cfg: PretrainConfig, proc: Dist, device):
    """What the loop calls ``model`` through: DDP over the processes, compiled whole where
    ``cfg.compile`` and the model is not compiled block by block (``compiled_regions``)."""
    net = model
    if proc.world > 1:
        ids = [device.index] if device.type == "cuda" else None
        net = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)
    return torch.compile(net) if cfg.compile and not hasattr(model, "compiled_regions") else net


def _save(out_dir: Path, model, opt, tokenizer, scaler, log: Logger, where: dict, run_cfg) -> None:
    """A resumable checkpoint at ``where`` (the update, where the batches stand), written by the
    main process while every process waits."""
    state = where | {"loss_since_log": {"step": log.last_step, "sum": log.loss_total()}}
    if scaler is not None:
        state["grad_scaler"] = scaler.state_dict()
    if log.proc.main:
        save_and_prune(out_dir, model, opt, tokenizer, state | {"run_config": run_cfg})
    if log.proc.world > 1:
        dist.barrier()


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
    """Pre-train ``model`` on ``corpus`` (L1) into ``out_dir``, holding it (``run_lock``).
    ``resume=True`` goes on from the newest checkpoint there; without it, a run there is an
    error. ``stop_after`` ends this call after that many updates (the schedule still runs to
    ``total_steps``), for a run done in parts."""
    t_enter, device = time.perf_counter(), pick_device(str(device) if device else None)
    proc = init_distributed(device)
    if proc.world > 1 and device.type == "cuda":
        device = torch.device("cuda", proc.local_rank)  # this process's own GPU
    out_dir = Path(out_dir)
    micro = check_pretrain(model, tokenizer, corpus, cfg, proc.world, out_dir, stop_after)
    total_steps = cfg.steps_for(len(corpus.train))
    run_cfg = run_config(model, replace(cfg, total_steps=total_steps), tokenizer, corpus, out_dir)
    precision = pick_precision(device, cfg.bf16)
    validate = partial(evaluate, model, corpus, cfg.batch_size, cfg.eval_batches, device, precision)
    lock = run_lock(out_dir) if proc.main else contextlib.nullcontext()  # one run a folder
    regions = cfg.compile and hasattr(model, "compiled_regions")
    with lock, model.compiled_regions() if regions else contextlib.nullcontext():
        if proc.main:  # what a crash mid-write left
            clean_run(out_dir)
        opt, scaler, where = _start(out_dir, run_cfg, resume, model, cfg, device, precision)
        step, epoch, index, since = where
        net = _parallel(model, cfg, proc, device)
        log = Logger(out_dir, cfg, run_cfg, step, proc, device, scale, progress, corpus, since)
        log.base["config"]["loss_path"] = getattr(model, "loss_path", "fused")  # the records say
        data = corpus.train.batches(cfg.batch_size, cfg.seed, epoch, index)
        end = total_steps if stop_after is None else min(total_steps, step + stop_after)
        while step < end:
            epoch, index, x = next(data)
            lr = learning_rate(step, cfg, total_steps)
            losses = _micro_losses(net, x, micro, proc, device, precision)
            check = step == log.first_step  # the first update checks its loss
            loss = train_step(model, opt, lr, losses, cfg.grad_clip, scaler, check=check)
            step += 1
            log.after_step(step, end, loss, lr, validate)
            log.keep_model(step, model, tokenizer)
            if step % cfg.ckpt_interval == 0 or step == end:
                where = {"step": step, "epoch": epoch, "next_batch": index + 1}
                with log.saving():
                    _save(out_dir, model, opt, tokenizer, scaler, log, where, run_cfg)
        log.finish(step, setup=log.t0 - t_enter)
    logs = sorted((out_dir / "log_checkpoints").glob("step_*"))
    history, wall = read_records(log.path), time.perf_counter() - log.t0
    return PretrainResult(out_dir, step, total_steps, log.val_loss, wall, history, logs)
