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
    """Why ``task`` cannot be fine-tuned and scored from ``source`` (its train or its
    evaluation split is missing or empty there, e.g. Story Cloze without its files, or SciTail
    without a train file; or ``source`` is one file), or None when both load. Without
    ``train``: why it cannot be scored (MNLI-mm, scored beside MNLI-m, has no train split)."""
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
    """The file (or hub split, or bundle) that ``load_examples(task, split, source)`` reads."""
    return open_source(source).describe(_spec(task, split), split)


def data_location(task: str | TaskSpec, split: str, source: str | Path = "fixture") -> str:
    """Where ``split`` of ``task`` is read from, as records keep it: relative to ``source``
    (``glue/MRPC/train.tsv``), ``fixture:`` and the path under the fixtures, the file and its
    folder's name where ``source`` is that file, or the hub data set; never this machine's
    absolute path."""
    return open_source(source).location(_spec(task, split), split)


def load_examples(
    task: str | TaskSpec,
    split: str,
    source: str | Path = "fixture",
    limit: int | None = None,
    seed: int = 0,
) -> list[Example]:
    """The examples of ``split`` ("train", "dev", "test") of ``task`` from ``source``.

    ``source``: ``"fixture"`` (the small files shipped with gpt1lib), ``"hub"`` (the registry's
    hub id through ``datasets``), a folder in the data set's official layout (or the one file
    to read), or a bundle: any that ``sources.open_source`` opens. ``limit`` keeps that many
    examples, drawn with ``seed``, in file order.

    Story Cloze from a folder that holds only its validation file (the test file is handed out
    separately): ``train`` is one half of that file and ``test`` the other
    (``sources.Files.val_halves``).
    """
    return open_source(source).examples(_spec(task, split), split, limit, seed)
