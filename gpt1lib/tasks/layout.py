"""Where a task's split lives in a folder in the official layout (``TaskSpec.files`` and
``folders``), and the split a file is by its name."""

from __future__ import annotations

import re
from fnmatch import fnmatch
from pathlib import Path

from .registry import FIXTURES, TaskSpec

RACE_LEVELS = ("middle", "high")  # RACE's school levels, a sub-folder each


def _subset_size(path: Path) -> int:
    """The row count a ``train_subset_<n>[k]...`` file states in its name (0 if none)."""
    m = re.search(r"subset_(\d+)(k?)", path.name)
    return int(m.group(1)) * (1000 if m.group(2) else 1) if m else 0


def _match(spec: TaskSpec, split: str, folder: Path) -> Path | None:
    """The first of the split's file patterns found in ``folder``: a file name, a folder name
    ending in "/", or a glob, whose largest match wins by the count in its name (train_subset_*;
    ties: the last name in sort order)."""
    for pattern in dict(spec.files)[split]:
        path = folder / pattern
        if "*" in pattern:
            globbed = [p for p in folder.glob(pattern) if p.is_file()]
            path = max(globbed, key=lambda p: (_subset_size(p), p.name), default=None)
        if path and (path.is_dir() if pattern.endswith("/") else path.is_file()):
            return path
    return None


def _story_cloze_split(name: str) -> str | None:
    """The split of a Story Cloze 2016 file by its name: "...val..." train, "...test..." test."""
    name = name.lower()
    return "train" if "val" in name else "test" if "test" in name else None


def _story_cloze_file(spec: TaskSpec, split: str, folder: Path) -> Path | None:
    """The Spring 2016 val (train) or test CSV in ``folder``; an error if it is ambiguous."""
    found = [p for p in sorted(folder.glob("*.csv")) if _story_cloze_split(p.name) == split]
    if len(found) > 1:  # e.g. the 2016 and 2018 releases side by side: keep the paper's 2016
        found = [p for p in found if "2016" in p.name] or found
    if len(found) > 1:
        raise ValueError(
            f"{folder} holds several Story Cloze {split} files {[p.name for p in found]}; keep "
            "the Spring 2016 one or pass its path as the source"
        )
    return found[0] if found else None


def layout_hint(spec: TaskSpec, split: str) -> str:
    """Where ``split`` of ``spec`` is looked for, for an error that cannot find it."""
    where = f"in the folder given or in its sub-folder {' / '.join(f for f in spec.folders if f)}"
    return f"{spec.title} {split} needs one of {list(dict(spec.files)[split])} {where}"


_SPLIT_WORDS = {"train": {"train"}, "dev": {"dev", "val", "valid", "validation"}, "test": {"test"}}


def file_split(spec: TaskSpec, path: Path) -> str | None:
    """The split a file (or RACE split folder) is by its name, from the layout's file names or
    a split word; None if it says none or several."""
    name = path.name.lower()
    if spec.reader == "story_cloze":
        said = {_story_cloze_split(name)} - {None}
    else:
        said = {s for s, pats in spec.files for p in pats if fnmatch(name, p.rstrip("/").lower())}
    if not said:
        words = set(re.split(r"[^a-z]+", name))
        said = {s for s, w in _SPLIT_WORDS.items() if words & w and s in spec.splits}
    return said.pop() if len(said) == 1 else None


def find(spec: TaskSpec, split: str, source: str | Path) -> Path:
    """The file (or RACE folder) holding ``split`` of ``spec`` in ``source``; a file given
    serves only the split its name says (any, if it says none)."""
    root = FIXTURES if source == "fixture" else Path(source)
    if not root.exists():
        raise FileNotFoundError(f"{root} does not exist. {layout_hint(spec, split)}")
    if root.is_file() or (
        spec.reader == "race" and any((root / lv).is_dir() for lv in RACE_LEVELS)
    ):
        said = file_split(spec, root)
        if said not in (None, split):
            raise ValueError(
                f"{root} is {spec.title}'s {said} split by its name, so it cannot serve as its "
                f"{split} split (one file never serves two splits): pass the folder that holds "
                f"the {split} file, or that file"
            )
        return root  # the file itself, or a RACE split folder itself
    pick = _story_cloze_file if spec.reader == "story_cloze" else _match
    for folder in (root / sub for sub in spec.folders if (root / sub).is_dir()):
        if found := pick(spec, split, folder):
            return found
    hint = f" {spec.manual}" if spec.manual else ""
    raise FileNotFoundError(
        f"no {spec.title} {split} file under {root}. {layout_hint(spec, split)}.{hint}"
    )
