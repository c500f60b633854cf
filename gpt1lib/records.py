"""Records: every number the book shows, with where it came from.

A record is one measured value (a loss at a step, a dev accuracy, a throughput) plus its
provenance: experiment, task, split, metric, scale, seed, config, data source, git commit, device,
date and wall time. Records are appended to JSON-lines files, one object a line, never rewritten;
tables and figures are drawn from them.
"""

from __future__ import annotations

import datetime as _dt
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

from .checkpoint import atomic_path

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
)


def _git(*args: str) -> str:
    here = Path(__file__).resolve().parent
    return subprocess.run(
        ["git", *args], cwd=here, capture_output=True, text=True, check=True
    ).stdout.strip()


@cache
def git_commit() -> str:
    """The commit of the gpt1lib checkout (``+dirty`` when it has uncommitted changes)."""
    try:
        sha = _git("rev-parse", "--short=12", "HEAD")
        dirty = _git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha + ("+dirty" if dirty else "")


def device_name(device: torch.device | str | None = None) -> str:
    """A readable name of the device a run used: the GPU's name, or the CPU's."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({platform.machine()}, {torch.get_num_threads()} threads)"


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


def run_label(rec) -> str:
    """How a table names the run a number came from, e.g. "cpu run, 2 CPU threads, commit
    659788c, seed 0": its scale, device, commit and seed, and for fine-tuning runs the settings
    a rerun may change (lambda when it is not the paper's 0.5, the blocks transferred, STS-B's
    squared-error head), so that two reruns never share a column."""
    device = str(rec.get("device") or "?")
    if device.startswith("cpu ("):  # "cpu (x86_64, 2 threads)"
        device = f"{device.split(', ')[-1].split()[0]} CPU threads"
    label = f"{rec.get('scale')} run, {device}, commit {rec.get('commit')}, seed {rec.get('seed')}"
    config = rec.get("config") if isinstance(rec.get("config"), dict) else {}
    if rec.get("experiment") == "finetune":
        if config.get("lm_coef", 0.5) != 0.5:
            label += f", λ {config['lm_coef']:g}"
        if config.get("n_transfer") is not None:
            label += f", n_transfer {config['n_transfer']}"
        if config.get("regression") == "mse":  # STS-B's head, where not the soft labels
            label += ", STS-B mse"
    return label
