"""What a plan's predictions are made of: the device's throughput and the data's sizes.

``measure`` times a few steps of each kind of work on the run's device (the GPT's pre-training
update, compiled where the scale compiles it; the LSTM's; a fine-tuning update at two lengths;
a model built; a checkpoint written); ``estimate`` gives the same from FLOPs at an assumed MFU
where that device is not at hand, marked as estimated. ``task_stats`` and ``ladders`` say how
many examples each split holds, how long they are, and which draws of them a plan may pick.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass

import torch

from ..checkpoint import save_model
from ..fast import FastGPT
from ..finetune import TaskModel, encode_all
from ..flops import model_flops_per_token, table_peak
from ..lstm import LSTMLM
from ..optim import make_optimizer, train_step
from ..runtime import timed
from ..tasks import SCORED_BESIDE, get_task, load_examples, open_source, unavailable
from ..transforms import Encoded, collate
from ..zeroshot import ZERO_SHOT_SPLITS
from .bundle import ladder

ASSUMED_MFU = {"pretrain": 0.30, "lstm": 0.10, "finetune": 0.25}  # of the data-sheet peak
ASSUMED = {"ft_step_s": 0.025, "run_overhead_s": 2.0, "save_s": 1.5, "setup_s": 90.0}
ASSUMED_BENCH_S = 180.0  # at the paper preset: 3 models eager, 2 compiled, fine-tuning eager
ASSUMED_ENCODE = (
    1 / 8
)  # encoding there over here: 16 cores against 2 busy ones (batches run parallel)


@dataclass(frozen=True)
class Throughput:
    """What the plan's predictions are made of (seconds), and how they were found."""

    device: str
    how: str  # "measured ..." or "ESTIMATED ..."
    pretrain_step_s: float  # one update of batch_size x n_ctx tokens, GPT
    lstm_step_s: float  # the same for the LSTM
    ft_step_s: float  # a fine-tuning update's cost beyond its tokens (launches, optimiser)
    ft_token_s: float  # a fine-tuning update's cost per padded token
    run_overhead_s: float  # a fine-tuning run's set-up: the model built, weights copied
    save_s: float  # one checkpoint written
    setup_s: float  # loading, measuring, compiling, before the first part
    bench_s: float  # the speed run
    eval_factor: float = 1 / 3  # a forward pass over an update's cost
    encode_factor: float = 1.0  # the run machine's encoding time over the one measured in stats


# ---------------------------------------------------------------- throughput


def _time(step, device, warmup: int = 2, n: int = 3) -> float:
    """Seconds a step takes: the mean of ``n`` after ``warmup`` (``runtime.timed``)."""
    for _ in range(warmup):
        step()
    return sum(timed(step, device)[0] for _ in range(n)) / n


def _lm_step(model, S, device, compile_: bool):
    cfg, bf16 = S.pretrain, device.type == "cuda" and S.pretrain.bf16
    model = model.to(device).train()
    opt, net = make_optimizer(model, cfg.max_lr), torch.compile(model) if compile_ else model
    x = torch.randint(0, model.config.vocab_size, (cfg.batch_size, model.config.n_ctx + 1))
    x = x.to(device)

    def losses():
        with torch.autocast(device.type, torch.bfloat16, enabled=bf16):
            yield net(x[:, :-1], targets=x[:, 1:]).loss

    first = iter([True])  # the first step checks that the gradients are not all zero
    return lambda: train_step(
        model, opt, cfg.max_lr, losses(), cfg.grad_clip, check=next(first, False)
    )


def _ft_step(S, vocab_size: int, device, seq: int):
    cfg, n_ctx = S.finetune, S.model_config().n_ctx
    gpt = FastGPT(S.model_config(vocab_size=vocab_size)).add_special_tokens()
    model = TaskModel(gpt, get_task("sst2"), cfg.clf_pdrop).to(device).train()
    opt, bf16 = make_optimizer(model, cfg.lr), device.type == "cuda" and cfg.bf16
    v, seq = vocab_size, min(seq, n_ctx)
    items = [Encoded(((v, *[i % v] * (seq - 2), v + 2),), i % 2) for i in range(cfg.batch_size)]
    batch = collate(items).to(device)

    def losses():
        with torch.autocast(device.type, torch.bfloat16, enabled=bf16):
            scores, l1 = model(batch)
        yield torch.nn.functional.cross_entropy(scores.float(), batch.labels) + 0.5 * l1

    return lambda: train_step(model, opt, cfg.lr, losses(), cfg.grad_clip)


def measure(S, vocab_size: int, device: torch.device, t_start: float) -> Throughput:
    """Time a few steps of each kind of work on ``device`` (the GPT compiled where the scale's
    pre-training compiles, on CUDA); ``t_start``: when the run began (its set-up counts)."""
    torch.manual_seed(0)
    compile_ = S.pretrain.compile and device.type == "cuda"
    gpt = FastGPT(S.model_config(vocab_size=vocab_size), 64 if device.type == "cuda" else 1)
    pre = _time(_lm_step(gpt, S, device, compile_), device)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        save_model(gpt, tmp)
        save = (time.perf_counter() - t0) * 3  # a resumable checkpoint: the optimiser's state too
    del gpt
    lstm = LSTMLM(S.lstm_config(vocab_size=vocab_size, n_ctx=S.model_config().n_ctx))
    lstm_s = _time(_lm_step(lstm, S, device, False), device, 1, 2)
    n_ctx, bs = S.model_config().n_ctx, S.finetune.batch_size
    short, long = (_time(_ft_step(S, vocab_size, device, n), device) for n in (16, n_ctx))
    slope = max(0.0, (long - short) / (bs * (n_ctx - min(16, n_ctx)) or 1))
    t0 = time.perf_counter()
    TaskModel(FastGPT(S.model_config(vocab_size=vocab_size)).add_special_tokens(), get_task("sst2"))
    build = time.perf_counter() - t0
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return Throughput(
        device=name,
        how=f"measured on {name}: {S.pretrain.batch_size} x {n_ctx}-token updates"
        + (" (compiled)" if compile_ else ""),
        pretrain_step_s=pre,
        lstm_step_s=lstm_s,
        ft_step_s=max(short - slope * bs * min(16, n_ctx), 0.0),
        ft_token_s=slope,
        run_overhead_s=3 * build + 0.2,
        save_s=save,
        setup_s=time.perf_counter() - t_start,
        bench_s=ASSUMED_BENCH_S if device.type == "cuda" else 20.0,
    )


def estimate(S, vocab_size: int, device_name: str = "NVIDIA H100 80GB HBM3") -> Throughput:
    """A throughput from FLOPs at ``ASSUMED_MFU`` of ``device_name``'s data-sheet peak, and
    per-step costs from ``ASSUMED``: for planning where that device is not at hand."""
    peak = table_peak(device_name)
    if peak is None:
        raise ValueError(f"no data-sheet peak for {device_name!r}: see gpt1lib.flops.PEAK_TFLOPS")
    flops = peak[0] * 1e12
    cfg = S.model_config(vocab_size=vocab_size)
    tokens = S.pretrain.batch_size * cfg.n_ctx
    pre = model_flops_per_token(cfg, cfg.n_ctx) * tokens / (flops * ASSUMED_MFU["pretrain"])
    lc = S.lstm_config(vocab_size=vocab_size)
    lstm_flops = 6 * (4 * lc.n_hidden * (lc.n_embd + lc.n_hidden) + lc.n_tokens * lc.n_embd)
    short_seq = model_flops_per_token(cfg, 64) / (flops * ASSUMED_MFU["finetune"])
    mfu = ", ".join(f"{k} {v:.0%}" for k, v in ASSUMED_MFU.items())
    return Throughput(
        device=device_name,
        how=f"ESTIMATED (no {device_name} at hand): FLOPs at an assumed MFU ({mfu}) of "
        f"{peak[0]:g} TFLOP/s, {ASSUMED['ft_step_s'] * 1e3:g} ms a fine-tuning update beyond "
        f"its tokens, encoding {1 / ASSUMED_ENCODE:g}x as fast as measured here",
        pretrain_step_s=pre,
        lstm_step_s=lstm_flops * tokens / (flops * ASSUMED_MFU["lstm"]),
        ft_step_s=ASSUMED["ft_step_s"],
        ft_token_s=short_seq,
        run_overhead_s=ASSUMED["run_overhead_s"],
        save_s=ASSUMED["save_s"],
        setup_s=ASSUMED["setup_s"],
        bench_s=ASSUMED_BENCH_S,
        encode_factor=ASSUMED_ENCODE,
    )


# ---------------------------------------------------------------- the data's sizes


def finetuned(S) -> list[str]:
    """The tasks chapters 05-08 fine-tune at scale ``S`` (``Scale.family_tasks``)."""
    return [t for tasks in S.family_tasks.values() for t in tasks]


def task_stats(S, source, tok) -> dict[str, dict]:
    """For every task a run may load from ``source``: examples per split, mean tokens per
    example (every sequence, from up to 100 of them) and seconds to encode one."""
    n_ctx, out, src = S.model_config().n_ctx, {}, open_source(source)
    names = [t for t in finetuned(S) if not unavailable(t, source)]
    names += [o for t in names for o in SCORED_BESIDE.get(t, ())] + list(ZERO_SHOT_SPLITS)
    for name in dict.fromkeys(names):
        spec, entry = get_task(name), {}
        for split in dict.fromkeys(("train", spec.eval_split, "dev")):
            try:
                sample = load_examples(spec, split, source, 100, S.finetune.seed)
            except (FileNotFoundError, RuntimeError, ValueError):
                continue
            n = src.count(spec, split)
            t0 = time.perf_counter()
            items = encode_all(sample, spec, tok, n_ctx)
            encode = (time.perf_counter() - t0) / len(items)
            tokens = sum(sum(map(len, i.seqs)) for i in items) / len(items)
            entry[split] = {"n": n, "tokens": tokens, "encode_s": encode}
        if entry:
            out[name] = entry
    return out


def ladders(S, source, stats: dict) -> dict[tuple[str, str], list[int | None]]:
    """(task, split) -> the draws a plan may pick, largest first: those the source holds (a
    bundle's), else the scale's limit and its halvings."""
    out, src = {}, open_source(source)
    for task, splits in stats.items():
        for split, st in splits.items():
            held = src.draws(get_task(task), split)
            limits = S.limits_for(task)
            top = limits["limit" if split == "train" else "eval_limit"]
            out[task, split] = held if held is not None else ladder(top, st["n"])
    return out
