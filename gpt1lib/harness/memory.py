"""Peak memory of one step: the allocator's on CUDA, the resident set's on the CPU; and on CUDA
the time a step keeps the GPU computing (``gpu_busy``).

On CUDA: ``torch.cuda.max_memory_allocated`` during the step, above what was held before it. On
the CPU: the resident set's peak during the step above its size before it, sampled from
``/proc/self/statm`` every millisecond (Linux; elsewhere ``getrusage``'s max RSS, a high-water
mark). A CPU figure is the step's own when it is taken in a fresh process (``in_fresh_process``)
after something small of the same kind has paid for the runtime's own buffers (thread pools,
kernels); at a tiny size it is mostly the allocator's granularity. Both count whatever the step
holds: activations, gradients, the optimiser's state.
"""

from __future__ import annotations

import gc
import pickle
import resource
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import torch

from ..runtime import synchronize


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


def gpu_busy(step: Callable[[], Any], device: torch.device, steps: int = 3) -> float | None:
    """Seconds a ``step()`` keeps the GPU working: the union of its kernels' and copies' time
    spans under ``torch.profiler`` over ``steps`` steps, per step (None off CUDA). Beside the
    step's wall time, the share of it the GPU is busy: a launch-bound step leaves it idle
    between kernels."""
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


#: The fresh process: read (sys.path, pickled (fn, args), threads) from stdin, run, and write
#: the pickled result to stdout (what ``fn`` prints goes to stderr).
_CHILD = """
import pickle, sys
paths, call, threads = pickle.load(sys.stdin.buffer)
sys.path[:] = paths
import torch
torch.set_num_threads(threads)
fn, args = pickle.loads(call)
out, sys.stdout = sys.stdout.buffer, sys.stderr
out.write(pickle.dumps(fn(*args)))
out.flush()
"""


def in_fresh_process(fn: Callable, *args: Any) -> Any:
    """``fn(*args)`` in a new Python interpreter (nothing of this process's memory comes along)
    with this one's ``sys.path`` and thread count; ``fn`` must be importable by name, its
    arguments and result picklable."""
    call = pickle.dumps((fn, args))
    stdin = pickle.dumps((sys.path, call, torch.get_num_threads()))
    cmd = [sys.executable, "-c", _CHILD]
    run = subprocess.run(cmd, input=stdin, capture_output=True, timeout=3600)
    if run.returncode != 0:
        err = run.stderr.decode(errors="replace")[-2000:]
        raise RuntimeError(f"{fn.__qualname__} failed in a fresh process:\n{err}")
    return pickle.loads(run.stdout)
