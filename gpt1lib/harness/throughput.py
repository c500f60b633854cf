"""What a plan's predictions are made of: the device's throughput and the data's sizes.

``measure`` times each kind of work on the run's device as the run does it: the pre-training
loop itself (``pretrain``: a few dozen updates of the GPT and of the LSTM on the run's corpus,
the first ones, which compile, apart from the steady ones), a fine-tuning update at two padded
lengths and the first update at a length not seen before, a scoring batch, the zero-shot
scoring (a forward pass to the full logits), a model built, a checkpoint written. ``estimate``
gives the same where that device is not at hand, marked as estimated: from what an H100
measured (``RECORDED``), else from FLOPs at an assumed MFU. ``task_stats`` and ``ladders`` say
how many examples each split holds, how long they are, and which draws of them a plan may pick.
"""

from __future__ import annotations

import json
import tempfile
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from ..checkpoint import save_model
from ..experiments import Pretraining, new_model
from ..fast import FastGPT
from ..finetune import TaskModel, encode_all, finetune
from ..flops import model_flops_per_token, table_peak
from ..loss import task_loss
from ..optim import make_optimizer, train_step
from ..pretrain import loss_path, pretrain
from ..runtime import attention_backends, attention_name, pad_multiple, pick_precision, timed
from ..tasks import SCORED_BESIDE, Example, get_task, load_examples, open_source, unavailable
from ..transforms import Encoded, collate
from ..zeroshot import ZERO_SHOT_SPLITS, continuation_logprobs
from .bundle import ladder

ASSUMED_MFU = {"pretrain": 0.30, "lstm": 0.10, "finetune": 0.25}  # of the data-sheet peak
ASSUMED = {"ft_step_s": 0.025, "run_overhead_s": 2.0, "save_s": 1.5, "setup_s": 90.0}
ASSUMED_BENCH_S = 180.0  # at the paper preset: 3 models eager, 3 compiled, fine-tuning eager
ASSUMED_ENCODE = 1 / 8  # encoding there over here: 16 cores against 2 busy ones
#: What an H100 80GB HBM3 measured at the ``small`` scale (code at ee22f51, 2026-11-24:
#: results/small's records and plan.json, ../shared/notes/gpu-lease-2026-11-24.md), for a plan
#: made where none is at hand. Each value says where it comes from; the ones the code since
#: changed (the loss path, the attention kernels, padded lengths) are scaled by what the note
#: measured of that change, and are the least certain.
RECORDED = {
    ("small", "H100"): {
        # the loop's 70.3 ms an update (466k tokens/s, the fused loss, compiled), times the
        # paper preset's compiled fused-loss over full-logits step (340,145 / 465,498 tokens/s)
        "pretrain_step_s": 0.0703 * 340_145 / 465_498,
        "pretrain_start_s": 29.1,  # the first record, at update 20, came 30.5 s in
        "lstm_step_s": 0.0580, "lstm_start_s": 3.9,  # 565k tokens/s; update 20 at 5.1 s
        # batch 32: 25.8 ms a step with flash attention (mean length 18; the note, section 3),
        # 1.199 ms per 1,000 tokens (the plan's fit at ee22f51), a new length's first step up
        # to 33 ms; a scoring batch about a third of an update
        "ft_step_s": 0.025, "ft_token_s": 1.199e-6, "new_shape_s": 0.007,
        "eval_step_s": 0.008, "eval_token_s": 0.4e-6,
        # zero-shot RACE: 0.8 M tokens a checkpoint in 1.77 s with cuDNN's new-length costs
        "zs_token_s": 1.5e-6,
        # the LSTM's Table 5 runs over the transformer's (21.1 s / 35.8 s over the same runs)
        "lstm_ft_ratio": 0.59,
        # a run beyond its updates and scoring, from the layer-transfer units' walls (1.4-2.6 s
        # for 27 updates and 1,850 examples scored); a checkpoint written, measured then
        "run_overhead_s": 0.8, "save_s": 1.32,
        "setup_s": 90.0,  # 44 s measured then, and now the loops timed (their compiling too)
        "bench_s": 140.0,  # 100.8 s then; one more compiled contender, one fine-tuning one
    },
}  # fmt: skip


@dataclass(frozen=True)
class Throughput:
    """What the plan's predictions are made of (seconds), and how they were found."""

    device: str
    how: str  # "measured ..." or "ESTIMATED ..."
    pretrain_step_s: float  # one update of batch_size x n_ctx tokens in the loop, GPT
    pretrain_start_s: float  # the loop's first updates beyond steady ones (compiling)
    lstm_step_s: float  # the same for the LSTM
    lstm_start_s: float
    ft_step_s: float  # a fine-tuning update's cost beyond its tokens (launches, optimiser)
    ft_token_s: float  # a fine-tuning update's cost per padded token
    new_shape_s: float  # the first update at a padded length not seen before, beyond that
    eval_step_s: float  # a scoring batch's cost beyond its tokens
    eval_token_s: float  # a scoring batch's cost per padded token
    zs_token_s: float  # zero-shot scoring per padded token (the full logits too)
    lstm_ft_ratio: float  # an LSTM fine-tuning update's time over the transformer's
    run_overhead_s: float  # a fine-tuning run's set-up: the model built, weights copied
    save_s: float  # one checkpoint written
    setup_s: float  # loading, measuring, compiling, before the first part
    bench_s: float  # the speed run
    pad_multiple: int = 1  # what lengths are rounded up to on the device
    loss_path: str = "fused"  # pre-training's L1 (``pretrain.loss_path``)
    attention: str = "sdpa: default (CPU)"  # fine-tuning's and scoring's kernels
    encode_factor: float = 1.0  # the run machine's encoding time over the one measured in stats


# ---------------------------------------------------------------- throughput


def _time(step, device, warmup: int = 2, n: int = 3) -> float:
    """Seconds a step takes: the mean of ``n`` after ``warmup`` (``runtime.timed``)."""
    for _ in range(warmup):
        step()
    return sum(timed(step, device)[0] for _ in range(n)) / n


def _loop(job: Pretraining, model, device, steps: int, first: int) -> tuple[float, float]:
    """``pretrain`` itself, ``steps`` updates of ``model`` on the job's corpus in a scratch
    folder: the seconds of a steady update, and what the first ``first`` took beyond them."""
    cfg = replace(job.cfg, log_interval=first, eval_interval=10**9, ckpt_interval=10**9)
    cfg = replace(cfg, n_log_checkpoints=0)
    with tempfile.TemporaryDirectory() as tmp:
        pretrain(model, job.tok, job.data, cfg, tmp, device=device, progress=False,
                 stop_after=steps)  # fmt: skip
        lines = (Path(tmp) / "records.jsonl").read_text().splitlines()
    walls = {r["step"]: r["wall_time"] for r in map(json.loads, lines)
             if r["metric"] == "train_loss"}  # fmt: skip
    step_s = (walls[steps] - walls[first]) / (steps - first)
    return step_s, max(0.0, walls[first] - first * step_s)


def _finetuning(S, vocab_size: int, device, arch: str = "gpt"):
    """A fine-tuning update and a scoring batch of the scale's model (``arch``) as the loops
    run them (their precision and attention kernels), at any padded length."""
    cfg = S.finetune
    lm = new_model(S, vocab_size, arch).add_special_tokens()
    model = TaskModel(lm, get_task("sst2"), cfg.clf_pdrop).to(device).train()
    opt, precision, v = make_optimizer(model, cfg.lr), pick_precision(device, cfg.bf16), vocab_size

    def batch(seq: int, rows: int):
        return collate([Encoded(((v, *[i % v] * (seq - 2), v + 2),), i % 2)
                        for i in range(rows)]).to(device)  # fmt: skip

    def step(seq: int) -> None:
        b = batch(seq, cfg.batch_size)

        def losses():
            with precision.autocast(device.type), attention_backends(device):
                scores, l1 = model(b)
            yield task_loss(scores.float(), b.labels, None, l1, cfg.lm_coef)[0]

        train_step(model, opt, cfg.lr, losses(), cfg.grad_clip)

    @torch.no_grad()
    def score(seq: int) -> None:
        b = batch(seq, cfg.eval_batch_size)
        with precision.autocast(device.type), attention_backends(device):
            model.eval()
            model(b, lm=False)
            model.train()

    return step, score


def _fit(t_short: float, t_long: float, rows: int, short: int, long: int) -> tuple[float, float]:
    """(seconds a batch beyond its tokens, seconds a padded token) through two timings."""
    per_token = max(0.0, (t_long - t_short) / (rows * (long - short) or 1))
    return max(t_short - per_token * rows * short, 0.0), per_token


def _run_overhead(S, job: Pretraining, device, step_s: float) -> float:
    """What a fine-tuning run costs beyond its updates and scoring: ``finetune`` itself, one
    epoch of two updates on made-up sentences, less the two updates."""
    examples = [Example((f"sentence {i} of the test",), label=i % 2) for i in range(64)]
    cfg = replace(S.finetune, epochs=1, batch_size=32)
    model = new_model(S, job.tok.vocab_size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the made-up data's checks
        for _ in range(2):  # the second: what the first imported and cached is paid
            t0 = time.perf_counter()
            finetune(model, job.tok, "sst2", examples, {"dev": examples[:8]}, cfg,
                     device=device, progress=False)  # fmt: skip
    return max(0.0, time.perf_counter() - t0 - 2 * step_s)


def _zero_shot(S, vocab_size: int, device) -> float:
    """Seconds a padded token of zero-shot scoring: RACE-like sequences as long as the context."""
    n_ctx = S.model_config().n_ctx
    model = FastGPT(S.model_config(vocab_size=vocab_size)).to(device).eval()
    n = 64 if device.type == "cuda" else 8
    prefixes = [[i % vocab_size] * (n_ctx - 2) for i in range(n)]
    run = lambda: continuation_logprobs(model, prefixes, [[1, 2]] * n)  # noqa: E731
    return _time(run, device, 1, 2) / (n * n_ctx)


def measure(S, job: Pretraining, device: torch.device, t_start: float) -> Throughput:
    """Time each kind of work on ``device`` as the run does it (``job``: the run's GPT
    pre-training, its tokenizer and corpus); ``t_start``: when the run began (its set-up
    counts)."""
    torch.manual_seed(0)
    cuda, vocab_size = device.type == "cuda", job.tok.vocab_size
    steps, first = (40, 10) if cuda else (6, 2)
    gpt = job.model()
    pre, pre_start = _loop(job, gpt, device, steps, first)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        save_model(gpt, tmp)
        save = (time.perf_counter() - t0) * 3  # a resumable checkpoint: the optimiser's state too
    del gpt
    lstm_job = replace(job, arch="lstm", cfg=replace(job.cfg, experiment="pretrain:lstm"))
    lstm = new_model(S, vocab_size, "lstm")
    lstm_s, lstm_start = _loop(lstm_job, lstm, device, steps, first)
    n_ctx, multiple = S.model_config().n_ctx, pad_multiple(device)
    short, long = max(4, n_ctx // 4), n_ctx
    step, score = _finetuning(S, vocab_size, device)
    _time(lambda: step(n_ctx // 2), device, 0, 2)  # the first updates: optimiser state, kernels
    firsts, steady = [], []
    for seq in (short, long):
        firsts.append(timed(lambda seq=seq: step(seq), device)[0])  # a length not seen before
        steady.append(_time(lambda seq=seq: step(seq), device, 0, 3))
    ft_step, ft_token = _fit(*steady, S.finetune.batch_size, short, long)
    new_shape = max(0.0, (firsts[0] - steady[0] + firsts[1] - steady[1]) / 2)
    evals = [_time(lambda seq=seq: score(seq), device, 1, 3) for seq in (short, long)]
    eval_step, eval_token = _fit(*evals, S.finetune.eval_batch_size, short, long)
    lstm_step = _finetuning(S, vocab_size, device, "lstm")[0]
    lstm_ft = _time(lambda: lstm_step(short), device, 2, 3) / steady[0]
    overhead = _run_overhead(S, job, device, steady[0])
    name = torch.cuda.get_device_name(device) if cuda else "cpu"
    return Throughput(
        device=name,
        how=f"measured on {name}: the pre-training loop ({S.pretrain.batch_size} x {n_ctx} "
        f"tokens{', compiled' if S.pretrain.compile else ''}), fine-tuning and scoring",
        pretrain_step_s=pre, pretrain_start_s=pre_start, lstm_step_s=lstm_s,
        lstm_start_s=lstm_start, ft_step_s=ft_step, ft_token_s=ft_token,
        new_shape_s=new_shape, eval_step_s=eval_step,
        eval_token_s=eval_token, zs_token_s=_zero_shot(S, vocab_size, device),
        lstm_ft_ratio=lstm_ft, run_overhead_s=overhead, save_s=save,
        setup_s=time.perf_counter() - t_start,
        bench_s=ASSUMED_BENCH_S if cuda else 20.0, pad_multiple=multiple,
        loss_path=loss_path(S.pretrain, device), attention=attention_name(device),
    )  # fmt: skip


def estimate(S, vocab_size: int, device_name: str = "NVIDIA H100 80GB HBM3") -> Throughput:
    """What ``measure`` would find on ``device_name``, for planning where it is not at hand:
    ``RECORDED``'s measurements where it has the scale and device, else FLOPs at
    ``ASSUMED_MFU`` of the data-sheet peak and per-step costs from ``ASSUMED``."""
    peak = table_peak(device_name)
    if peak is None:
        raise ValueError(f"no data-sheet peak for {device_name!r}: see gpt1lib.flops.PEAK_TFLOPS")
    cuda = torch.device("cuda")
    paths = {"pad_multiple": pad_multiple(cuda), "attention": attention_name(cuda)}
    paths["loss_path"] = loss_path(S.pretrain, cuda)
    for (scale, key), values in RECORDED.items():
        if scale == S.name and key in device_name:
            how = (f"ESTIMATED (no {device_name} at hand) from what one measured at ee22f51 "
                   "(gpt1lib.harness.throughput.RECORDED), encoding "
                   f"{1 / ASSUMED_ENCODE:g}x as fast as measured here")  # fmt: skip
            return Throughput(device_name, how, **values, **paths, encode_factor=ASSUMED_ENCODE)
    flops = peak[0] * 1e12
    cfg = S.model_config(vocab_size=vocab_size)
    tokens = S.pretrain.batch_size * cfg.n_ctx
    pre = model_flops_per_token(cfg, cfg.n_ctx) * tokens / (flops * ASSUMED_MFU["pretrain"])
    lc = S.lstm_config(vocab_size=vocab_size)
    lstm_flops = 6 * (4 * lc.n_hidden * (lc.n_embd + lc.n_hidden) + lc.n_tokens * lc.n_embd)
    token = model_flops_per_token(cfg, 64) / (flops * ASSUMED_MFU["finetune"])
    mfu = ", ".join(f"{k} {v:.0%}" for k, v in ASSUMED_MFU.items())
    return Throughput(
        device=device_name,
        how=f"ESTIMATED (no {device_name} at hand): FLOPs at an assumed MFU ({mfu}) of "
        f"{peak[0]:g} TFLOP/s, {ASSUMED['ft_step_s'] * 1e3:g} ms a fine-tuning update beyond "
        f"its tokens, encoding {1 / ASSUMED_ENCODE:g}x as fast as measured here",
        pretrain_step_s=pre, pretrain_start_s=30.0,
        lstm_step_s=lstm_flops * tokens / (flops * ASSUMED_MFU["lstm"]), lstm_start_s=5.0,
        ft_step_s=ASSUMED["ft_step_s"], ft_token_s=token, new_shape_s=0.01,
        eval_step_s=ASSUMED["ft_step_s"] / 3, eval_token_s=token / 3, zs_token_s=token / 2,
        lstm_ft_ratio=0.6,
        run_overhead_s=ASSUMED["run_overhead_s"], save_s=ASSUMED["save_s"],
        setup_s=ASSUMED["setup_s"], bench_s=ASSUMED_BENCH_S, encode_factor=ASSUMED_ENCODE,
        **paths,
    )  # fmt: skip


# ---------------------------------------------------------------- the data's sizes


def finetuned(S) -> list[str]:
    """The tasks chapters 05-08 fine-tune at scale ``S`` (``Scale.family_tasks``)."""
    return [t for tasks in S.family_tasks.values() for t in tasks]


def task_stats(S, source, tok) -> dict[str, dict]:
    """For every task a run may load from ``source``: examples per split, mean tokens per
    example (every sequence, from up to 100 of them), each sampled example's sequences and the
    longest of them (what a batch is padded from), and seconds to encode one."""
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
            entry[split] |= {"n_seq": len(items[0].seqs), "lengths": [max(map(len, i.seqs))
                                                                      for i in items]}  # fmt: skip
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
