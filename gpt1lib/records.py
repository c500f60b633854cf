"""Records: every number the book shows, with where it came from.

A record is one measured value (a loss at a step, a dev accuracy, a throughput) plus its
provenance: experiment, task, split, metric, scale, seed, config, data source, git commit, device,
date and wall time. Records are appended to JSON-lines files, one object a line, never rewritten;
tables and figures are drawn from them.

Beside a final evaluation's metrics, one more record (metric ``"per_example"``, made by
``per_example_record``) keeps what an interval needs: each evaluation example's prediction and
gold label, in the evaluation's order, and a fingerprint of the examples' ids, so that two arms
scored on the same examples can be compared example by example (``stats``). Records written
before these existed have none; their numbers are shown without an interval.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import os
import platform
import subprocess
import warnings
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from .files import atomic_path

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
    commit it was made from that way, and its own ``.git``, if any, may be an older one (the
    GPU machine's was the session's first commit). Without either: "unknown"."""
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


def append_records(path: str | os.PathLike, records: Iterable[dict[str, Any]]) -> Path:
    """Append ``records`` to the JSON-lines file ``path`` in one write (creating folders)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r, default=str) + "\n" for r in records)
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    return path


def _parse(path: Path) -> tuple[list[dict], bool]:
    """The records of a JSON-lines file, and whether its last line was torn (a write cut short
    by a crash: left out, with a warning). Any other line that is not JSON is an error that
    names the file and the line."""
    lines = path.read_text(encoding="utf-8").split("\n")
    rows, torn = [], False
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            if n < len(lines):  # a whole line (it ends with a newline) that is not JSON
                raise ValueError(
                    f"{path}, line {n}: not a JSON record ({e}); fix or delete that line"
                ) from e
            torn = True
            warnings.warn(
                f"{path}, line {n}: the last line is cut short (a write a crash interrupted); "
                "it is left out",
                stacklevel=3,
            )
    return rows, torn


def read_records(*paths: str | os.PathLike) -> pd.DataFrame:
    """All records in the given files or folders (``*.jsonl`` below them) as a DataFrame."""
    files: list[Path] = []
    for p in map(Path, paths):
        files += sorted(p.rglob("*.jsonl")) if p.is_dir() else [p] if p.is_file() else []
    rows = [row for f in files for row in _parse(f)[0]]
    return pd.DataFrame(rows, columns=list(FIELDS) if not rows else None)


def keep_records(path: str | os.PathLike, keep: Callable[[dict], bool]) -> int:
    """Rewrite the JSON-lines file ``path`` (atomically) with only the records ``keep`` says
    yes to, a torn last line repaired away; returns how many were dropped."""
    path = Path(path)
    if not path.is_file():
        return 0
    rows, torn = _parse(path)
    kept = [r for r in rows if keep(r)]
    if len(kept) < len(rows) or torn:
        with atomic_path(path) as tmp:
            tmp.write_text("".join(json.dumps(r, default=str) + "\n" for r in kept))
        log.info("%s: %d records dropped, to be logged again", path, len(rows) - len(kept))
    return len(rows) - len(kept)
