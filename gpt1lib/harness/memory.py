"""A step's peak memory (``peak_growth``), and on CUDA the time a step keeps the GPU computing.

On the CPU the peak is the resident set's above its size before, sampled every millisecond, in
a fresh process after a tiny model of the same kind has paid for the runtime's own buffers.
"""

from __future__ import annotations

import gc
import resource
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from multiprocessing import get_context
from typing import Any

import torch

from ..runtime import synchronize
from .contenders import BenchConfig, Contender, contenders


def rss_bytes() -> int | None:
    """The process's resident set now, from /proc (Linux); None elsewhere."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize()
    except OSError:
        return None


def method(device: torch.device) -> str:
    """How ``peak_growth`` measures on ``device``, for the records."""
    if device.type == "cuda":
        return "torch.cuda.max_memory_allocated during a step, above what was held before it"
    how = "sampled from /proc/self/statm" if rss_bytes() else "getrusage max RSS"
    return f"resident-set growth during the first step ({how}), one fresh process per model"


def peak_growth(step: Callable[[], Any], device: torch.device) -> float:
    """The memory's peak during ``step()`` above its level before, in MB."""
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        step()
        synchronize(device)
        return (torch.cuda.max_memory_allocated(device) - before) / 2**20
    gc.collect()
    before = rss_bytes()
    if before is None:  # ru_maxrss is in kilobytes on Linux, bytes on macOS
        unit = 1 if sys.platform == "darwin" else 1024
        hwm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        step()
        return max(0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - hwm) * unit / 2**20
    peak, done = [before], threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss_bytes())
            done.wait(0.001)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        step()
    finally:
        done.set()
        watcher.join()
    return max(0, max(peak[0], rss_bytes()) - before) / 2**20


def probe(cfg: BenchConfig, mode: str, name: str, threads: int) -> float:
    """In a fresh process: ``name``'s first step's peak memory growth on the CPU, in MB."""
    torch.set_num_threads(threads)
    cfg, cpu = replace(cfg, implementations=(name,)), torch.device("cpu")
    warm = replace(cfg, preset="tiny", batch=1, seq=8, steps=1)
    next(c for c in contenders(warm, mode, cpu) if c.name == name).step()
    return peak_growth(next(c for c in contenders(cfg, mode, cpu) if c.name == name).step, cpu)


def peak_memory(c: Contender, cfg: BenchConfig, device: torch.device) -> float:
    if device.type == "cuda":
        return peak_growth(c.step, device)
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as fresh:
        return fresh.submit(probe, cfg, c.mode, c.name, torch.get_num_threads()).result()


def gpu_busy(step: Callable[[], Any], device: torch.device, steps: int = 3) -> float | None:
    """Seconds a ``step()`` keeps the GPU working (None off CUDA): the union of its kernels'
    time spans under ``torch.profiler``, the mean over ``steps`` steps."""
    if device.type != "cuda":
        return None
    from torch.profiler import ProfilerActivity, profile

    synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        synchronize(device)
    cuda = torch.autograd.DeviceType.CUDA
    spans = sorted(
        (e.time_range.start, e.time_range.end) for e in prof.events() if e.device_type == cuda
    )
    busy, end = 0.0, float("-inf")
    for a, b in spans:  # the union: spans that overlap count once
        busy += max(0.0, b - max(a, end))
        end = max(end, b)
    return busy / 1e6 / steps
