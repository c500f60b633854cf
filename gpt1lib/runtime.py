"""Where and how a run runs: the seed, the device and its precision, and how it reports its
progress (a live bar or one line per run: ``show_progress_bars``).
"""

from __future__ import annotations

import contextlib
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
    """Whether a loop shows a live progress bar (True) or one line when it ends (False).

    ``GPT1_PROGRESS`` decides where it is set: ``1`` bars, ``0`` one line per run. Otherwise:
    in a notebook, bars when the notebook is live, that is when its front end can answer
    ``input()`` (JupyterLab, VS Code, Colab), and lines when it is executed unattended
    (``make book``, nbmake, papermill: nbclient runs its cells with no input to give); outside a
    notebook, bars when standard error is a terminal, lines in a log file.
    """
    value = os.environ.get("GPT1_PROGRESS", "").strip().lower()
    if value in _ON | _OFF:
        return value in _ON
    if value:
        raise ValueError(f"GPT1_PROGRESS={value!r}: use 1 (progress bars) or 0 (one line a run)")
    kernel = _kernel()
    if kernel is not None:
        return bool(getattr(kernel, "_allow_stdin", True))
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


def _tqdm():
    """tqdm's notebook widget where ipywidgets is installed in a notebook, else its text bar
    (never ``tqdm.auto``'s warning about a missing widget)."""
    if _kernel() is not None:
        try:
            import ipywidgets  # noqa: F401
            from tqdm.notebook import tqdm

            return tqdm
        except ImportError:
            pass
    from tqdm.std import tqdm

    return tqdm


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
    """A progress bar's stand-in that prints one line when it is closed: what ran, how far,
    how long, and its last postfix (``pretrain: 80/80 updates in 4.1 s; loss 5.21``). It
    takes the calls the loops make on a tqdm bar."""

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

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_description(self, desc: str) -> None:
        self.desc = desc

    def set_postfix(self, **kw) -> None:
        self.postfix = kw

    def line(self) -> str:
        """The one line this run reports."""
        units = self.unit if self.unit.endswith("s") else f"{self.unit}s"
        done = f"{self.n}/{self.total}" if self.total is not None else f"{self.n}"
        text = f"{self.desc}: {done} {units} in {duration(time.perf_counter() - self.t0)}"
        if self.initial:
            text += f" (resumed at {self.initial})"
        if self.postfix:
            text += "; " + ", ".join(f"{k} {v}" for k, v in self.postfix.items())
        return text

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            say(self.line(), self.file)


class _Silent(RunLine):
    def close(self) -> None:
        self.closed = True


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
        return _Silent(iterable, total, desc, unit, initial)
    if not show_progress_bars():
        return RunLine(iterable, total, desc, unit, initial)
    bar = _tqdm()
    return bar(iterable, total=total, desc=desc or None, unit=unit, initial=initial)


# ---------------------------------------------------------------- timing


def timed(step: Callable[[], object], device: torch.device | str = "cpu") -> tuple[float, float]:
    """Run ``step`` once; its wall and CPU seconds, the device synchronised before and after
    (a GPU runs asynchronously: unsynchronised, a step would time its launches alone)."""
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
    """Show warnings of ``category`` (and its subclasses) as one line, ``data check: <message>``,
    without the file and line of the code that raised them (a page or a log would otherwise show
    this machine's path to gpt1lib). Other warnings are shown as before."""
    shown = warnings.showwarning
    if getattr(shown, "_gpt1lib_categories", None) is not None:
        shown._gpt1lib_categories.add(category)
        return

    def showwarning(message, cat, filename, lineno, file=None, line=None):
        if issubclass(cat, tuple(showwarning._gpt1lib_categories)):
            try:
                say(f"data check: {message}", file or sys.stderr)
            except OSError:  # no stream to write to
                pass
        else:
            shown(message, cat, filename, lineno, file, line)

    showwarning._gpt1lib_categories = {category}
    warnings.showwarning = showwarning


def each_fitting(
    parts: Iterable[list[int]], run: Callable[[list[int]], None], alone: Callable
) -> int:
    """``run`` on each list of indices of ``parts`` (a batch); one that runs out of GPU memory
    is split in two and each half run, as often as it takes. An index that does not fit alone
    is a ``RuntimeError`` whose message is ``alone(index)`` (what to change). Returns how many
    times a batch was split (a record says so)."""
    todo, splits = list(parts), 0
    while todo:
        part = todo.pop(0)
        try:
            run(part)
        except torch.cuda.OutOfMemoryError as e:
            if len(part) == 1:
                raise RuntimeError(alone(part[0])) from e
            torch.cuda.empty_cache()
            todo[:0] = [part[: len(part) // 2], part[len(part) // 2 :]]
            splits += 1
    return splits


_GATHERING = [0]  # gathered_warnings blocks open: an inner one leaves its warnings to the outer


@contextlib.contextmanager
def gathered_warnings(category: type[Warning]):
    """Within the block, warnings of ``category`` are kept and then shown as one line per
    subject (a data check's first word is its task: "race dev: 3 of 8 examples truncated ..."),
    each distinct message once: an experiment of many runs on one task repeats them. Other
    warnings are shown as they come. A block inside another gathers nothing of its own: the
    outer one shows its warnings with the rest (Table 5's arms: one line per task, not per arm).
    """
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
        sys.stdout.write(f"{head}: " + "; ".join(messages) + "\n")
        sys.stdout.flush()


@dataclass(frozen=True)
class Precision:
    """How a loop computes on its device: float32, or autocast to ``dtype`` (float16 with loss
    scaling, since its narrow range lets small gradients underflow to 0)."""

    dtype: torch.dtype | None  # the autocast dtype; None: float32 throughout
    name: str

    @property
    def loss_scaling(self) -> bool:
        return self.dtype == torch.float16

    def autocast(self, device_type: str):
        """The context a forward pass runs in (a no-op for float32)."""
        return torch.autocast(device_type, self.dtype or torch.bfloat16, enabled=bool(self.dtype))

    def scaler(self, device: torch.device) -> torch.amp.GradScaler | None:
        """A ``GradScaler`` for float16, else None (bf16 and float32 need no loss scaling)."""
        return torch.amp.GradScaler(device.type) if self.loss_scaling else None


FLOAT32 = Precision(None, "float32")


def pick_precision(device: torch.device | str, mixed: bool = True) -> Precision:
    """The precision of a run on ``device``: float32 on a CPU or with ``mixed=False``; on a GPU
    bf16 autocast where it computes bf16 natively (compute capability 8.0 and up: A100, H100,
    L4, RTX 30xx), else float16 autocast with loss scaling (the T4 and V100, compute capability
    7.x, have no bf16 units; ``torch.cuda.is_bf16_supported()`` answers True there by default
    because it counts emulation, which runs slower than float32)."""
    device = torch.device(device)
    if not mixed or device.type != "cuda":
        return FLOAT32
    if torch.cuda.get_device_capability(device)[0] >= 8:
        return Precision(torch.bfloat16, "bf16 autocast")
    return Precision(torch.float16, "float16 autocast with loss scaling")


# ---------------------------------------------------------------- shapes on a GPU

#: What a GPU's fine-tuning and scoring loops round sequence lengths up to: with few distinct
#: shapes a kernel's set-up for a new shape is paid a few times, not once a batch.
GPU_PAD_MULTIPLE = 64


def capturing() -> bool:
    """Whether a CUDA graph is being captured on the current stream (``steps``): a capture
    cannot wait for the GPU, nor take a shape from the data."""
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def pad_multiple(device: torch.device | str, asked: int | None = None) -> int:
    """The multiple a batch's length is rounded up to: ``asked``, else ``GPU_PAD_MULTIPLE`` on
    CUDA and 1 elsewhere (on a CPU every padded token is paid for in full)."""
    if asked is not None:
        return asked
    return GPU_PAD_MULTIPLE if torch.device(device).type == "cuda" else 1


def attention_backends(device: torch.device | str):
    """The context a fine-tuning or scoring loop runs in: on CUDA, PyTorch's attention kept to
    the flash and memory-efficient kernels, which have no per-shape set-up (cuDNN's is paid
    again for each new length); elsewhere nothing changes."""
    if torch.device(device).type != "cuda":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION])


def attention_name(device: torch.device | str) -> str:
    """The attention ``attention_backends`` runs on ``device``, as the records name it."""
    cuda = torch.device(device).type == "cuda"
    return "sdpa: flash or memory-efficient" if cuda else "sdpa: default (CPU)"
