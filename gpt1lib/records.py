"""Records: every number the book shows, with where it came from.

A record is one measured value plus its provenance (``FIELDS``), one JSON object a line of a
JSON-lines file; tables and figures are drawn from them. A line that is not a record is left
out with a warning naming the file and the line. ``per_example_record`` keeps what an interval
needs: each example's prediction and gold label, in order, and a fingerprint of their ids.
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
from .runtime import pick_device

log = logging.getLogger(__name__)

#: The fields every record carries (``None`` where they do not apply).
FIELDS = tuple(
    "experiment task split metric value step scale seed config data commit device date wall_time "
    "per_example".split()
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
    """The commit of the gpt1lib checkout (``+dirty`` with uncommitted changes outside
    ``results/``, which a recorded run writes to), or "unknown". ``$GPT1_COMMIT`` comes first:
    a copy of the checkout (a GPU machine's) says its commit that way."""
    if os.environ.get("GPT1_COMMIT"):
        return os.environ["GPT1_COMMIT"]
    try:
        sha = _git("rev-parse", "--short=12", "HEAD")
        dirty = _git("status", "--porcelain", "--untracked-files=no", *_CODE)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha + ("+dirty" if dirty else "")


def provenance(device: torch.device | str | None = None) -> dict[str, Any]:
    """The fields that say where and when a number was measured (the device: the GPU's name,
    or the CPU's)."""
    device = pick_device(device)
    name = f"cpu ({platform.machine()}, {torch.get_num_threads()} threads, {os.cpu_count()} cores)"
    return {
        "commit": git_commit(),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else name,
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
    return [int(f) if (f := float(v)).is_integer() else round(f, 4) for v in values]


def examples_fingerprint(uids: Iterable[str]) -> str:
    """A short hash of the evaluation examples' ids, in order: two evaluations with the same
    fingerprint scored the same examples in the same order."""
    return hashlib.sha256("\n".join(map(str, uids)).encode()).hexdigest()[:16]


def per_example_record(predictions, labels, uids: Iterable[str], **fields: Any) -> dict[str, Any]:
    """The record of one evaluation's per-example outcomes: value = the number of examples,
    ``per_example`` = {"predictions", "labels" (in order), "examples" (their ids' fingerprint)}."""
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
    """Append ``records`` to the JSON-lines file ``path`` in one synced write of whole lines
    (after a torn last line, on a line of their own). A failed write (a full disk) is undone
    and the error names the file and its free space."""
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
    """The records of a JSON-lines file, and whether its last line was torn (a write a crash
    cut short). A line that is not a record is warned about and kept as bytes (for
    ``keep_records``)."""
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
    """The records of one JSON-lines file (none where it is missing)."""
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
    """Rewrite ``path`` (atomically) with the records ``keep`` says yes to, and any broken line
    inside it (a user may mend it), a torn last line dropped; returns how many were dropped."""
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
    """Hold ``folder`` while the block runs: ``folder/.lock``, made atomically (``O_EXCL``),
    names this process, host and start time. A live run's lock is a ``FileExistsError`` naming
    it; a dead process's lock (looked up on this machine) is taken over, with a line saying so."""
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
