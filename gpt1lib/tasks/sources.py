"""Where a run's data comes from, behind one interface: ``open_source(value)``.

Every source answers the same questions: a task's ``examples`` of a split (``limit`` of them,
drawn with ``seed``), where they come from (``describe``, and ``location``: relative to the
source, as records keep it, never a machine's path), how many a split holds (``count``) and
which draws of it a plan may pick (``draws``: None where any limit loads); and for a corpus,
the ``token_ids`` it stores and the ``tokenizer_folder`` they were made with, where it has
them (None: it holds text, which the run tokenises). Two kinds:

* ``Files``: "fixture" (the small files written for this project, under the package),
  "hub" (each task's hub copy, through ``datasets``), or a folder (or one file) in the data
  sets' official layouts (``readers``);
* ``Bundle``: a folder with a ``manifest.json`` of ``FORMAT`` (``python -m
  gpt1lib.harness.bundle`` builds one, for a machine without a network): the examples of the
  draws it holds, exactly those a ``Files`` source gives for them, each file checked against
  its sha256; the corpus as token ids, and the tokenizer that made them. It may hold licensed
  data (Story Cloze): the user's copy, never committed.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import lzma
import os
import random
from pathlib import Path

import numpy as np

from .readers import find, read
from .registry import FIXTURES, Example, TaskSpec

MANIFEST = "manifest.json"
FORMAT = "gpt1lib-bundle/1"


class BundleError(ValueError):
    """A bundle that is damaged, or that does not hold what a run asks of it."""


def subsample(examples: list, limit: int | None, seed: int = 0) -> list:
    """``limit`` examples drawn with ``seed``, in file order; all of them if ``limit`` is None."""
    if limit is None or limit >= len(examples):
        return list(examples)
    if limit < 1:
        raise ValueError(f"limit={limit}: use a positive count, or None for every example")
    keep = sorted(random.Random(seed).sample(range(len(examples)), limit))
    return [examples[i] for i in keep]


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

    def draws(self, spec: TaskSpec, split: str) -> list | None:
        return None  # any limit loads

    def describe(self, spec: TaskSpec, split: str) -> str:
        if self._val_only(spec):
            half = "the half fine-tuned on" if split == "train" else "the other half, scored"
            return f"{find(spec, 'train', self.value)} ({half}: no test file)"
        if self.value != "hub":
            return str(find(spec, split, self.value))
        if spec.hub is None:
            return f"no hub copy ({spec.manual})"
        return f"hub {spec.hub.repo} (config {spec.hub.config}, split {spec.hub.split(split)})"

    def location(self, spec: TaskSpec, split: str) -> str:
        if self.value == "hub":
            return self.describe(spec, split)
        halves = self._val_only(spec)
        path = find(spec, "train" if halves else split, self.value)
        root = FIXTURES if self.value == "fixture" else Path(self.value)
        if root.is_file() or path == root:  # the file (or RACE split folder) itself
            return f"{path.parent.name}/{path.name}"
        where = path.relative_to(root).as_posix()
        if halves:
            where += " (the half fine-tuned on" if split == "train" else " (the other half, scored"
            where += ": no test file)"
        return f"fixture:{where}" if self.value == "fixture" else where

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
        """The Story Cloze validation file cut in two, the same way for every run (seed 0, not
        the run's): ``train`` (936 of the 1,871 stories) to fine-tune on, ``test`` (935) to
        score."""
        stories = read(spec, "train", self.value)
        order = list(range(len(stories)))
        random.Random(0).shuffle(order)
        test = set(order[: len(stories) // 2])
        return {
            "train": [x for i, x in enumerate(stories) if i not in test],
            "test": [x for i, x in enumerate(stories) if i in test],
        }


@functools.lru_cache(maxsize=8)
def _manifest(folder: str, mtime: float) -> dict:
    man = json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))
    if man.get("format") != FORMAT:
        raise BundleError(f"{folder}: manifest format {man.get('format')!r}, expected {FORMAT!r}")
    return man


@functools.lru_cache(maxsize=64)
def _read(path: str, sha256: str) -> bytes:
    """A bundle file's bytes, decompressed, after checking its sha256 against the manifest."""
    data = Path(path).read_bytes()
    if hashlib.sha256(data).hexdigest() != sha256:
        raise BundleError(f"{path} does not match the sha256 in its manifest: it is damaged")
    return lzma.decompress(data) if path.endswith(".xz") else data


@functools.lru_cache(maxsize=64)
def _examples(path: str, sha256: str) -> dict[int, Example]:
    rows = (json.loads(line) for line in _read(path, sha256).decode("utf-8").splitlines())
    return {
        r["i"]: Example(tuple(r["texts"]), tuple(r["answers"]), r["label"], r["uid"]) for r in rows
    }


class Bundle:
    """A bundle folder (see the module's docstring): everything a run at one scale reads."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    @property
    def manifest(self) -> dict:
        """The manifest (read once per change of the file)."""
        path = self.folder.resolve()
        return _manifest(str(path), (path / MANIFEST).stat().st_mtime)

    def _file(self, name: str) -> tuple[str, str]:
        entry = self.manifest["files"].get(name)
        if entry is None:
            raise BundleError(f"{self.folder} lists no file {name} in its manifest")
        return str(self.folder.resolve() / name), entry["sha256"]

    def _entry(self, spec: TaskSpec, split: str) -> dict:
        held = self.manifest["tasks"]
        entry = held.get(spec.name, {}).get(split)
        if entry is None:
            have = sorted(f"{t} {s}" for t, splits in held.items() for s in splits)
            raise FileNotFoundError(
                f"the bundle {self.folder} holds no {spec.title} {split} examples (it holds: "
                f"{', '.join(have) or 'none'}); build it from a source that has them"
            )
        return entry

    def examples(self, spec: TaskSpec, split: str, limit=None, seed: int = 0) -> list[Example]:
        """What ``Files(<the original source>).examples(spec, split, limit, seed)`` returns, for
        the draws the bundle holds; another draw is an error that names them."""
        entry = self._entry(spec, split)
        want = subsample(list(range(entry["of"])), limit, seed)  # the direct load's indices
        held = _examples(*self._file(entry["file"]))
        missing = sum(i not in held for i in want)
        if missing:
            raise BundleError(
                f"the bundle {self.folder} holds {len(held)} of the {entry['of']} {spec.title} "
                f"{split} examples, the draws (limit, seed) {entry['draws']}; limit={limit}, "
                f"seed={seed} asks for {missing} it lacks: use one of those limits, or build "
                "the bundle with this one"
            )
        return [held[i] for i in want]

    def count(self, spec: TaskSpec, split: str) -> int:
        return self._entry(spec, split)["of"]

    def draws(self, spec: TaskSpec, split: str) -> list:
        """The limits a plan may pick, largest first (None: all); the bundle holds their draws
        with its seed."""
        return self._entry(spec, split)["ladder"]

    def describe(self, spec: TaskSpec, split: str) -> str:
        """Where the examples came from, relative to the source the bundle was built from."""
        return f"{self._entry(spec, split)['from']}, via bundle"

    location = describe

    def token_ids(self, split: str) -> np.ndarray:
        """The corpus's token ids of ``split`` ("train", else the validation part)."""
        part = "train" if split == "train" else "valid"
        return np.load(io.BytesIO(_read(*self._file(f"corpus/{part}.npy.xz"))))

    def tokenizer_folder(self) -> Path:
        return self.folder / "tokenizer"

    def check_tokenizer(self, tok) -> None:
        """An error unless ``tok`` is the tokenizer the bundle's corpus was tokenized with."""
        want = self.manifest["tokenizer"]["fingerprint"]
        if tok.fingerprint() != want:
            raise BundleError(
                f"the corpus in {self.folder} was tokenized with the tokenizer in "
                f"{self.tokenizer_folder()} (fingerprint {want}), not this one "
                f"({tok.fingerprint()}): load that one"
            )

    def identity(self) -> str:
        """What tells this bundle from another: its manifest's sha256."""
        path = self.folder / MANIFEST
        return "bundle " + hashlib.sha256(path.read_bytes()).hexdigest()[:16]
