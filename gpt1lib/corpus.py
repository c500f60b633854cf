"""The pre-training corpus (§3.1, §4.1): documents tokenised once (and cached), concatenated
and cut into blocks of ``n_ctx + 1`` tokens, each epoch at a fresh random offset and in a fresh
random order; validation is a separate set of whole documents (``load_documents``).
"""

from __future__ import annotations

import hashlib
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .files import CheckpointError, atomic_path, clean_leftovers, load_array, not_utf8
from .tasks import open_source
from .tokenizer import LONG_TEXT, GPT1Tokenizer, paragraph_pieces

FIXTURE = Path(__file__).parent / "fixtures" / "corpus"
_VALID_NAMES = {"valid", "validation", "val", "dev"}


@dataclass(frozen=True)
class Documents:
    """The documents of one split and where they came from."""

    texts: list[str]
    source: str  # a description: which files or which hub data set

    @property
    def n_bytes(self) -> int:
        return sum(len(t.encode("utf-8")) for t in self.texts)

    def digests(self) -> list[bytes]:
        """Each text's sha256: what identifies the corpus wherever its files are."""
        return [hashlib.sha256(t.encode("utf-8")).digest() for t in self.texts]

    @property
    def sha256(self) -> str:
        """One sha256 of all texts, in order (a moved corpus keeps it; a changed one does not)."""
        return hashlib.sha256(b"".join(self.digests())).hexdigest()


def read_text(path: Path) -> str:
    """A UTF-8 text file; an error naming it and the fix if it is in another encoding."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise not_utf8(path, e) from e


def _local_split(root: Path, split: str) -> list[Path]:
    """The files of ``split`` under ``root``: a ``split`` subfolder or ``split.txt``."""
    names = _VALID_NAMES if split in _VALID_NAMES else {split}
    for name in sorted(names):
        if (root / name).is_dir():
            return sorted((root / name).rglob("*.txt"))
        if (root / f"{name}.txt").is_file():
            return [root / f"{name}.txt"]
    return []


def load_documents(
    source: str | os.PathLike = "fixture",
    split: str = "train",
    doc_separator: str | None = None,
    text_field: str = "text",
    limit: int | None = None,
) -> Documents:
    """The documents of ``split`` ("train" or "valid") from ``source``: a folder's part (a
    subfolder or ``<part>.txt``), else any file or folder as "train"; ``doc_separator`` cuts a
    file into documents. A bundle's ids come back decoded."""
    src = open_source(source)
    if (folder := src.tokenizer_folder()) is not None:
        ids = src.token_ids("valid" if split in _VALID_NAMES else "train")
        text = GPT1Tokenizer.load(folder).decode(ids.tolist())
        return Documents([text], f"bundle {Path(source).name} ({split}, decoded from its ids)")
    path = FIXTURE if str(source) == "fixture" else Path(source)
    if path.exists():
        if path.is_file():
            files = [path] if split == "train" else []
        else:
            files = _local_split(path, split)
            if not files and split == "train" and not _local_split(path, "valid"):
                files = sorted(path.rglob("*.txt"))
        if not files:
            raise FileNotFoundError(
                f"no {split!r} text in {path}: a corpus folder needs {split}/*.txt or {split}.txt "
                "(or pass a file or a flat folder of .txt files as the train part and hold out "
                "documents with split_documents)"
            )
        texts = [read_text(f) for f in files]
        if doc_separator:
            texts = [d for t in texts for d in t.split(doc_separator) if d.strip()]
        desc = local_location(path, files)
    else:
        texts, desc = _hub_documents(str(source), split, text_field, limit)
    if limit is not None:
        texts = texts[:limit]
    if not any(t.strip() for t in texts):
        raise ValueError(f"the {split!r} part of {desc} is empty: give a corpus with text in it")
    return Documents(texts, desc)


def local_location(source: Path, files: list[Path]) -> str:
    """Where local text was read, relative to the folder holding ``source``
    (``books/train/*.txt (12 files)``) or under ``fixture:``."""
    root, prefix = (FIXTURE, "fixture:") if source == FIXTURE else (source.parent, "")
    if len(files) == 1:
        return prefix + files[0].relative_to(root).as_posix()
    folder = Path(os.path.commonpath(files))
    folder = folder.parent if folder in files else folder
    pattern = "*.txt" if all(f.parent == folder for f in files) else "**/*.txt"
    where = (folder / pattern).relative_to(root).as_posix()
    return f"{prefix}{where} ({len(files)} files)"


def _hub_documents(
    repo_id: str, split: str, text_field: str, limit: int | None
) -> tuple[list[str], str]:
    """Rows of a hub data set; with ``limit``, streamed, so only those rows are downloaded."""
    from datasets import load_dataset

    hub_split = "validation" if split in _VALID_NAMES else split
    try:
        ds = load_dataset(repo_id, split=hub_split, streaming=limit is not None)
    except Exception as e:  # unreachable hub, unknown id, missing split
        raise FileNotFoundError(
            f"{repo_id!r} is neither a local path nor a data set the hub gave "
            f"({type(e).__name__}: {str(e)[:200]}). Pass a local text file or folder, e.g. "
            "corpus='/path/to/books/' (one .txt a document), or 'fixture' for the smoke corpus"
        ) from e
    if text_field not in (ds.column_names or [text_field]):
        raise ValueError(
            f"{repo_id} has no column {text_field!r} (it has {ds.column_names}); pass text_field="
        )
    texts = [r[text_field] for r in (ds.take(limit) if limit is not None else ds)]
    return texts, f"hub:{repo_id} ({hub_split}{f', first {limit} rows' if limit else ''})"


def split_documents(
    docs: Documents, valid_fraction: float, seed: int = 0
) -> tuple[Documents, Documents]:
    """Hold out ``valid_fraction`` of the documents (at least one), chosen with ``seed``."""
    n = len(docs.texts)
    if n < 2:
        raise ValueError(
            f"{docs.source} has {n} document: a validation split by document needs "
            "two or more (pass a doc_separator, or a separate valid part)"
        )
    order = np.random.default_rng(seed).permutation(n)
    n_valid = max(1, round(valid_fraction * n))
    pick = set(order[:n_valid].tolist())
    train = [t for i, t in enumerate(docs.texts) if i not in pick]
    valid = [t for i, t in enumerate(docs.texts) if i in pick]
    return (
        Documents(train, f"{docs.source}, {len(train)} of {n} documents"),
        Documents(valid, f"{docs.source}, {len(valid)} held-out documents"),
    )


def train_and_valid(
    source, valid_fraction: float = 0.05, seed: int = 0, doc_separator=None, limit=None
) -> tuple[Documents, Documents]:
    """The train and valid documents of ``source``: its own valid part, else ``valid_fraction``
    of its documents held out (``split_documents``)."""
    train = load_documents(source, "train", doc_separator, limit=limit)
    try:
        return train, load_documents(source, "valid", doc_separator, limit=limit)
    except FileNotFoundError:
        return split_documents(train, valid_fraction, seed)


def tokenize(docs: Documents, tokenizer, cache_dir: str | os.PathLike | None = None) -> np.ndarray:
    """All documents' token ids, concatenated, cached under ``cache_dir`` by the texts' and
    the tokenizer's hashes."""
    h = hashlib.sha256(tokenizer.fingerprint().encode())
    for d in docs.digests():
        h.update(d)
    cache = Path(cache_dir) / f"tokens-{h.hexdigest()[:20]}.npy" if cache_dir else None
    if cache is not None and cache.is_file():
        try:
            return load_array(cache, "tokenising again")
        except CheckpointError as e:  # truncated or overwritten
            warnings.warn(str(e), stacklevel=2)
    # encoded apart, the pieces lack the newline token at each cut (one in 64K characters)
    pieces = [p for t in docs.texts for p in paragraph_pieces(t, LONG_TEXT)]
    dtype = np.uint16 if tokenizer.n_tokens <= np.iinfo(np.uint16).max + 1 else np.int32
    ids = [np.asarray(e, dtype=dtype) for e in tokenizer.encode_batch(pieces)]
    tokens = np.concatenate(ids) if ids else np.zeros(0, dtype=dtype)
    if cache is not None:
        clean_leftovers(cache.parent, only_dead=True)  # others may be writing here now
        with atomic_path(cache) as tmp, open(tmp, "wb") as f:
            np.save(f, tokens)
    return tokens


class TokenBlocks:
    """One token stream cut into blocks of ``n_ctx + 1`` tokens. Epoch ``e``'s offset and
    block order are drawn from ``seed`` and ``e``, so (epoch, batch) fixes the data exactly."""

    def __init__(self, tokens: np.ndarray, n_ctx: int, name: str = "corpus") -> None:
        self.tokens = tokens
        self.block = n_ctx + 1
        if len(tokens) < self.block + 1:
            raise ValueError(
                f"the {name} has {len(tokens)} tokens, fewer than one block of n_ctx + 1 = "
                f"{self.block} (plus one for the random offset): give more text or a smaller n_ctx"
            )

    def __len__(self) -> int:
        """Blocks in one epoch (the offset may cost the last one)."""
        return (len(self.tokens) - self.block) // self.block

    def unigram_entropy(self, chunk: int = 1 << 24) -> float:
        """The tokens' unigram entropy (nats): the loss of a model of their frequencies alone."""
        t, size = self.tokens, int(self.tokens.max()) + 1
        counts = sum(np.bincount(t[i : i + chunk], minlength=size) for i in range(0, len(t), chunk))
        p = counts[counts > 0] / len(t)
        return float(-(p * np.log(p)).sum())

    def epoch_order(self, epoch: int, seed: int) -> tuple[int, np.ndarray]:
        """The offset and the block order of ``epoch``."""
        rng = np.random.default_rng([seed, epoch])
        return int(rng.integers(self.block)), rng.permutation(len(self))

    def batch(self, starts: np.ndarray) -> torch.Tensor:
        """The blocks that begin at token positions ``starts``, as (len(starts), n_ctx + 1)."""
        idx = starts[:, None] + np.arange(self.block)[None, :]
        return torch.from_numpy(self.tokens[idx].astype(np.int64))

    def batches(self, batch_size: int, seed: int, epoch: int = 0, start_batch: int = 0):
        """Yield ``(epoch, batch_index, tokens)`` forever from position (epoch, start_batch)."""
        per_epoch = len(self) // batch_size
        if per_epoch == 0:
            raise ValueError(
                f"{len(self)} blocks cannot fill one batch of {batch_size}: give more "
                "text, or a smaller batch_size or n_ctx"
            )
        while True:
            offset, order = self.epoch_order(epoch, seed)
            for b in range(start_batch, per_epoch):
                rows = order[b * batch_size : (b + 1) * batch_size]
                yield epoch, b, self.batch(offset + rows * self.block)
            epoch, start_batch = epoch + 1, 0

    def eval_batches(self, batch_size: int, max_batches: int | None = None):
        """Fixed, in-order blocks for validation (no offset, no shuffle)."""
        n = len(self) if max_batches is None else min(len(self), max_batches * batch_size)
        for i in range(0, n, batch_size):
            yield self.batch(np.arange(i, min(i + batch_size, n)) * self.block)


@dataclass
class Corpus:
    """Train and validation token streams with their provenance."""

    train: TokenBlocks
    valid: TokenBlocks
    train_source: str
    valid_source: str
    n_bytes: int
    source: str = ""  # the source as given to build_corpus
    sha256: str = ""  # of the training texts (``Documents.sha256``)

    def stats(self) -> dict[str, float]:
        n = len(self.train.tokens)
        return {
            "train_tokens": n,
            "valid_tokens": len(self.valid.tokens),
            "train_blocks": len(self.train),
            "valid_blocks": len(self.valid),
            "train_bytes": self.n_bytes,
            "bytes_per_token": self.n_bytes / max(n, 1),
        }


def build_corpus(
    tokenizer,
    n_ctx: int,
    source: str | os.PathLike = "fixture",
    valid_fraction: float = 0.05,
    seed: int = 0,
    doc_separator: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    limit: int | None = None,
) -> Corpus:
    """Documents of ``source`` tokenised and cut into blocks; validation is the source's own
    part, else ``valid_fraction`` of the documents. A bundle gives its stored ids."""
    src = open_source(source)
    if src.tokenizer_folder() is not None:  # a bundle's stored ids, checked to be tokenizer's
        src.check_tokenizer(tokenizer)
        t, v = src.manifest["corpus"]["train"], src.manifest["corpus"]["valid"]
        via = f", via bundle {src.folder.name}"
        ids = src.token_ids("train"), src.token_ids("valid")
        about = (t["source"] + via, v["source"] + via, t["bytes"], str(src.folder), t["sha256"])
    else:
        docs = train_and_valid(source, valid_fraction, seed, doc_separator, limit)
        train_docs = docs[0]
        ids = [tokenize(d, tokenizer, cache_dir) for d in docs]
        about = (*(d.source for d in docs), train_docs.n_bytes, str(source), train_docs.sha256)
    train = TokenBlocks(ids[0], n_ctx, "training text")
    valid = TokenBlocks(ids[1], n_ctx, "validation text")
    return Corpus(train, valid, *about)
