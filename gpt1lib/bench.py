"""Speed: GPT-1's training steps timed against transformers' OpenAIGPT in the same run.

What is measured, for a model preset and a batch of ``batch`` sequences of ``seq`` tokens, on the
CPU or a GPU: the time of one training step as the loops of ``pretrain.py`` run it (forward, the
loss, backward, the global gradient-norm clip at 1.0, an AdamW step), tokens per second, peak
memory and the model FLOPs utilisation (MFU). transformers' ``OpenAIGPTLMHeadModel`` of the same
configuration (``labels=input_ids`` loss) is built in the same process and its steps are
INTERLEAVED with ours after warm-up (ours, theirs, ours, ...), so both see the same machine
state; every figure is the median over the timed steps, and the ratio is taken within the run.
Both use the same optimiser (``make_optimizer``'s decay scope; fused AdamW where PyTorch has it,
which is also transformers' Trainer default) and compute the same function: "gpt1lib" drops out
the summed embedding like transformers does (``embd_dropout="sum"``); the released code's
dropout on the embedding matrix (gpt1lib's default) is the variant "gpt1lib:matrix".

FLOPs, the model FLOPs of PaLM (Chowdhery et al. 2022, appendix B), no recomputation counted:

    per token, forward + backward = 6 * N + 12 * n_layer * T * d

N = the parameters of the blocks (every weight, bias and LayerNorm gain: 85,054,464 at the
paper's preset) plus n_tokens * d for the output matmul h_n W_e^T (the tied head is a matmul even
though it adds no parameters): 116,141,568 at the paper's preset. The position embedding and the
token lookup do no matmul and are not counted. 12 * n_layer * T * d is attention's QK^T and AV:
2 * 2 * T * d per token and layer forward, twice that backward, counting the causal mask's zeros
as PaLM does. The real vocabulary counts, not the padded one (padding is work MFU does not credit).

MFU = FLOPs per token x tokens per second / peak. The peak: on CUDA the device's dense bf16
tensor-core rate from ``PEAK_TFLOPS`` by device name (the T4's fp16), else a measured bf16
matmul; on the CPU a measured float32 matmul (2048^3 ``torch.matmul``, best of five), so CPU MFU
says how close a step comes to this machine's own matmul speed.

Peak memory: on CUDA ``torch.cuda.max_memory_allocated`` during a step, above the memory held
before it; on the CPU the growth of the resident set during the first training step above its size
before it, each implementation in a fresh process of its own, after a step of a tiny model of
the same kind has paid for the runtime's own buffers. The resident set is sampled from
``/proc/self/statm`` every millisecond (Linux; elsewhere ``getrusage``'s max RSS, a high-water
mark). Both include the gradients and AdamW's two moments; at the tiny preset the CPU figure is
mostly the allocator's granularity, not the model.

On the CPU the table also gives each step's process CPU time: on a machine shared with other
work it is the steadier measure of the work done (wall time includes waiting for the cores).

Fine-tuning (``mode="finetune"``): examples per second of a classification ``TaskModel`` with the
auxiliary LM loss (lambda 0.5) on synthetic examples whose lengths are drawn like SST-2's (mostly
5-40 tokens), batched two ways over the same examples: length-grouped batches padded to their
longest (``finetune.batches``, ``transforms.collate``) against every batch padded to the
context (512 at small/paper, 64 at tiny), the way a fixed-shape loop does it.

``python -m gpt1lib.bench --preset small --batch 4 --seq 128`` prints the table and, with
``--out``, appends the records (experiment "bench").
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import json
import math
import os
import random
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import torch

from .model import GPT, PRESETS, GPTConfig, lm_loss, preset
from .records import append_records, make_record, provenance

#: Dense bf16 tensor-core peaks in TFLOP/s (fp16 for the T4, which has no bf16), from the
#: vendors' data sheets, without sparsity; matched in order against the CUDA device's name.
PEAK_TFLOPS: tuple[tuple[str, float], ...] = (
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.0),  # SXM: the name reads "NVIDIA H100 80GB HBM3"
    ("H200", 989.0),
    ("A100", 312.0),
    ("L4", 121.0),
    ("T4", 65.0),
)

#: What each gpt1lib variant changes from "gpt1lib" (the library as its training loops run it:
#: loss from the hidden states by ``fused_lm_loss``, the CPU's fast dropout, the vocabulary
#: padded to 64 on CUDA). Each isolates one speed path, for the ablation table.
VARIANTS: dict[str, dict[str, Any]] = {
    "gpt1lib": {},
    "gpt1lib:matrix": {"embd_dropout": "matrix"},  # the released code's embedding dropout
    "gpt1lib:logits": {"loss": "logits"},  # full logits, then lm_loss
    "gpt1lib:pad1": {"pad_vocab_to": 1},
    "gpt1lib:pad64": {"pad_vocab_to": 64},
    "gpt1lib:torch-dropout": {"fast_cpu_dropout": False},  # F.dropout and SDPA's own
    # every speed path off: the model as it was before them
    "gpt1lib:plain": {"loss": "logits", "fast_cpu_dropout": False, "pad_vocab_to": 1},
}
IMPLEMENTATIONS = (*VARIANTS, "transformers")


@dataclass(frozen=True)
class BenchConfig:
    """One benchmark run; ``None`` fields take the preset's or the device's value."""

    preset: str = "tiny"  # model preset: tiny, small, paper
    batch: int = 4  # sequences per step (examples per step when fine-tuning)
    seq: int | None = None  # tokens per sequence; None: the preset's context
    steps: int = 5  # timed steps per implementation, after warm-up
    warmup: int = 2  # untimed steps per implementation first
    device: str | None = None  # None: CUDA where available, else the CPU
    mode: Literal["pretrain", "finetune", "both"] = "pretrain"
    implementations: tuple[str, ...] = ("gpt1lib", "transformers")
    bf16: bool = True  # bf16 autocast on CUDA; the CPU always runs float32
    compile: bool = False  # torch.compile every model timed (ours and transformers')
    pad_vocab_to: int | None = None  # for gpt1lib; None: 64 on CUDA, 1 on the CPU
    dropout: float = 0.1  # every dropout rate, as in the paper
    memory: bool = True  # measure peak memory (on the CPU: one fresh process per model)
    seed: int = 0
    scale: str | None = None  # recorded only: the book's scale this run stands for


@dataclass
class _Contender:
    """One thing to time: a name, a step function and what the records say about it."""

    name: str
    step: Callable[[], None]
    config: dict[str, Any]
    tokens: int  # tokens per step (pre-training)
    examples: int = 0  # examples per step (fine-tuning)
    batches: list = field(default_factory=list)  # fine-tuning: the batches it cycles through
    times: list[float] = field(default_factory=list)
    cpu_times: list[float] = field(default_factory=list)
    peak_mem_mb: float | None = None


# ---------------------------------------------------------------- FLOPs and peaks


def matmul_params(cfg: GPTConfig) -> int:
    """N of the FLOPs formula: the blocks' parameters plus the output matmul's n_tokens * d."""
    d = cfg.n_embd
    per_block = (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d) + 4 * d
    return cfg.n_layer * per_block + cfg.n_tokens * d


def model_flops_per_token(cfg: GPTConfig, seq: int) -> float:
    """Training FLOPs per token: 6 * N + 12 * n_layer * seq * n_embd (see the module doc)."""
    return 6.0 * matmul_params(cfg) + 12.0 * cfg.n_layer * seq * cfg.n_embd


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measured_matmul_tflops(
    device: torch.device, dtype: torch.dtype = torch.float32, n: int = 2048, repeats: int = 5
) -> float:
    """The best rate of an n x n x n ``torch.matmul`` in ``dtype`` on ``device``, in TFLOP/s."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    a @ b
    _sync(device)
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best / 1e12


def table_peak(device_name: str) -> tuple[float, str] | None:
    """The data-sheet peak of a CUDA device by name (``PEAK_TFLOPS``), or None if unknown."""
    for key, tflops in PEAK_TFLOPS:
        if key in device_name:
            kind = "fp16" if key == "T4" else "bf16"
            return tflops, f"{device_name}: dense {kind} data-sheet peak"
    return None


def peak_tflops(device: torch.device) -> tuple[float, str]:
    """The peak that MFU divides by, in TFLOP/s, and where it comes from."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        known = table_peak(name)
        if known:
            return known
        return (
            measured_matmul_tflops(device, torch.bfloat16, 8192),
            f"{name}: measured bf16 matmul, 8192^3 (not in PEAK_TFLOPS)",
        )
    return measured_matmul_tflops(device), "measured float32 matmul, 2048^3"


# ---------------------------------------------------------------- the contenders


def _autocast(device: torch.device, bf16: bool):
    if device.type == "cuda" and bf16:
        return torch.autocast("cuda", torch.bfloat16)
    return contextlib.nullcontext()


def _optimizer(model: torch.nn.Module, device: torch.device):
    """The pre-training optimiser (decay scope, betas, eps), fused where PyTorch has it."""
    from .pretrain import PretrainConfig, make_optimizer

    return make_optimizer(model.to(device), PretrainConfig())


def _train_step(model, opt, loss_fn: Callable[[], torch.Tensor], device, bf16) -> Callable:
    """One update as the training loops make it."""

    def step() -> None:
        with _autocast(device, bf16):
            loss = loss_fn()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def _gpt_config(cfg: BenchConfig, device: torch.device, **overrides: Any) -> GPTConfig:
    p = cfg.dropout
    pad = cfg.pad_vocab_to or (64 if device.type == "cuda" else 1)
    fields = {"embd_pdrop": p, "attn_pdrop": p, "resid_pdrop": p, "pad_vocab_to": pad}
    return preset(cfg.preset, **(fields | overrides))


def _transformers_model(cfg: GPTConfig, dropout: float):
    try:
        from transformers import OpenAIGPTConfig, OpenAIGPTLMHeadModel
        from transformers.utils import logging as hf_logging
    except ImportError as e:
        raise ImportError(
            "the comparison needs transformers: pip install transformers "
            "(or leave 'transformers' out of implementations)"
        ) from e
    hf_logging.set_verbosity_error()
    from .weights import config_to_hf

    hf = {k: v for k, v in config_to_hf(cfg).items() if k not in ("architectures", "model_type")}
    hf.update(embd_pdrop=dropout, attn_pdrop=dropout, resid_pdrop=dropout)
    return OpenAIGPTLMHeadModel(OpenAIGPTConfig(**hf))


def _pretrain_contender(name: str, cfg: BenchConfig, seq: int, device: torch.device) -> _Contender:
    """A model, its optimiser and a pre-training step on a fixed random batch."""
    g = torch.Generator().manual_seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    base = preset(cfg.preset)
    x = torch.randint(0, base.vocab_size, (cfg.batch, seq + 1), generator=g).to(device)
    bf16 = cfg.bf16 and device.type == "cuda"
    info: dict[str, Any] = {"implementation": name.split(":")[0], "variant": name}
    if name == "transformers":
        model = _transformers_model(base, cfg.dropout).to(device).train()
        net = torch.compile(model) if cfg.compile else model

        def loss_fn() -> torch.Tensor:
            return net(x[:, :-1], labels=x[:, :-1]).loss

        info["loss"] = "OpenAIGPTLMHeadModel(labels=input_ids)"
        info["embd_dropout"] = "sum"
    else:
        overrides = {"embd_dropout": "sum", **VARIANTS[name]}
        loss_path = overrides.pop("loss", "fused")
        mcfg = _gpt_config(cfg, device, **overrides)
        model = GPT(mcfg).to(device).train()
        net = torch.compile(model) if cfg.compile else model
        if loss_path == "logits":

            def loss_fn() -> torch.Tensor:
                return lm_loss(net(x[:, :-1], validate=False).logits, x[:, 1:])

            info["loss"] = "lm_loss(logits)"
        else:

            def loss_fn() -> torch.Tensor:
                return net(x[:, :-1], targets=x[:, 1:], validate=False).loss

            info["loss"] = "fused_lm_loss(hidden)"
        info |= {k: getattr(mcfg, k) for k in ("embd_dropout", "pad_vocab_to", "fast_cpu_dropout")}
    opt = _optimizer(model, device)
    info["fused_adamw"] = bool(opt.defaults.get("fused"))
    return _Contender(name, _train_step(model, opt, loss_fn, device, bf16), info, cfg.batch * seq)


def sst2_like_lengths(n: int, n_ctx: int, seed: int = 0) -> list[int]:
    """``n`` sequence lengths (with ``_start_`` and ``_classify_``) drawn like SST-2's: a
    log-normal around 13 tokens, mostly 5-40, at least 3 and at most ``n_ctx``."""
    rng = random.Random(seed)
    return [max(3, min(n_ctx, round(rng.lognormvariate(math.log(13), 0.6)))) for _ in range(n)]


def _finetune_contenders(cfg: BenchConfig, device: torch.device) -> list[_Contender]:
    """Two fine-tuning loops over the same ``batch * steps`` synthetic SST-2-like examples:
    dynamic padding of length-grouped batches, and every batch padded to the context. Warm-up
    steps take the first batches; the timed steps then see every batch once."""
    from .finetune import TaskModel, batches, task_loss
    from .tasks import get_task
    from .transforms import Encoded, collate

    mcfg = _gpt_config(cfg, device)
    n_ctx = mcfg.n_ctx
    n = cfg.batch * cfg.steps
    rng = random.Random(cfg.seed)
    start, classify = mcfg.vocab_size, mcfg.vocab_size + 2  # _start_, _classify_
    items = [
        Encoded(
            ((start, *(rng.randrange(mcfg.vocab_size) for _ in range(k - 2)), classify),),
            rng.randrange(2),
        )
        for k in sst2_like_lengths(n, n_ctx, cfg.seed)
    ]
    spec = get_task("sst2")
    bf16 = cfg.bf16 and device.type == "cuda"
    out = []
    for padding in ("dynamic", "context"):
        torch.manual_seed(cfg.seed)
        model = TaskModel(GPT(mcfg).add_special_tokens(), spec, cfg.dropout).to(device).train()
        net = torch.compile(model) if cfg.compile else model
        opt = _optimizer(model, device)
        grouped = padding == "dynamic"
        order = batches(items, cfg.batch, random.Random(cfg.seed), length_grouped=grouped)
        prepared = [
            collate([items[i] for i in b], pad_to=None if grouped else n_ctx).to(device)
            for b in order
        ]
        feed = itertools.cycle(prepared)

        def loss_fn(net=net, model=model, feed=feed) -> torch.Tensor:
            batch = next(feed)
            return task_loss(net(batch, lm=True), batch, model, 0.5)[0]

        info = {
            "implementation": "gpt1lib",
            "variant": f"finetune:{padding}",
            "padding": "length-grouped, padded to the longest"
            if grouped
            else f"every batch padded to the context ({n_ctx})",
            "lm_coef": 0.5,
            "examples": n,
            "embd_dropout": mcfg.embd_dropout,
            "pad_vocab_to": mcfg.pad_vocab_to,
            "fused_adamw": bool(opt.defaults.get("fused")),
        }
        step = _train_step(model, opt, loss_fn, device, bf16)
        out.append(
            _Contender(f"finetune:{padding}", step, info, 0, examples=cfg.batch, batches=prepared)
        )
    return out


# ---------------------------------------------------------------- memory


def _rss_bytes() -> int | None:
    """The process's resident set now, from /proc (Linux); None elsewhere."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize()
    except OSError:
        return None


def _max_rss_bytes() -> int:
    """``getrusage``'s max RSS in bytes (kilobytes on Linux, bytes on macOS)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (
        1 if sys.platform == "darwin" else 1024
    )


def _peak_growth(step: Callable[[], None]) -> float:
    """The resident set's peak during ``step()`` above its size before, in MB: sampled from
    /proc every millisecond by a thread, else the ``getrusage`` max-RSS growth."""
    gc.collect()
    before = _rss_bytes()
    if before is None:
        hwm = _max_rss_bytes()
        step()
        return max(0, _max_rss_bytes() - hwm) / 2**20
    peak, done = [before], threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss_bytes())
            done.wait(0.001)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        step()
    finally:
        done.set()
        watcher.join()
    return max(0, max(peak[0], _rss_bytes()) - before) / 2**20


def _probe_memory(cfg: BenchConfig, mode: str, name: str, seq: int) -> float:
    """In THIS process: build ``name`` and return its first step's peak memory growth in MB.

    A step of a throwaway tiny model of the same kind runs first, so that what the runtime
    allocates once (thread pools, kernels) is not counted as the model's.
    """
    device = torch.device("cpu")
    warm = replace(cfg, preset="tiny", batch=1, steps=1)
    if mode == "pretrain":
        _pretrain_contender(name, warm, 8, device).step()
        c = _pretrain_contender(name, cfg, seq, device)
    else:
        next(c for c in _finetune_contenders(warm, device) if c.name == name).step()
        c = next(c for c in _finetune_contenders(cfg, device) if c.name == name)
    return _peak_growth(c.step)


def _memory_in_fresh_process(cfg: BenchConfig, mode: str, name: str, seq: int) -> float | None:
    """``_probe_memory`` in a new Python process with this one's thread count."""
    args = json.dumps([asdict(cfg), mode, name, seq, torch.get_num_threads()])
    code = "import sys; from gpt1lib.bench import _probe_main; _probe_main(sys.argv[1])"
    here = str(Path(__file__).resolve().parents[1])  # this gpt1lib, not another installed one
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")])),
    }
    run = subprocess.run(
        [sys.executable, "-c", code, args], capture_output=True, text=True, timeout=1800, env=env
    )
    if run.returncode != 0:
        raise RuntimeError(f"the memory probe of {name} failed:\n{run.stderr[-2000:]}")
    return float(run.stdout.strip().splitlines()[-1])


def _probe_main(args: str) -> None:
    """Entry point of the memory probe's process: prints the growth in MB."""
    cfg, mode, name, seq, threads = json.loads(args)
    torch.set_num_threads(threads)
    cfg["implementations"] = tuple(cfg["implementations"])
    print(_probe_memory(BenchConfig(**cfg), mode, name, seq))  # the probe's only output


def _memory(contenders: Sequence[_Contender], cfg, mode, seq, device) -> str:
    """Set each contender's peak memory; returns how it was measured."""
    if not cfg.memory:
        return "not measured"
    if device.type == "cuda":
        for c in contenders:
            _sync(device)
            torch.cuda.reset_peak_memory_stats(device)
            before = torch.cuda.memory_allocated(device)
            c.step()
            _sync(device)
            c.peak_mem_mb = (torch.cuda.max_memory_allocated(device) - before) / 2**20
        return "torch.cuda.max_memory_allocated during a step, above what was held before"
    for c in contenders:
        c.peak_mem_mb = _memory_in_fresh_process(cfg, mode, c.name, seq)
    how = "sampled from /proc/self/statm" if _rss_bytes() is not None else "getrusage max RSS"
    return f"resident-set growth during the first step ({how}), one fresh process per model"


# ---------------------------------------------------------------- running


def _time_interleaved(contenders: Sequence[_Contender], cfg: BenchConfig, device) -> float:
    """Warm each up, then alternate timed steps: one of each, ``steps`` times. On the CPU a
    float32 matmul is timed after each round too; returns its best rate (TFLOP/s, else 0), so
    that the CPU's peak is the machine's best during the run, not a moment's."""
    for c in contenders:
        for _ in range(cfg.warmup):
            c.step()
    _sync(device)
    best = 0.0
    for _ in range(cfg.steps):
        for c in contenders:
            _sync(device)
            t0, c0 = time.perf_counter(), time.process_time()
            c.step()
            _sync(device)
            c.times.append(time.perf_counter() - t0)
            c.cpu_times.append(time.process_time() - c0)
        if device.type == "cpu":
            best = max(best, measured_matmul_tflops(device, repeats=2))
    return best


def run_benchmark(cfg: BenchConfig | None = None, **overrides: Any) -> list[dict[str, Any]]:
    """Time the training steps ``cfg`` asks for; one result dict per implementation timed.

    Each dict holds mode, implementation, variant, preset, batch, seq, device, dtype, threads,
    step_time_s (median), cpu_time_s (CPU only), tokens_per_s, examples_per_s (fine-tuning),
    flops_per_token, mfu, peak_tflops and peak_source, peak_mem_mb and mem_method, vs_reference
    (its speed over the reference's: transformers, or padding to the context) and
    vs_reference_cpu, the step times, config, commit and date.
    """
    cfg = replace(cfg or BenchConfig(), **overrides)
    if cfg.preset not in PRESETS:
        raise ValueError(f"preset={cfg.preset!r}: choose one of {sorted(PRESETS)}")
    if cfg.mode not in ("pretrain", "finetune", "both"):
        raise ValueError(f"mode={cfg.mode!r}: choose pretrain, finetune or both")
    unknown = [i for i in cfg.implementations if i not in IMPLEMENTATIONS]
    if unknown:
        raise ValueError(f"unknown implementations {unknown}; choose from {IMPLEMENTATIONS}")
    if cfg.steps < 1 or cfg.warmup < 1 or cfg.batch < 1:
        raise ValueError(
            f"steps={cfg.steps}, warmup={cfg.warmup}, batch={cfg.batch}: each must be >= 1"
        )
    from .runtime import pick_device

    device = pick_device(cfg.device)
    n_ctx = preset(cfg.preset).n_ctx
    seq = cfg.seq or n_ctx
    if not 1 <= seq <= n_ctx:
        raise ValueError(f"seq={seq} must be between 1 and the {cfg.preset} context {n_ctx}")
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True  # float32 leftovers on tensor cores
        torch.backends.cudnn.allow_tf32 = True
    dtype = "bf16 autocast" if cfg.bf16 and device.type == "cuda" else "float32"
    peak, peak_src = peak_tflops(device)
    if device.type == "cpu":
        peak_src += ", the best of those timed before and between the rounds of steps"
    prov = provenance(device)
    results: list[dict[str, Any]] = []
    timed: list[tuple[_Contender, str, float, str]] = []  # made into results once peak is known

    def result(c: _Contender, mode: str, seq_: float, mem_method: str) -> dict[str, Any]:
        t = statistics.median(c.times)
        cpu_t = statistics.median(c.cpu_times) if device.type == "cpu" else None
        fpt = model_flops_per_token(preset(cfg.preset), seq) if mode == "pretrain" else None
        tok_s = c.tokens / t if c.tokens else None
        return {
            "mode": mode,
            "implementation": c.config["implementation"],
            "variant": c.name,
            "preset": cfg.preset,
            "batch": cfg.batch,
            "seq": seq_,
            "device": prov["device"],
            "dtype": dtype,
            "threads": torch.get_num_threads() if device.type == "cpu" else None,
            "compile": cfg.compile,
            "step_time_s": t,
            "cpu_time_s": cpu_t,
            "tokens_per_s": tok_s,
            "examples_per_s": c.examples / t if c.examples else None,
            "flops_per_token": fpt,
            "mfu": fpt * tok_s / (peak * 1e12) if fpt and tok_s else None,
            "peak_tflops": peak,
            "peak_source": peak_src,
            "peak_mem_mb": c.peak_mem_mb,
            "mem_method": mem_method,
            "step_times_s": list(c.times),
            "config": c.config,
            **prov,
        }

    def compare(rows: list[dict[str, Any]], ref: dict[str, Any] | None, label: str) -> None:
        for r in rows:
            r["reference"] = label if ref else None
            r["vs_reference"] = ref["step_time_s"] / r["step_time_s"] if ref else None
            r["vs_reference_cpu"] = (
                ref["cpu_time_s"] / r["cpu_time_s"] if ref and r["cpu_time_s"] else None
            )

    if cfg.mode in ("pretrain", "both"):
        contenders = [_pretrain_contender(n, cfg, seq, device) for n in cfg.implementations]
        method = _memory(contenders, cfg, "pretrain", seq, device)
        peak = max(peak, _time_interleaved(contenders, cfg, device))
        timed += [(c, "pretrain", seq, method) for c in contenders]
        del contenders
    if cfg.mode in ("finetune", "both"):
        contenders = _finetune_contenders(cfg, device)
        method = _memory(contenders, cfg, "finetune", seq, device)
        peak = max(peak, _time_interleaved(contenders, cfg, device))
        for c in contenders:  # seq: the mean padded length
            timed.append((c, "finetune", statistics.mean(b.ids.size(1) for b in c.batches), method))
    for mode, ref_label in (("pretrain", "transformers"), ("finetune", "padding to the context")):
        rows = [result(c, m, s, method) for c, m, s, method in timed if m == mode]
        if mode == "finetune":
            for r, (c, *_) in zip(rows, [t for t in timed if t[1] == mode], strict=True):
                real = sum(int(b.mask.sum()) for b in c.batches)
                r["tokens_per_s"] = real / len(c.batches) / r["step_time_s"]  # real tokens only
            ref = rows[1] if rows else None
        else:
            ref = next((r for r in rows if r["variant"] == "transformers"), None)
        compare(rows, ref, ref_label)
        results += rows
    return results


# ---------------------------------------------------------------- records and table

#: The result fields that become records.
METRICS = (
    "step_time_s",
    "cpu_time_s",
    "tokens_per_s",
    "examples_per_s",
    "mfu",
    "peak_mem_mb",
    "vs_reference",
)


def to_records(results: Sequence[dict[str, Any]], cfg: BenchConfig | None = None) -> list[dict]:
    """Records (``records.make_record``) of ``results``: one per metric and implementation.

    The ratio is recorded as "speedup_vs_transformers" or "speedup_vs_padding_to_context"."""
    cfg = cfg or BenchConfig()
    recs = []
    for r in results:
        config = {
            **r["config"],
            **{k: r[k] for k in ("preset", "batch", "seq", "mode", "dtype", "threads", "compile")},
            "steps": len(r["step_times_s"]),
            "step_times_s": r["step_times_s"],
            "peak_tflops": r["peak_tflops"],
            "peak_source": r["peak_source"],
            "flops_per_token": r["flops_per_token"],
            "mem_method": r["mem_method"],
            "reference": r.get("reference"),
        }
        for metric in METRICS:
            if r.get(metric) is None:
                continue
            name = metric
            if metric == "vs_reference":
                name = "speedup_vs_" + (
                    "transformers" if r["reference"] == "transformers" else "padding_to_context"
                )
            recs.append(
                make_record(
                    name,
                    r[metric],
                    experiment="bench",
                    task="lm" if r["mode"] == "pretrain" else "sst2_lengths",
                    split="train",
                    scale=cfg.scale,
                    seed=cfg.seed,
                    config=config,
                    data="synthetic random tokens",
                    commit=r["commit"],
                    device=r["device"],
                    date=r["date"],
                    wall_time=sum(r["step_times_s"]),
                )
            )
    return recs


#: The table's columns and how each is printed.
_COLUMNS = {
    "mode": str,
    "variant": str,
    "preset": str,
    "batch": str,
    "seq": "{:.0f}".format,
    "dtype": str,
    "step_time_s": "{:.3f}".format,
    "cpu_time_s": "{:.3f}".format,
    "tokens_per_s": "{:,.0f}".format,
    "examples_per_s": "{:,.1f}".format,
    "mfu": "{:.1%}".format,
    "peak_mem_mb": "{:,.0f}".format,
    "vs_reference": "{:.2f}x".format,
    "vs_reference_cpu": "{:.2f}x".format,
    "reference": str,
}


def results_table(results: Sequence[dict[str, Any]]):
    """The results as a DataFrame, one row per implementation timed."""
    import pandas as pd

    return pd.DataFrame([{k: r.get(k) for k in _COLUMNS} for r in results], columns=list(_COLUMNS))


def format_table(results: Sequence[dict[str, Any]]) -> str:
    """A plain-text table of ``results``, then the device, commit, peak and memory method."""
    df = results_table(results).astype(object)
    for col, f in _COLUMNS.items():
        df[col] = [f(v) if v is not None and v == v else "-" for v in df[col]]
    text = df.to_string(index=False)
    if results:
        r = results[0]
        threads = f", {r['threads']} threads" if r["threads"] else ""
        text += (
            f"\ndevice: {r['device']}{threads}; commit {r['commit']}; {r['date']}"
            f"\nMFU peak: {r['peak_tflops']:.3g} TFLOP/s ({r['peak_source']})"
            f"\nmemory: {r['mem_method']}"
        )
    return text


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """``python -m gpt1lib.bench``: time, print the table, append the records."""
    p = argparse.ArgumentParser(prog="python -m gpt1lib.bench", description=__doc__.split("\n")[0])
    p.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=None, help="tokens per sequence (default n_ctx)")
    p.add_argument("--steps", type=int, default=5, help="timed steps per implementation")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--device", default=None)
    p.add_argument("--mode", choices=("pretrain", "finetune", "both"), default="pretrain")
    p.add_argument(
        "--impl",
        nargs="+",
        default=["gpt1lib", "transformers"],
        choices=IMPLEMENTATIONS,
        help="implementations to time, interleaved (pre-training)",
    )
    p.add_argument("--compile", action="store_true", help="torch.compile every model timed")
    p.add_argument("--no-bf16", action="store_true", help="float32 on CUDA too")
    p.add_argument("--pad-vocab-to", type=int, default=None)
    p.add_argument("--no-memory", action="store_true", help="skip the memory measurement")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads first")
    p.add_argument("--scale", default=None, help="the book scale to record")
    p.add_argument("--out", default=None, help="append the records to this JSON-lines file")
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    cfg = BenchConfig(
        preset=a.preset,
        batch=a.batch,
        seq=a.seq,
        steps=a.steps,
        warmup=a.warmup,
        device=a.device,
        mode=a.mode,
        implementations=tuple(a.impl),
        bf16=not a.no_bf16,
        compile=a.compile,
        pad_vocab_to=a.pad_vocab_to,
        memory=not a.no_memory,
        scale=a.scale,
    )
    results = run_benchmark(cfg)
    print(format_table(results))
    if a.out:
        recs = to_records(results, cfg)
        append_records(a.out, recs)
        print(f"appended {len(recs)} records to {a.out}")
    return results


if __name__ == "__main__":
    main()
