"""A bundle (``python -m gpt1lib.harness.bundle`` builds one), read: everything a run at one
scale reads, for a machine without a network. A ``manifest.json`` of ``FORMAT`` lists every
file's sha256 (checked on reading); each task's examples for the draws (limit, seed) a run may
ask for; the corpus as token ids and the tokenizer that made them. It may hold licensed data
(Story Cloze): the user's copy, never committed.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import lzma
from pathlib import Path

import numpy as np

from .registry import Example, TaskSpec, subsample

MANIFEST = "manifest.json"
FORMAT = "gpt1lib-bundle/1"


class BundleError(ValueError):
    """A bundle that is damaged, or that does not hold what a run asks of it."""


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
        """What the original source's ``examples`` gives, for the draws the bundle holds."""
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
