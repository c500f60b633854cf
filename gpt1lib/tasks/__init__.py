"""The twelve data sets of Table 1 (§4.2) and DPRD (§5): one registry, their readers, metrics.

Bad data is an error naming the file, the row and the fix; only what the data sets' own
conventions drop (pairs without a gold label) is skipped.
"""

from __future__ import annotations

from pathlib import Path

from .registry import (
    FIXTURES,
    SCORED_BESIDE,
    SPLITS,
    TASKS,
    DataWarning,
    Example,
    Family,
    HubSource,
    TaskDataUnavailableError,
    TaskSpec,
    compute_metrics,
    get_task,
    subsample,
)
from .sources import open_source


def _spec(task: str | TaskSpec, split: str | None = None) -> TaskSpec:
    spec = task if isinstance(task, TaskSpec) else get_task(task)
    if split is not None and split not in spec.splits:
        raise ValueError(f"{spec.title} has no split {split!r}; it has {list(spec.splits)}")
    return spec


def task_names(tasks: str | list[str] | tuple[str, ...]) -> list[str]:
    """``tasks`` as a list of registry names: one name alone (papermill's ``-p tasks rte``) is a
    list of one; an unknown name is an error that lists the known ones."""
    names = [tasks] if isinstance(tasks, str) else list(tasks)
    if not names:
        raise ValueError("tasks is empty: name at least one task, e.g. ['rte']")
    return [get_task(n).name for n in names]


def unavailable(
    task: str | TaskSpec, source: str | Path = "fixture", train: bool = True
) -> str | None:
    """Why ``task`` cannot be fine-tuned (or without ``train``, scored) from ``source`` (a
    split missing or empty there, or ``source`` one file), or None when the splits load."""
    spec = _spec(task)
    if source not in ("fixture", "hub") and Path(source).is_file():
        return (
            f"{source} is one file and {spec.title} needs two splits (train and "
            f"{spec.eval_split}): one file never serves both; pass the folder that holds them"
        )
    try:
        for split in dict.fromkeys(("train", spec.eval_split)[not train :]):
            load_examples(spec, split, source, limit=1)
    except (FileNotFoundError, RuntimeError) as e:
        return str(e)
    return None


def describe_source(task: str | TaskSpec, split: str, source: str | Path = "fixture") -> str:
    """Where ``load_examples(task, split, source)`` reads from, for a reader."""
    return open_source(source).describe(_spec(task, split), split)


def data_location(task: str | TaskSpec, split: str, source: str | Path = "fixture") -> str:
    """Where ``split`` of ``task`` is read from as records keep it: relative to ``source``
    (``glue/MRPC/train.tsv``, ``fixture:...``) or the hub data set, never absolute."""
    return open_source(source).location(_spec(task, split), split)


def load_examples(
    task: str | TaskSpec,
    split: str,
    source: str | Path = "fixture",
    limit: int | None = None,
    seed: int = 0,
) -> list[Example]:
    """The examples of ``split`` of ``task`` from ``source``; ``limit`` keeps that many, drawn
    with ``seed``, in file order. Story Cloze from a folder with only its validation file:
    ``train`` and ``test`` are its two halves."""
    return open_source(source).examples(_spec(task, split), split, limit, seed)
