"""Where and how a run runs: the seed, the device and its precision, and how it reports its
progress (a live bar or one line per run: ``show_progress_bars``).
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import re
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

_ON, _OFF = {"1", "true", "yes", "on", "bars"}, {"0", "false", "no", "off", "lines"}


def seed_everything(seed: int) -> torch.Generator:
    """Seed python, numpy and torch (all devices); returns a torch generator with that seed."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def pick_device(device: str | None = None) -> torch.device:
    """``device`` if given, else CUDA where available, else the CPU."""
    if device:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def synchronize(device: torch.device) -> None:
    """Wait for the work queued on ``device`` (CUDA runs asynchronously; the CPU does not)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ---------------------------------------------------------------- progress


def _kernel():
    """The IPython kernel this code runs in, or None (a plain interpreter, a terminal IPython)."""
    shell = sys.modules.get("IPython")
    shell = shell.get_ipython() if shell is not None and hasattr(shell, "get_ipython") else None
    return getattr(shell, "kernel", None)


def show_progress_bars() -> bool:
    """Whether a loop shows a live progress bar (True) or one line when it ends (False):
    ``GPT1_PROGRESS`` (1 or 0) where set; else in a notebook bars when its front end can answer
    ``input()`` (a live one, not nbclient's unattended run), and elsewhere when standard error
    is a terminal."""
    value = os.environ.get("GPT1_PROGRESS", "").strip().lower()
    if value in _ON | _OFF:
        return value in _ON
    if value:
        raise ValueError(f"GPT1_PROGRESS={value!r}: use 1 (progress bars) or 0 (one line a run)")
    kernel = _kernel()
    if kernel is not None:
        return bool(getattr(kernel, "_allow_stdin", True))
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


def duration(seconds: float) -> str:
    """A readable duration: ``4.2 s``, ``3 min 05 s``, ``2 h 07 min``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, sec = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {sec:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def say(text: str, file=None) -> None:
    """``text`` and its newline in one write (``print`` makes two, and a notebook's output may
    be flushed between them: an empty output box on the page)."""
    out = file or sys.stdout
    out.write(f"{text}\n")
    out.flush()


class RunLine:
    """A tqdm bar's stand-in that prints one line when closed: what ran, how far, how long,
    and its last postfix (``pretrain: 80/80 updates in 4.1 s; loss 5.21``)."""

    def __init__(self, iterable=None, total=None, desc="", unit="it", initial=0, file=None):
        self.iterable, self.total, self.desc, self.unit = iterable, total, desc, unit
        self.n = self.initial = initial
        self.postfix: dict[str, object] = {}
        self.file = file
        self.t0 = time.perf_counter()
        self.closed = False
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            self.total = len(iterable)

    def __iter__(self) -> Iterator:
        for item in self.iterable:
            yield item
            self.update(1)
        self.close()

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix(self, **kw) -> None:
        self.postfix = kw

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        units = self.unit if self.unit.endswith("s") else f"{self.unit}s"
        done = f"{self.n}/{self.total}" if self.total is not None else f"{self.n}"
        text = f"{self.desc}: {done} {units} in {duration(time.perf_counter() - self.t0)}"
        if self.initial:
            text += f" (resumed at {self.initial})"
        if self.postfix:
            text += "; " + ", ".join(f"{k} {v}" for k, v in self.postfix.items())
        say(text, self.file)


def progress_bar(
    iterable: Iterable | None = None,
    *,
    total: int | None = None,
    desc: str = "",
    unit: str = "it",
    initial: int = 0,
    enabled: bool = True,
):
    """A progress bar for a loop (``show_progress_bars``: a live tqdm bar, or a ``RunLine``
    that prints one line at its end); nothing at all where ``enabled`` is False. Use it as
    tqdm: iterate over it, or ``update``, ``set_postfix`` and ``close`` it."""
    if not enabled:
        return RunLine(iterable, total, desc, unit, initial, file=io.StringIO())  # unread
    if not show_progress_bars():
        return RunLine(iterable, total, desc, unit, initial)
    from tqdm.std import tqdm

    if _kernel() is not None:  # the widget where ipywidgets is (tqdm.auto warns where not)
        with contextlib.suppress(ImportError):
            import ipywidgets  # noqa: F401
            from tqdm.notebook import tqdm
    return tqdm(iterable, total=total, desc=desc or None, unit=unit, initial=initial)


# ---------------------------------------------------------------- timing


def timed(step: Callable[[], object], device: torch.device | str = "cpu") -> tuple[float, float]:
    """Run ``step`` once; its wall and CPU seconds, the device synchronised before and after."""
    synchronize(device)
    t0, c0 = time.perf_counter(), time.process_time()
    step()
    synchronize(device)
    return time.perf_counter() - t0, time.process_time() - c0


# ---------------------------------------------------------------- many processes


@dataclass(frozen=True)
class Dist:
    """This process's place in a ``torchrun`` job (rank 0 of 1 without one)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0


def init_distributed(device: torch.device | None = None) -> Dist:
    """Join the process group ``torchrun`` set up (NCCL on GPUs, gloo on CPUs), if any."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return Dist()
    proc = Dist(
        int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", 0))
    )
    if not dist.is_initialized():
        cuda = torch.cuda.is_available() and (device is None or device.type == "cuda")
        if cuda:
            torch.cuda.set_device(proc.local_rank)
        dist.init_process_group("nccl" if cuda else "gloo")
    return proc


# ---------------------------------------------------------------- data warnings


def show_data_warnings_in_one_line(category: type[Warning]) -> None:
    """Show warnings of ``category`` as one line, ``data check: <message>``, without the path
    of the code that raised them; other warnings as before."""
    shown = warnings.showwarning
    if getattr(shown, "one_line", None) is category:  # already so (gpt1lib imported again)
        return

    def showwarning(message, cat, filename, lineno, file=None, line=None):
        if not issubclass(cat, category):
            return shown(message, cat, filename, lineno, file, line)
        try:
            say(f"data check: {message}", file or sys.stderr)
        except OSError:  # no stream to write to
            pass

    showwarning.one_line = category
    warnings.showwarning = showwarning


def fitting(items: list, run: Callable[[list[list]], None], alone: Callable, split=1) -> int:
    """``run`` on ``items`` cut into ``split`` parts; where the GPU runs out of memory, again in
    twice as many (at most one item each), and where one item alone does not fit a
    ``RuntimeError`` whose message is ``alone(items)`` (what to change). Returns the split that
    ran."""
    while True:
        m = -(-len(items) // split)  # items a part
        try:
            run([items[i : i + m] for i in range(0, len(items), m)])
            return split
        except torch.cuda.OutOfMemoryError as e:
            if split >= len(items):
                raise RuntimeError(alone(items)) from e
            torch.cuda.empty_cache()
            split = min(split * 2, len(items))


_GATHERING = [0]  # gathered_warnings blocks open: an inner one leaves its warnings to the outer


@contextlib.contextmanager
def gathered_warnings(category: type[Warning]):
    """Within the block, warnings of ``category`` are kept, then shown as one line per subject
    (a data check's first word is its task: "race dev: 3 of 8 examples truncated ..."), each
    distinct message once. A block inside another leaves its warnings to the outer one."""
    if _GATHERING[0]:
        yield
        return
    _GATHERING[0] += 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", category)
        try:
            yield
        finally:
            _GATHERING[0] -= 1
            kept: dict[str, dict[str, None]] = {}
            for w in caught:
                if issubclass(w.category, category):
                    subject, _, rest = str(w.message).partition(" ")
                    if not re.match(r"\w+: ", rest):  # not "<task> <split>: ...": no subject
                        subject, rest = "", str(w.message)
                    kept.setdefault(subject, {})[rest] = None
    for w in caught:
        if not issubclass(w.category, category):
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    for subject, messages in kept.items():
        head = f"data checks, {subject}" if subject else "data checks"
        say(f"{head}: " + "; ".join(messages))


@dataclass(frozen=True)
class Precision:
    """How a loop computes: float32, or autocast to ``dtype`` (float16 with loss scaling: its
    narrow range lets small gradients underflow to 0)."""

    dtype: torch.dtype | None  # the autocast dtype; None: float32 throughout
    name: str

    @property
    def loss_scaling(self) -> bool:
        return self.dtype == torch.float16

    def autocast(self, device_type: str):
        """The context a forward pass runs in (a no-op for float32)."""
        return torch.autocast(device_type, self.dtype or torch.bfloat16, enabled=bool(self.dtype))

    def scaler(self, device: torch.device) -> torch.amp.GradScaler | None:
        """A ``GradScaler`` for float16, else None."""
        return torch.amp.GradScaler(device.type) if self.loss_scaling else None


FLOAT32 = Precision(None, "float32")


def pick_precision(device: torch.device | str, mixed: bool = True) -> Precision:
    """float32 on a CPU or with ``mixed=False``; on a GPU bf16 autocast from compute capability
    8.0 (A100, H100, L4), else float16 with loss scaling (the T4 and V100 have no bf16 units;
    ``torch.cuda.is_bf16_supported()`` says True there, counting a slow emulation)."""
    device = torch.device(device)
    if not mixed or device.type != "cuda":
        return FLOAT32
    if torch.cuda.get_device_capability(device)[0] >= 8:
        return Precision(torch.bfloat16, "bf16 autocast")
    return Precision(torch.float16, "float16 autocast with loss scaling")


# ---------------------------------------------------------------- shapes on a GPU

#: What a GPU's fine-tuning and scoring loops round lengths up to: few shapes, few kernel set-ups.
GPU_PAD_MULTIPLE = 64


def capturing() -> bool:
    """Whether a CUDA graph is being captured (``steps``): it cannot wait for the GPU."""
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def pad_multiple(device: torch.device | str, asked: int | None = None) -> int:
    """``asked``, else ``GPU_PAD_MULTIPLE`` on CUDA and 1 elsewhere (a CPU pays every pad)."""
    if asked is not None:
        return asked
    return GPU_PAD_MULTIPLE if torch.device(device).type == "cuda" else 1


def attention_backends(device: torch.device | str):
    """On CUDA, attention kept to the flash and memory-efficient kernels, which have no
    per-shape set-up (cuDNN's is paid for each new length); elsewhere nothing changes."""
    if torch.device(device).type != "cuda":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION])


def attention_name(device: torch.device | str) -> str:
    """The attention ``attention_backends`` runs on ``device``, as the records name it."""
    cuda = torch.device(device).type == "cuda"
    return "sdpa: flash or memory-efficient" if cuda else "sdpa: default (CPU)"
