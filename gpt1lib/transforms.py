"""Task-specific input transformations (§3.3, Figure 1): every input becomes token sequences
``_start_ ... _classify_``; the task head reads the final hidden state at ``_classify_``.
Classification: ``_start_ text _classify_``; entailment: ``_start_ premise _delimiter_
hypothesis _classify_``; similarity: both orders (the head adds their extract vectors);
multiple choice: ``_start_ context question _delimiter_ answer_k _classify_`` per answer.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from .tasks import Example, Family

#: How a task's inputs are cut to fit ``n_ctx`` (``TaskSpec.truncation``).
TRUNCATIONS = ("family", "halves")


@dataclass(frozen=True)
class Encoded:
    """One example's token sequences, each ending with ``_classify_``; ``truncated``: whether
    any of its tokens was cut to fit."""

    seqs: tuple[tuple[int, ...], ...]
    label: int | float | None
    truncated: bool = field(default=False, compare=False)

    @property
    def extract(self) -> tuple[int, ...]:
        """The ``_classify_`` position of each sequence."""
        return tuple(len(s) - 1 for s in self.seqs)


def _trim_pair(a: list[int], b: list[int], budget: int) -> tuple[list[int], list[int]]:
    """Cut the end of the longer of ``a``, ``b`` (``a`` at a tie), token by token, until both fit
    ``budget``: each keeps all its tokens or at least ``budget // 2``."""
    n = min(len(a), max(budget - len(b), budget // 2))
    return a[:n], b[: budget - n]


def _multiple_choice(context, question, answers, budget):
    """The family's rule: cut the context from its end (then the question) to make room for
    the longest answer; an answer is cut only if it alone does not fit."""
    room = max(0, budget - max(len(a) for a in answers))
    over = max(0, len(context) + len(question) - room)  # cut from the context's end first
    cut = min(over, len(context))
    context, question = context[: len(context) - cut], question[: len(question) - over + cut]
    left = budget - len(context) - len(question)
    truncated = over > 0 or any(len(a) > left for a in answers)
    return context + question, [a[:left] for a in answers], truncated


def _halves(context, question, answers, n_ctx):
    """The released code's Story Cloze rule: every part at most ``n_ctx // 2 - 2`` tokens; a
    context that is cut keeps its end (the text nearest the answers), each answer its start."""
    cap = n_ctx // 2 - 2
    text = context + question
    truncated = len(text) > cap or max(len(a) for a in answers) > cap
    return text[max(0, len(text) - cap) :], [a[:cap] for a in answers], truncated


def encode_example(
    ex: Example, family: Family, tok, n_ctx: int, truncation: str = "family"
) -> Encoded:
    """The §3.3 token sequences of ``ex`` for a task of ``family``, each at most ``n_ctx``,
    cut by the ``truncation`` rule (``TaskSpec.truncation``: the family's, or "halves")."""
    s, d, c = tok.start, tok.delimiter, tok.classify
    if n_ctx < 4:
        raise ValueError(f"n_ctx={n_ctx} cannot hold _start_, _delimiter_, _classify_ and a token")
    if truncation not in TRUNCATIONS or (truncation == "halves" and family != "multiple_choice"):
        raise ValueError(f"truncation={truncation!r}: 'family', or 'halves' for multiple choice")
    if family == "classification":
        (text,) = ex.texts
        ids = tok.encode(text)
        seqs, truncated = [[s, *ids[: n_ctx - 2], c]], len(ids) > n_ctx - 2
    elif family in ("entailment", "similarity"):
        a0, b0 = tok.encode(ex.texts[0]), tok.encode(ex.texts[1])
        a, b = _trim_pair(a0, b0, n_ctx - 3)
        seqs, truncated = [[s, *a, d, *b, c]], len(a) + len(b) < len(a0) + len(b0)
        if family == "similarity":
            seqs.append([s, *b, d, *a, c])
    elif family == "multiple_choice":
        if not ex.answers:
            raise ValueError(f"example {ex.uid or ex.texts[:1]!r} has no answers")
        if truncation == "halves" and n_ctx < 6:
            raise ValueError(f"n_ctx={n_ctx}: halves of n_ctx // 2 - 2 tokens need n_ctx >= 6")
        parts = (*map(tok.encode, ex.texts), [tok.encode(a) for a in ex.answers])
        if truncation == "halves":
            text, answers, truncated = _halves(*parts, n_ctx)
        else:  # budget: n_ctx less _start_, _delimiter_, _classify_
            text, answers, truncated = _multiple_choice(*parts, n_ctx - 3)
        seqs = [[s, *text, d, *a, c] for a in answers]
    else:
        raise ValueError(f"unknown family {family!r}; choose one of {Family.__args__}")
    return Encoded(tuple(tuple(q) for q in seqs), ex.label, truncated)


def truncated_count(examples: Sequence[Example], task, tok, n_ctx: int) -> int:
    """How many of ``examples`` of ``task`` (a ``TaskSpec``) lose tokens to fit ``n_ctx``."""
    return sum(
        encode_example(ex, task.family, tok, n_ctx, task.truncation).truncated for ex in examples
    )


@dataclass
class Batch:
    """Right-padded sequences: ``ids`` and ``mask`` (the real tokens) (N, T) with N = examples
    x ``n_seq`` sequences each; ``extract`` (N,) the ``_classify_`` positions; ``labels``
    (examples,), or None for unlabelled data."""

    ids: torch.Tensor
    extract: torch.Tensor
    mask: torch.Tensor
    labels: torch.Tensor | None
    n_seq: int

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        tensors = {k: v for k, v in vars(self).items() if isinstance(v, torch.Tensor)}
        return replace(
            self, **{k: v.to(device, non_blocking=non_blocking) for k, v in tensors.items()}
        )


def padded_length(longest: int, multiple: int = 1, cap: int | None = None) -> int:
    """``longest`` rounded up to a multiple of ``multiple``, but not past ``cap`` (the context):
    a GPU then meets few distinct batch shapes (``runtime.pad_multiple``)."""
    rounded = -(-longest // multiple) * multiple
    return max(longest, min(rounded, cap)) if cap else rounded


def collate(
    items: Sequence[Encoded],
    pad_id: int = 0,
    pad_to: int | None = None,
    multiple: int = 1,
    cap: int | None = None,
) -> Batch:
    """Pad ``items``' sequences on the right to ``pad_to``, else to ``padded_length``. Padding
    comes after ``_classify_``, so the causal mask keeps it from changing anything before it."""
    n_seq = len(items[0].seqs)
    if any(len(e.seqs) != n_seq for e in items):
        raise ValueError("every example of a batch needs the same number of sequences (answers)")
    seqs = [q for e in items for q in e.seqs]
    lengths = np.fromiter(map(len, seqs), np.int64, len(seqs))
    longest = int(lengths.max())
    T = pad_to or padded_length(longest, multiple, cap)
    if longest > T:
        raise ValueError(f"a sequence of {longest} tokens does not fit pad_to={T}")
    real = np.arange(T) < lengths[:, None]  # the real tokens: up to _classify_
    ids = np.full(real.shape, pad_id, np.int64)
    ids[real] = np.concatenate(seqs, dtype=np.int64)
    ids, mask, extract = (torch.from_numpy(a) for a in (ids, real, lengths - 1))
    labels = [e.label for e in items]
    dtype = torch.float32 if any(isinstance(y, float) for y in labels) else torch.long
    labels = None if None in labels else torch.tensor(labels, dtype=dtype)
    return Batch(ids, extract, mask, labels, n_seq)


def batches(
    items: Sequence[Encoded],
    batch_size: int,
    rng: random.Random | None,
    length_grouped: bool = True,
    drop_last: bool = False,
) -> list[list[int]]:
    """Batches of indices: shuffled (with ``rng``); with ``drop_last`` only full batches (as the
    released code: the shuffled order's last ``len(items) % batch_size`` sit out the epoch);
    ``length_grouped``: each window of 50 batches sorted by length before it is cut, then the
    batches shuffled, so padding is small and the order still random."""
    idx = list(range(len(items)))
    if rng is not None:
        rng.shuffle(idx)
    if drop_last:
        idx = idx[: len(idx) - len(idx) % batch_size]
    if length_grouped:
        window, longest = 50 * batch_size, [max(map(len, e.seqs)) for e in items]
        idx = [
            i
            for w in range(0, len(idx), window)
            for i in sorted(idx[w : w + window], key=longest.__getitem__)
        ]
    out = [idx[i : i + batch_size] for i in range(0, len(idx), batch_size)]
    if rng is not None and length_grouped:
        rng.shuffle(out)
    return out


def token_strings(enc: Encoded, tok, longest: int | None = None) -> list[str]:
    """Each sequence as its token strings, for showing a transformation to a reader; a
    sequence of more than ``longest`` tokens shows its two ends around "..."."""
    out = []
    for q in enc.seqs:
        words = [tok.id_to_token(i) for i in q]
        if longest and len(words) > longest:
            words = words[: longest // 2] + ["..."] + words[len(words) - longest // 2 :]
        out.append(" ".join(words))
    return out
