"""The twelve data sets of Table 1 (§4.2) and DPRD (§5): one registry, their readers, metrics.

Every task is a ``TaskSpec`` (``registry.py``): its §3.3 family, labels, metrics, the split the
paper reports and the split compared on here (GLUE test labels are not public, so GLUE tasks compare
on dev and say so), its hub copy and its official file layout. ``load_examples`` (``readers.py``)
reads a split from ``"fixture"`` (small files written for this project in each data set's official
layout under ``gpt1lib/fixtures/tasks``: offline, for smoke runs and tests), ``"hub"``
(``datasets.load_dataset`` on the hub id: parquet, no loading script), or a folder (or one file) in
the official layout: the GLUE TSV folders, the MultiNLI and SNLI jsonl releases, SciTail's
``tsv_format`` or the CSV copy in shared/data, RACE as ``{train,dev,test}/{middle,high}/*.txt`` or
one passage per line in ``{split}.jsonl(.gz)``, the Story Cloze 2016 CSV files, DPRD's original
``train.c.txt`` / ``test.c.txt``.

Splits are always ``train``, ``dev`` and ``test`` (``describe_source`` names the file one is read
from). Bad data raises an error that names the file, the row and the fix; nothing is skipped
silently except what the data sets' own conventions drop (MultiNLI/SNLI pairs without a gold label,
gold_label ``-``, as GLUE does). ``compute_metrics`` scores predictions with a task's metrics.
"""

from __future__ import annotations

import random
from pathlib import Path

from .readers import find, read
from .registry import (
    FIXTURES,
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
)

__all__ = [
    "FIXTURES", "SPLITS", "TASKS", "DataWarning", "Example", "Family", "HubSource",
    "TaskDataUnavailableError", "TaskSpec", "compute_metrics", "data_location", "describe_source",
    "get_task", "load_examples", "subsample", "task_names", "unavailable",
]  # fmt: skip


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


def unavailable(task: str | TaskSpec, source: str | Path = "fixture") -> str | None:
    """Why ``task`` cannot be fine-tuned and scored from ``source`` (its train or its
    evaluation split is missing or empty there, e.g. Story Cloze without its files, or SciTail
    without a train file; or ``source`` is one file), or None when both load."""
    spec = _spec(task)
    if source not in ("fixture", "hub") and Path(source).is_file():
        return (
            f"{source} is one file and {spec.title} needs two splits (train and "
            f"{spec.eval_split}): one file never serves both; pass the folder that holds them"
        )
    try:
        for split in dict.fromkeys(("train", spec.eval_split)):
            load_examples(spec, split, source, limit=1)
    except (FileNotFoundError, RuntimeError) as e:
        return str(e)
    return None


def describe_source(task: str | TaskSpec, split: str, source: str | Path = "fixture") -> str:
    """The file (or hub split) that ``load_examples(task, split, source)`` reads."""
    from ..bundle import describe, is_bundle  # a bundle imports the tasks

    spec = _spec(task, split)
    if is_bundle(source):
        return describe(source, spec, split)
    if _val_only(spec, source):
        half = "the half fine-tuned on" if split == "train" else "the other half, scored"
        return f"{find(spec, 'train', source)} ({half}: no test file)"
    if source != "hub":
        return str(find(spec, split, source))
    if spec.hub is None:
        return f"no hub copy ({spec.manual})"
    return f"hub {spec.hub.repo} (config {spec.hub.config}, split {spec.hub.split(split)})"


def data_location(task: str | TaskSpec, split: str, source: str | Path = "fixture") -> str:
    """Where ``split`` of ``task`` is read from, as records keep it: relative to ``source``
    (``glue/MRPC/train.tsv``), ``fixture:`` and the path under the fixtures, the file and its
    folder's name where ``source`` is that file, or the hub data set; never this machine's
    absolute path."""
    from ..bundle import is_bundle  # a bundle imports the tasks

    spec = _spec(task, split)
    if source == "hub" or is_bundle(source):
        return describe_source(task, split, source)
    halves = _val_only(spec, source)
    path = find(spec, "train" if halves else split, source)
    root = FIXTURES if source == "fixture" else Path(source)
    if root.is_file() or path == root:  # the file (or RACE split folder) itself
        return f"{path.parent.name}/{path.name}"
    where = path.relative_to(root).as_posix()
    if halves:
        where += " (the half fine-tuned on" if split == "train" else " (the other half, scored"
        where += ": no test file)"
    return f"fixture:{where}" if source == "fixture" else where


def subsample(examples: list[Example], limit: int | None, seed: int = 0) -> list[Example]:
    """``limit`` examples drawn with ``seed``, in file order; all of them if ``limit`` is None."""
    if limit is None or limit >= len(examples):
        return list(examples)
    if limit < 1:
        raise ValueError(f"limit={limit}: use a positive count, or None for every example")
    keep = sorted(random.Random(seed).sample(range(len(examples)), limit))
    return [examples[i] for i in keep]


def load_examples(
    task: str | TaskSpec,
    split: str,
    source: str | Path = "fixture",
    limit: int | None = None,
    seed: int = 0,
) -> list[Example]:
    """The examples of ``split`` ("train", "dev", "test") of ``task`` from ``source``.

    ``source``: ``"fixture"`` (the small files shipped with gpt1lib), ``"hub"`` (the registry's
    hub id through ``datasets``), or a folder in the data set's official layout (or the one file
    to read), or a bundle (``gpt1lib.bundle``: the same examples, for the draws it holds).
    ``limit`` keeps that many examples, drawn with ``seed``, in file order.

    Story Cloze from a folder that holds only its validation file (the test file is handed out
    separately): ``train`` is one half of that file and ``test`` the other (``val_halves``).
    """
    from ..bundle import examples, is_bundle  # a bundle imports the tasks

    spec = _spec(task, split)
    if is_bundle(source):
        return examples(source, spec, split, limit, seed)
    if _val_only(spec, source):
        return subsample(val_halves(spec, source)[split], limit, seed)
    return subsample(read(spec, split, source), limit, seed)


def _val_only(spec: TaskSpec, source: str | Path) -> bool:
    """Story Cloze in a local folder with its validation file but without its test file."""
    if spec.name != "story_cloze" or source in ("fixture", "hub") or Path(source).is_file():
        return False
    try:
        find(spec, "test", source)
    except FileNotFoundError:
        find(spec, "train", source)  # neither file: the error names the validation file
        return True
    return False


def val_halves(spec: TaskSpec, source: str | Path) -> dict[str, list[Example]]:
    """The Story Cloze validation file cut in two, the same way for every run (seed 0, not the
    run's): ``train`` (936 of the 1,871 stories) to fine-tune on, ``test`` (935) to score."""
    stories = read(spec, "train", source)
    order = list(range(len(stories)))
    random.Random(0).shuffle(order)
    test = set(order[: len(stories) // 2])
    return {
        "train": [x for i, x in enumerate(stories) if i not in test],
        "test": [x for i, x in enumerate(stories) if i in test],
    }
