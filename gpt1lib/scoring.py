"""Scoring a fine-tuned model: examples encoded once, predictions in length-grouped batches,
and the task's metrics on them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .heads import TaskModel
from .loss import regression_predictions
from .runtime import FLOAT32, Precision, attention_backends, fitting, pad_multiple
from .tasks import Example, TaskSpec, compute_metrics
from .tokenizer import Remembered
from .transforms import Encoded, batches, collate, encode_example


class _BatchEncoded(Remembered):
    """``tok`` whose ``encode`` answers from one ``encode_batch`` of every distinct text of
    ``examples`` (in parallel, and a RACE article once for its questions): the same ids."""

    def __init__(self, tok, examples: Sequence[Example]) -> None:
        super().__init__(tok)
        texts = list(dict.fromkeys(t for ex in examples for t in (*ex.texts, *ex.answers)))
        self.ids = dict(zip(texts, tok.encode_batch(texts), strict=True))


#: Encodings made in this process, by (tokenizer, task, n_ctx, examples), with their tokens (a
#: plan encodes the same examples many times). Kept: the last 8, and older ones while all hold
#: <= ``KEPT_TOKENS`` (about 150 MB).
_ENCODED: dict[tuple, tuple[tuple[Encoded, ...], int]] = {}
KEPT_TOKENS = 4_000_000


def encode_all(examples: Sequence[Example], task: TaskSpec, tok, n_ctx: int) -> list[Encoded]:
    """Every example's token sequences (answer counts checked against the task first)."""
    fingerprint = getattr(tok, "fingerprint", None)  # a stand-in tokenizer may have none
    key = (fingerprint(), task, n_ctx, tuple(examples)) if fingerprint else None
    try:
        if key in _ENCODED:
            return list(_ENCODED[key][0])
    except TypeError:  # an example built with lists: not kept
        key = None
    out = []
    if hasattr(tok, "encode_batch"):  # GPT1Tokenizer: every distinct text in one call
        tok = _BatchEncoded(tok, examples)
    for ex in examples:
        n = task.n_answers
        if task.family == "multiple_choice" and n and len(ex.answers) != n:
            raise ValueError(
                f"{task.name} example {ex.uid!r} has {len(ex.answers)} answers; the task has {n}"
            )
        out.append(encode_example(ex, task.family, tok, n_ctx, task.truncation))
    if key is not None:
        _ENCODED[key] = (tuple(out), sum(len(s) for e in out for s in e.seqs))
        while len(_ENCODED) > 8 and sum(n for _, n in _ENCODED.values()) > KEPT_TOKENS:
            _ENCODED.pop(next(iter(_ENCODED)))
    return out


@torch.no_grad()
def predict(
    model: TaskModel,
    items: Sequence[Encoded],
    batch_size: int = 64,
    device: torch.device | None = None,
    precision: Precision = FLOAT32,
    multiple: int | None = None,
) -> np.ndarray:
    """Scores for ``items`` in their order (inference mode, length-grouped batches, lengths
    rounded up to ``multiple``: None, ``runtime.pad_multiple``'s for the device)."""
    device = device or next(model.parameters()).device
    multiple, cap = pad_multiple(device, multiple), model.transformer.config.n_ctx
    was = model.training
    model.eval()
    out: list = [None] * len(items)

    def score(parts: list[list[int]]) -> None:
        for b in parts:
            batch = collate([items[i] for i in b], multiple=multiple, cap=cap).to(device)
            with precision.autocast(device.type), attention_backends(device):
                scores = model(batch, lm=False)[0].float().cpu()
            for i, v in zip(b, scores, strict=True):
                out[i] = v.numpy()

    def alone(b: list[int]) -> str:
        n = max(len(s) for i in b for s in items[i].seqs)
        return (
            f"scoring one example of up to {n} tokens a sequence runs out of GPU memory even "
            "alone: lower FinetuneConfig.max_len"
        )

    for b in batches(items, batch_size, None):
        fitting(b, score, alone)
    model.train(was)
    return np.stack(out)


def evaluate(
    model: TaskModel, task: TaskSpec, items: Sequence[Encoded], batch_size=64, precision=FLOAT32
):
    """The task's metrics on labelled ``items``, and the predictions (a class or answer index,
    or STS-B's score) and labels they were computed from, on the model's device."""
    scores = predict(model, items, batch_size, precision=precision)
    if model.regression:  # STS-B: the predicted score
        preds = regression_predictions(torch.from_numpy(scores), model.regression).numpy()
    else:
        preds = scores.argmax(-1)
    labels = np.array([e.label for e in items])
    return compute_metrics(task, preds, labels), preds, labels
