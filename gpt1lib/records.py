"""Records: every number the book shows, with where it came from.

A record is one measured value (a loss at a step, a dev accuracy, a throughput) plus its
provenance (``FIELDS``), appended to JSON-lines files, one object a line; tables and figures are
drawn from them. A line that is not a record (cut short, or edited) is left out with a warning
naming the file and the line, never an error.

Beside a final evaluation's metrics, one more record (``per_example_record``) keeps what an
interval needs: each example's prediction and gold label, in order, and a fingerprint of the
examples' ids, so that two arms scored on the same examples can be compared example by example.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import hashlib
import json
import logging
import os
import platform
import socket
import subprocess
import warnings
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from .files import atomic_path, is_running, write_failed

log = logging.getLogger(__name__)

#: The fields every record carries (``None`` where they do not apply).
FIELDS = (
    "experiment",
    "task",
    "split",
    "metric",
    "value",
    "step",
    "scale",
    "seed",
    "config",
    "data",
    "commit",
    "device",
    "date",
    "wall_time",
    "per_example",
)
#: The metric name of the record that holds an evaluation's per-example outcomes.
PER_EXAMPLE = "per_example"


def _git(*args: str) -> str:
    here = Path(__file__).resolve().parent
    return subprocess.run(
        ["git", *args], cwd=here, capture_output=True, text=True, check=True
    ).stdout.strip()


#: What ``git_commit`` calls the checkout's code: everything but ``results/``.
_CODE = ("--", ":(top)", ":(top,exclude)results")


@cache
def git_commit() -> str:
    """The commit of the gpt1lib checkout (``+dirty`` when it has uncommitted changes outside
    ``results/``, which a recorded run writes to as it goes).

    ``$GPT1_COMMIT``, where set, comes first: a copy of the checkout (a GPU machine's) says the
    commit it was made from that way, and its own ``.git``, if any, may be an older one.
    Without either: "unknown"."""
    if os.environ.get("GPT1_COMMIT"):
        return os.environ["GPT1_COMMIT"]
    try:
        sha = _git("rev-parse", "--short=12", "HEAD")
        dirty = _git("status", "--porcelain", "--untracked-files=no", *_CODE)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha + ("+dirty" if dirty else "")


def device_name(device: torch.device | str | None = None) -> str:
    """A readable name of the device a run used: the GPU's name, or the CPU's."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({platform.machine()}, {torch.get_num_threads()} threads, {os.cpu_count()} cores)"


def provenance(device: torch.device | str | None = None) -> dict[str, Any]:
    """The fields that say where and when a number was measured."""
    return {
        "commit": git_commit(),
        "device": device_name(device),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def make_record(metric: str, value: float, **fields: Any) -> dict[str, Any]:
    """A record with every field of ``FIELDS`` (unknown field names are an error)."""
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown record fields {sorted(unknown)}; records have {FIELDS}")
    rec = dict.fromkeys(FIELDS)
    rec.update(fields, metric=metric, value=float(value))
    return rec


def _compact(values) -> list:
    """Numbers as short JSON: integers as integers, others to 4 decimals."""
    out = []
    for v in values:
        v = v.item() if hasattr(v, "item") else v
        out.append(int(v) if float(v).is_integer() else round(float(v), 4))
    return out


def examples_fingerprint(uids: Iterable[str]) -> str:
    """A short hash of the evaluation examples' ids, in order: two evaluations with the same
    fingerprint scored the same examples in the same order."""
    return hashlib.sha256("\n".join(map(str, uids)).encode()).hexdigest()[:16]


def per_example_record(predictions, labels, uids: Iterable[str], **fields: Any) -> dict[str, Any]:
    """The record of one evaluation's per-example outcomes: value = the number of examples,
    ``per_example`` = {"predictions", "labels" (lists, in the evaluation's order), "examples"
    (``examples_fingerprint`` of their ids)}. ``fields`` as for ``make_record``."""
    predictions, labels = _compact(predictions), _compact(labels)
    if len(predictions) != len(labels):
        raise ValueError(f"{len(predictions)} predictions for {len(labels)} labels")
    outcomes = {
        "predictions": predictions,
        "labels": labels,
        "examples": examples_fingerprint(uids),
    }
    return make_record(PER_EXAMPLE, len(labels), per_example=outcomes, **fields)


def _line(record: dict[str, Any]) -> bytes:
    return (json.dumps(record, default=str) + "\n").encode()


def append_records(path: str | os.PathLike, records: Iterable[dict[str, Any]]) -> Path:
    """Append ``records`` to the JSON-lines file ``path`` (creating folders) in one write of
    whole lines, synced: a kill leaves whole lines (after a torn last line, they start a line
    of their own). A write that fails (a full disk) is undone,
    the file left as it was, and the error names it and the free space there."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"".join(map(_line, records))
    with open(path, "a+b", buffering=0) as f:  # unbuffered: one write, all of it or an error
        size = f.seek(0, os.SEEK_END)
        if data and size:  # after a torn last line, a line of their own
            f.seek(size - 1)
            data = data if f.read(1) == b"\n" else b"\n" + data
        try:
            if f.write(data) != len(data):  # a short write: no room for the rest
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            os.fsync(f.fileno())
        except OSError as e:
            f.truncate(size)
            raise write_failed(path, e) from e
    return path


def _parse(path: Path) -> tuple[list[dict | bytes], bool]:
    """The records of a JSON-lines file, and whether its last line was torn (a write cut short
    by a crash). A line that is not a record is left out with a warning naming the file and
    the line; the lines inside the file are kept, as bytes, for ``keep_records`` to keep."""
    lines = path.read_bytes().split(b"\n")
    rows, torn = [], False
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            if not isinstance(row := json.loads(line), dict):
                raise ValueError(f"a JSON {type(row).__name__}, not an object")
            rows.append(row)
        except ValueError as e:  # not JSON, not UTF-8, or not an object
            torn = n == len(lines)  # no newline after it
            why = "the last line is cut short (a write a crash interrupted)"
            if not torn:
                rows.append(line)
                why = f"not a JSON record ({e}); fix or delete that line"
            warnings.warn(f"{path}, line {n}: {why}; it is left out", stacklevel=3)
    return rows, torn


def load_records(path: str | os.PathLike) -> list[dict]:
    """The records of one JSON-lines file as they were written (none where it is missing); a
    line that is not a record is left out with a warning naming the file and the line."""
    path = Path(path)
    return [r for r in _parse(path)[0] if isinstance(r, dict)] if path.is_file() else []


def read_records(*paths: str | os.PathLike) -> pd.DataFrame:
    """All records in the given files or folders (``*.jsonl`` below them) as a DataFrame."""
    files: list[Path] = []
    for p in map(Path, paths):
        files += sorted(p.rglob("*.jsonl")) if p.is_dir() else [p] if p.is_file() else []
    rows = [row for f in files for row in load_records(f)]
    return pd.DataFrame(rows, columns=list(FIELDS) if not rows else None)


def keep_records(path: str | os.PathLike, keep: Callable[[dict], bool]) -> int:
    """Rewrite the JSON-lines file ``path`` (atomically) with only the records ``keep`` says
    yes to (and any broken line inside it, which a user may mend), a torn last line repaired
    away; returns how many were dropped."""
    path = Path(path)
    if not path.is_file():
        return 0
    rows, torn = _parse(path)
    kept = [r for r in rows if not isinstance(r, dict) or keep(r)]  # and the broken lines
    if len(kept) < len(rows) or torn:
        with atomic_path(path) as tmp:
            tmp.write_bytes(b"".join(_line(r) if isinstance(r, dict) else r + b"\n" for r in kept))
        log.info("%s: %d records dropped, to be logged again", path, len(rows) - len(kept))
    return len(rows) - len(kept)


# ---------------------------------------------------------------- a folder one run writes


@contextlib.contextmanager
def run_lock(folder: str | os.PathLike) -> Iterator[Path]:
    """Hold ``folder`` for this run while the block runs: ``folder/.lock``, made atomically
    (``O_EXCL``), names this process, its host and start time, and goes when the block ends,
    also on an error. A live run's lock is a ``FileExistsError`` naming it; the lock of a
    process that no longer runs here (a run killed, or a machine restarted) is taken over, with
    a line saying so. (On a disk that machines share, another machine's run looks dead here:
    its process id is looked up on this one.)"""
    lock, host = Path(folder) / ".lock", socket.gethostname()
    lock.parent.mkdir(parents=True, exist_ok=True)
    while True:
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)  # one process wins
            break
        except FileExistsError:
            other = {"pid": 0, "host": "?", "started": "?"}  # unreadable: being written
            with contextlib.suppress(OSError, ValueError, TypeError):
                other |= json.loads(lock.read_text())
            pid, when = other["pid"], other["started"]
            if not pid or is_running(int(pid)):
                raise FileExistsError(
                    f"{lock.parent} is in use by another run: process {pid or '?'} on "
                    f"{other['host']}, started {when} ({lock}). Wait for it to end or give this "
                    f"run another folder; if no such run goes on, delete {lock}"
                ) from None
            print(f"{lock}: process {pid} (started {when}) no longer runs: lock taken over")
            lock.unlink(missing_ok=True)
    started = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    with os.fdopen(fd, "w") as f:
        json.dump({"pid": os.getpid(), "host": host, "started": started}, f)
    try:
        yield lock
    finally:
        lock.unlink(missing_ok=True)
