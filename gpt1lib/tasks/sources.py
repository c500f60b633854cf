"""Where a run's data comes from, behind one interface: ``open_source(value)``, ``Files``
("fixture", "hub" or a folder or file in the official layouts) or a ``Bundle`` (a folder with a
``manifest.json``, ``python -m gpt1lib.harness.bundle``, for a machine without a network).
Either gives a task's ``examples``, where they come from (``describe``; ``location``, relative
to the source), ``count``, and for a corpus the ``token_ids`` it stores (None: it holds text).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np

from .bundle import MANIFEST, Bundle
from .layout import find
from .readers import read
from .registry import FIXTURES, Example, TaskSpec, subsample


def open_source(value) -> Files | Bundle:
    """The source ``value`` names: a ``Bundle`` where it is a folder holding a bundle's
    manifest, else ``Files`` ("fixture", "hub", a folder or file, or a corpus's hub id)."""
    if isinstance(value, Files | Bundle):
        return value
    if isinstance(value, str | os.PathLike) and str(value) not in ("fixture", "hub", ""):
        if (Path(value) / MANIFEST).is_file():
            return Bundle(Path(value))
    return Files(value)


class Files:
    """The data sets' files in their official layouts: "fixture", "hub", a folder or one file."""

    def __init__(self, value) -> None:
        self.value = value

    def examples(self, spec: TaskSpec, split: str, limit=None, seed: int = 0) -> list[Example]:
        if self._val_only(spec):
            return subsample(self.val_halves(spec)[split], limit, seed)
        return subsample(read(spec, split, self.value), limit, seed)

    def count(self, spec: TaskSpec, split: str) -> int:
        return len(self.examples(spec, split))

    def describe(self, spec: TaskSpec, split: str, relative: bool = False) -> str:
        if self.value == "hub":
            if spec.hub is None:
                return f"no hub copy ({spec.manual})"
            return f"hub {spec.hub.repo} (config {spec.hub.config}, split {spec.hub.split(split)})"
        halves = self._val_only(spec)
        path = find(spec, "train" if halves else split, self.value)
        root = FIXTURES if self.value == "fixture" else Path(self.value)
        if not relative:
            where = str(path)
        elif root.is_file() or path == root:  # the file (or RACE split folder) itself
            where = f"{path.parent.name}/{path.name}"
        else:
            where = path.relative_to(root).as_posix()
            where = f"fixture:{where}" if self.value == "fixture" else where
        if halves:
            half = "the half fine-tuned on" if split == "train" else "the other half, scored"
            where += f" ({half}: no test file)"
        return where

    def location(self, spec: TaskSpec, split: str) -> str:
        return self.describe(spec, split, relative=True)

    def token_ids(self, split: str) -> np.ndarray | None:
        return None  # text: the run tokenises it

    def tokenizer_folder(self) -> Path | None:
        return None

    def _val_only(self, spec: TaskSpec) -> bool:
        """Story Cloze in a local folder with its validation file but without its test file."""
        value = self.value
        if spec.name != "story_cloze" or value in ("fixture", "hub") or Path(value).is_file():
            return False
        try:
            find(spec, "test", value)
        except FileNotFoundError:
            find(spec, "train", value)  # neither file: the error names the validation file
            return True
        return False

    def val_halves(self, spec: TaskSpec) -> dict[str, list[Example]]:
        """The Story Cloze validation file cut in two the same way for every run (seed 0):
        ``train`` (936 of 1,871 stories) and ``test`` (935)."""
        stories = read(spec, "train", self.value)
        order = list(range(len(stories)))
        random.Random(0).shuffle(order)
        test = set(order[: len(stories) // 2])
        return {
            "train": [x for i, x in enumerate(stories) if i not in test],
            "test": [x for i, x in enumerate(stories) if i in test],
        }
