"""A pre-training run's records and progress bar: ``pretrain``'s ``Logger``."""

from __future__ import annotations

import contextlib
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from ..checkpoint import latest_checkpoint, save_model
from ..records import append_records, keep_records, make_record, provenance
from ..runtime import Dist, progress_bar


def log_spaced_steps(total_steps: int, n: int, first: int = 1) -> list[int]:
    """About ``n`` update counts spread evenly on a log scale from ``first`` (at most
    ``total_steps``) to ``total_steps``."""
    if n <= 0:
        return []
    return sorted({int(round(s)) for s in np.geomspace(min(first, total_steps), total_steps, n)})


class Logger:
    """A run's progress bar and records (``records.jsonl``): training loss, throughput and
    rate every ``log_interval`` updates, validation loss every ``eval_interval``.

    A training-loss record averages the updates since the one before, which may straddle a
    resume: ``since`` is the checkpoint's loss sum and the update it started after.

    A training loss that is not finite stops the run at the next record or checkpoint, before a
    checkpoint keeps it; each update notes it on the device, never waiting for the GPU. After
    the warm-up, a validation loss at or above the training tokens' unigram entropy (a
    collapse) is recorded (metric "collapse") and said; the run goes on."""

    def __init__(
        self, out_dir: Path, cfg, run_cfg, step, proc: Dist, device, scale, progress, corpus, since
    ):
        self.path, self.cfg, self.proc = out_dir / "records.jsonl", cfg, proc
        if proc.main:  # what was logged after the checkpoint is logged again from it
            keep_records(self.path, lambda r: r.get("step") is not None and r["step"] <= step)
        self.total_steps = run_cfg["pretrain"]["total_steps"]
        self.keep_at = set(log_spaced_steps(self.total_steps, cfg.n_log_checkpoints, cfg.log_from))
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
        self.entropy = corpus.train.unigram_entropy()  # nats: what a collapsed model scores
        self.t0 = self.last_t = time.perf_counter()
        self.seconds = dict.fromkeys(("first_update", "eval", "save"), 0.0)
        self.first_step, self.lrs = step, []  # the rate of each update of this call
        self.bad = torch.tensor(-1, device=device)  # the first update whose loss is not finite
        self.timed_from = step  # the update last_t was taken at: throughput counts this process's
        since = since or {"step": step, "sum": 0.0}
        self.last_step = since["step"]  # the update the loss sum started after
        self.loss_sum = torch.tensor(float(since["sum"]), device=device)
        self.val_loss: float | None = None
        self.said = False
        on = progress and proc.main
        self.bar = progress_bar(
            total=self.total_steps, initial=step, desc=cfg.experiment, unit="update", enabled=on
        )

    def check(self) -> None:
        """An error naming the first update whose loss was not finite, if any (waits on the GPU)."""
        if (bad := int(self.bad)) >= 0:
            lr = self.lrs[bad - self.first_step - 1]
            raise FloatingPointError(
                f"update {bad}: the training loss is not finite at learning rate {lr:.2e}: "
                f"stopped. Last good checkpoint: {latest_checkpoint(self.path.parent)} (None: none"
                " yet); resume from it (resume=True, --resume); should it diverge there again, "
                "start anew with a lower max_lr or a longer warm-up"
            )

    @contextlib.contextmanager
    def timed(self, what: str):
        """The seconds inside the ``with`` added to ``what``'s (``finish`` records them)."""
        t = time.perf_counter()
        yield
        self.seconds[what] += time.perf_counter() - t

    def saving(self):
        """A checkpoint's write, timed; never of a loss that is not finite (``check``)."""
        self.check()
        return self.timed("save")

    def finish(self, step: int, setup: float) -> None:
        """Records (split "time") of this call's seconds in set-up, updates (the first, which
        compiles, also alone), validations and checkpoints; the progress bar closed."""
        self.bar.close()
        loop = time.perf_counter() - self.t0
        updates = loop - self.seconds["eval"] - self.seconds["save"]
        seconds = {"setup": setup, "update": updates, **self.seconds}
        recs = [self.record(f"{k}_seconds", v, step, split="time") for k, v in seconds.items()]
        if self.proc.main and step > self.first_step:  # else this call made no update
            append_records(self.path, recs)

    def keep_model(self, step: int, model, tokenizer) -> None:
        """At a log-spaced ``step``, the model (and tokenizer) the zero-shot curves read."""
        if self.proc.main and step in self.keep_at:
            with self.saving():
                folder = self.path.parent / "log_checkpoints" / f"step_{step:08d}"
                tokenizer.save(save_model(model, folder))

    def record(self, metric: str, value: float, step: int, **fields) -> dict:
        wall = time.perf_counter() - self.t0
        return make_record(metric, value, step=step, wall_time=wall, **(self.base | fields))

    def loss_total(self) -> float:
        """The training loss summed since the last record (``last_step``); under DDP every
        process calls it."""
        total = self.loss_sum.clone()
        if self.proc.world > 1:  # the loss of the whole batch, not of this process's share
            dist.all_reduce(total)
            total /= self.proc.world
        return total.item()

    def after_step(self, step: int, end: int, loss: torch.Tensor, lr: float, validate) -> None:
        """Count update ``step`` and its ``loss``; record what is due (``validate()``: val loss)."""
        cfg, recs = self.cfg, []
        if step == self.first_step + 1:  # it waited for the GPU (``train_step``'s check)
            self.seconds["first_update"] = time.perf_counter() - self.t0
        self.lrs.append(lr)
        self.bad = torch.where((self.bad < 0) & ~torch.isfinite(loss), step, self.bad)  # no wait
        self.loss_sum += loss
        self.bar.update(1)
        if step % cfg.log_interval == 0 or step == end:
            self.check()
            now = time.perf_counter()
            train_loss = self.loss_total() / (step - self.last_step)
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
            with self.timed("eval"):
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
