"""Speed: GPT-1's training steps timed against transformers' OpenAIGPT in the same run, the
contenders' steps INTERLEAVED after warm-up so both see the same machine; each figure is the
median over the timed steps. ``python -m gpt1lib.harness.bench --preset small --seq 128``.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
from collections.abc import Sequence
from dataclasses import replace
from importlib.util import find_spec
from typing import Any

import pandas as pd
import torch

from ..flops import measured_matmul_tflops, mfu, model_flops_per_token, peak_tflops
from ..model import PRESETS, preset
from ..records import append_records, make_record, provenance
from ..runtime import pick_device, synchronize, timed
from ..scales import SCALES
from . import command_line
from .contenders import IMPLEMENTATIONS, MODELS, MODES, BenchConfig, Contender, contenders
from .memory import gpu_busy, method, peak_memory

#: The headline ratio's contender: the library's default (embedding dropout on the matrix).
HEADLINE = "gpt1lib:matrix"


def _time_interleaved(contenders: Sequence[Contender], cfg: BenchConfig, device) -> float:
    """Time one step of each, ``steps`` rounds after warm-up; returns the CPU's best float32
    matmul TFLOP/s timed between rounds (its peak), else 0."""
    for c in contenders:
        for _ in range(cfg.warmup):
            c.step()
    synchronize(device)
    best = 0.0
    for _ in range(cfg.steps):
        for c in contenders:
            wall, cpu = timed(c.step, device)
            c.times.append(wall)
            c.cpu_times.append(cpu)
        if device.type == "cpu":
            best = max(best, measured_matmul_tflops(device, repeats=2))
    return best


def _checked(cfg: BenchConfig) -> BenchConfig:
    """``cfg`` with preset, seq, device and padding resolved; an error for what cannot run."""
    if cfg.scale not in (None, *SCALES):
        raise ValueError(f"scale={cfg.scale!r}: choose one of {tuple(SCALES)}")
    name = cfg.preset or (cfg.scale and SCALES[cfg.scale].model) or "tiny"
    if name in SCALES and name not in PRESETS:  # a scale's name stands for its model
        cfg, name = replace(cfg, scale=cfg.scale or name), SCALES[name].model
    if name not in PRESETS:
        raise ValueError(f"preset={name!r}: choose one of {MODELS}")
    if cfg.mode not in MODES:
        raise ValueError(f"mode={cfg.mode!r}: choose pretrain, finetune or both")
    unknown = [i for i in cfg.implementations if i not in IMPLEMENTATIONS]
    if unknown:
        raise ValueError(f"unknown implementations {unknown}; choose from {IMPLEMENTATIONS}")
    device = pick_device(cfg.device)
    # the scale's (batch, seq, steps) on this device where not given
    default = (SCALES[cfg.scale].bench if cfg.scale else {}).get(device.type, (4, None, 5))
    asked = (cfg.batch, cfg.seq, cfg.steps)
    batch, seq, steps = (a if a is not None else d for a, d in zip(asked, default, strict=True))
    cfg = replace(cfg, batch=batch, seq=seq, steps=steps)
    if min(cfg.steps, cfg.warmup, cfg.batch) < 1:
        raise ValueError(f"steps={cfg.steps}, warmup={cfg.warmup}, batch={cfg.batch}: each >= 1")
    n_ctx = PRESETS[name].n_ctx
    if not 1 <= (cfg.seq or n_ctx) <= n_ctx:
        raise ValueError(f"seq={cfg.seq} must be between 1 and the {name} context {n_ctx}")
    pad = cfg.pad_vocab_to or (64 if device.type == "cuda" else 1)
    return replace(cfg, preset=name, seq=cfg.seq or n_ctx, device=str(device), pad_vocab_to=pad)


def _row(c: Contender, cfg: BenchConfig, run: dict[str, Any]) -> dict[str, Any]:
    t = statistics.median(c.times)
    fpt = model_flops_per_token(preset(cfg.preset), cfg.seq) if c.mode == "pretrain" else None
    return {
        "mode": c.mode,
        "implementation": c.config["implementation"],
        "variant": c.name,
        **{k: getattr(cfg, k) for k in ("preset", "batch", "scale", "seed", "compile")},
        "seq": c.seq,
        "step_time_s": t,
        "cpu_time_s": statistics.median(c.cpu_times) if run["threads"] else None,
        "tokens_per_s": c.tokens / t,
        "examples_per_s": c.examples / t if c.examples else None,
        "flops_per_token": fpt,
        "mfu": mfu(fpt, c.tokens / t, run["peak_tflops"]) if fpt else None,
        "peak_mem_mb": c.peak_mem_mb,
        "gpu_busy_s": c.busy_s,
        "gpu_busy_share": c.busy_s / t if c.busy_s is not None else None,
        "step_times_s": list(c.times),
        "config": c.config,
        **run,
    }


def _compare(rows: list[dict[str, Any]]) -> None:
    """Set each row's ratio to its reference: transformers, or padding to the context."""
    for mode, ref_name, label in (
        ("pretrain", "transformers", "transformers"),
        ("finetune", "finetune:context", "padding to the context"),
    ):
        ref = next((r for r in rows if r["variant"] == ref_name), None)
        for r in (r for r in rows if r["mode"] == mode):
            r["reference"] = label if ref else None
            r["vs_reference"] = ref["step_time_s"] / r["step_time_s"] if ref else None
            cpu_ok = ref and r["cpu_time_s"]
            r["vs_reference_cpu"] = ref["cpu_time_s"] / r["cpu_time_s"] if cpu_ok else None


def run_benchmark(cfg: BenchConfig | None = None, **overrides: Any) -> list[dict[str, Any]]:
    """One result (``_row``) per contender, vs_reference its speed over the reference's."""
    cfg = _checked(replace(cfg or BenchConfig(), **overrides))
    device = pick_device(cfg.device)
    cpu = device.type == "cpu"
    if not cpu:
        torch.backends.cuda.matmul.allow_tf32 = True  # float32 leftovers on tensor cores
        torch.backends.cudnn.allow_tf32 = True
    peak, peak_src = peak_tflops(device)
    if cpu:
        peak_src += ", the best of those timed before and between the rounds of steps"
    timed: list[Contender] = []
    for mode in ("pretrain", "finetune") if cfg.mode == "both" else (cfg.mode,):
        these = contenders(cfg, mode, device)
        for c in these if cfg.memory else ():
            c.peak_mem_mb = peak_memory(c, cfg, device)
        peak = max(peak, _time_interleaved(these, cfg, device))
        timed += these
        for c in these:
            c.busy_s, c.step = gpu_busy(c.step, device), None
    run = {
        "dtype": "bf16 autocast" if cfg.bf16 and not cpu else "float32",
        **provenance(device),
        "threads": torch.get_num_threads() if cpu else None,
        "peak_tflops": peak,
        "peak_source": peak_src,
        "mem_method": method(device) if cfg.memory else "not measured",
    }
    rows = [_row(c, cfg, run) for c in timed]
    _compare(rows)
    return rows


def speed_run(
    S, device, *, batch=None, seq=None, steps=None, compile: bool | None = None, log=print
) -> list[dict]:
    """The appendix's speed run: ``S.bench_preset`` on a GPU (the scale's on a CPU), and with
    ``compile`` (None: on CUDA) pre-training compiled as well."""
    cuda = torch.device(device).type == "cuda"
    impl = ("gpt1lib", "gpt1lib:matrix", "transformers")[: 3 if find_spec("transformers") else 2]
    cfg = BenchConfig(
        scale=S.bench_preset if cuda else S.name,
        implementations=impl,
        mode="both",
        memory=cuda,
        device=str(device),
        batch=batch,
        seq=seq,
        steps=steps,
    )
    runs = [cfg]
    if cuda if compile is None else compile:
        both = ("gpt1lib:matrix", "gpt1lib:plain", *impl[2:])
        runs.append(replace(cfg, compile=True, mode="pretrain", implementations=both))
    results = []
    for c in runs:
        got = run_benchmark(c)
        for r in got:
            path = r["config"].get("loss") or r["config"].get("attention")
            log(
                f"  bench {r['variant']:20s} compile={c.compile}: {r['tokens_per_s']:,.0f} "
                f"tok/s ({path})"
            )
        results += got
    return results


def run_repeats(cfg: BenchConfig, repeats: int, **overrides: Any) -> list[list[dict[str, Any]]]:
    if repeats < 1:
        raise ValueError(f"repeats={repeats}: run at least once")
    return [[r | {"repeat": i} for r in run_benchmark(cfg, **overrides)] for i in range(repeats)]


def spread(runs: Sequence[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per variant over the repeats: the median, min and max of tokens/s and vs_reference."""
    out = []
    for variant in dict.fromkeys(r["variant"] for run in runs for r in run):
        rows = [r for run in runs for r in run if r["variant"] == variant]
        row = {"variant": variant, "repeats": len(rows), "reference": rows[0]["reference"]}
        for key in ("tokens_per_s", "vs_reference"):
            values = [r[key] for r in rows if r[key] is not None]
            if values:
                row[f"{key}_median"] = statistics.median(values)
                row[f"{key}_min"], row[f"{key}_max"] = min(values), max(values)
        out.append(row)
    return out


def _range(r: dict, key: str, fmt: str) -> str:
    if f"{key}_median" not in r:
        return "-"
    lo, mid, hi = (format(r[f"{key}_{k}"], fmt) for k in ("min", "median", "max"))
    return f"{mid} ({lo}-{hi})"


def format_spread(stats: Sequence[dict[str, Any]]) -> str:
    cells = {
        "variant": [r["variant"] for r in stats],
        "runs": [r["repeats"] for r in stats],
        "tokens/s: median (min-max)": [_range(r, "tokens_per_s", ",.0f") for r in stats],
        "vs ref.": [_range(r, "vs_reference", ".2f") for r in stats],
    }
    text = pd.DataFrame(cells).to_string(index=False)
    head = next((r for r in stats if r["variant"] == HEADLINE and "vs_reference_median" in r), None)
    if head:
        text += (
            f"\nheadline: {HEADLINE}, the library's default config (embedding dropout on the "
            "matrix), vs transformers, both on the same AdamW and train_step: "
            f"{_range(head, 'vs_reference', '.2f')}x over {head['repeats']} runs"
        )
    return text


#: The result fields that become records, and those that go into their config.
METRICS = (
    "step_time_s cpu_time_s tokens_per_s examples_per_s mfu peak_mem_mb gpu_busy_s gpu_busy_share"
).split()
_CONFIG = (
    "preset batch seq mode dtype threads compile step_times_s peak_tflops peak_source "
    "flops_per_token mem_method reference"
).split()


def to_records(results: Sequence[dict[str, Any]]) -> list[dict]:
    recs = []
    for r in results:
        config = r["config"] | {k: r[k] for k in _CONFIG} | {"steps": len(r["step_times_s"])}
        if "repeat" in r:
            config["repeat"] = r["repeat"]
        values = {m: r[m] for m in METRICS}
        ref = "transformers" if r["reference"] == "transformers" else "padding_to_context"
        values["speedup_vs_" + ref] = r["vs_reference"]
        fields = {
            **{k: r[k] for k in ("scale", "seed", "commit", "device", "date")},
            "experiment": "bench",
            "task": "lm" if r["mode"] == "pretrain" else f"{r['config']['lengths']}_lengths",
            "split": "train",
            "config": config,
            "data": "synthetic random tokens",
            "wall_time": sum(r["step_times_s"]),
        }
        recs += [make_record(m, v, **fields) for m, v in values.items() if v is not None]
    return recs


def bench_records(records) -> pd.DataFrame:
    """The bench records among ``records``, their config's keys as columns, and ``run``."""
    kept = records[records.experiment == "bench"].copy() if "experiment" in records else records
    if kept.empty:
        return kept
    for key in ("variant", "preset", "batch", "seq", "compile", "loss"):
        kept[key] = [c.get(key, False) for c in kept.config]
    kept["device"] = kept.device.str.split(" [(]").str[0]
    kept["run"] = [
        f"{r.preset} · b{r.batch} × {r.seq:g} · {r.device}{' · compiled' if r.compile else ''}"
        f" · commit {str(r.commit)[:7]}"
        for r in kept.itertuples()
    ]
    return kept


def recorded_mfu(records, device: str = "H100") -> tuple[float, str] | None:
    """``HEADLINE``'s MFU at the paper's preset on ``device`` in the newest recorded run, and
    that run; None where none has it."""
    kept = bench_records(records)
    if kept.empty:
        return None
    mine = kept[(kept.variant == HEADLINE) & (kept.preset == "paper") & (kept.metric == "mfu")]
    mine = mine[mine.device.str.contains(device)]
    if mine.empty:
        return None
    best = mine.sort_values(["date", "compile"]).iloc[-1]
    return float(best.value), best.run


#: The table's columns and how each is printed ("{}": as text).
_COLUMNS = {
    "mode": "{}", "variant": "{}", "preset": "{}", "batch": "{}", "seq": "{:.0f}", "dtype": "{}",
    "step_time_s": "{:.3f}", "cpu_time_s": "{:.3f}", "tokens_per_s": "{:,.0f}",
    "examples_per_s": "{:,.1f}", "mfu": "{:.1%}", "peak_mem_mb": "{:,.0f}",
    "vs_reference": "{:.2f}x", "vs_reference_cpu": "{:.2f}x", "gpu_busy_share": "{:.0%}",
    "reference": "{}",
}  # fmt: skip


def format_table(results: Sequence[dict[str, Any]]) -> str:
    cells = [
        {k: "-" if r.get(k) is None else f.format(r[k]) for k, f in _COLUMNS.items()}
        for r in results
    ]
    text = pd.DataFrame(cells, columns=list(_COLUMNS)).to_string(index=False)
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
    p = command_line("gpt1lib.harness.bench", __doc__)
    p.epilog = BenchConfig.__doc__  # what None stands for
    for f in dataclasses.fields(BenchConfig):
        if f.metadata:
            kw = {"default": f.default, **f.metadata}
            if f.type == "bool":
                kw["action"] = argparse.BooleanOptionalAction
            elif f.type.startswith("int"):
                kw["type"] = int
            elif f.type.startswith("tuple"):
                kw["nargs"] = "+"
            flags = ("--" + f.name.replace("_", "-"), *kw.pop("flags", ()))
            p.add_argument(*flags, **kw)
    p.add_argument(
        "--repeats", type=int, default=1, help="whole runs, each with fresh models: their spread"
    )
    p.add_argument("--threads", type=int, help="torch.set_num_threads first (None: torch's)")
    p.add_argument("--out", help="append the records to this JSON-lines file")
    a = vars(p.parse_args(argv))
    threads, out, repeats = a.pop("threads"), a.pop("out"), a.pop("repeats")
    if threads:
        torch.set_num_threads(threads)
    runs = run_repeats(BenchConfig(**a | {"implementations": tuple(a["implementations"])}), repeats)
    results = [r for run in runs for r in run]
    print(format_table(results))
    print(format_spread(spread(runs)))
    if out:
        recs = to_records(results)
        append_records(out, recs)
        print(f"appended {len(recs)} records to {out}")
    return results


if __name__ == "__main__":
    main()
