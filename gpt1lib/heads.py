"""GPT-1's task heads (§3.2, §3.3) and layer transfer (§5), the model side of fine-tuning.

    P(y | x^1..x^m) = softmax(h_l^m W_y)

``h_l^m`` is the final block's state at each sequence's ``_classify_`` token. The only new
parameters are W_y and the three special tokens' embeddings. As in the released code,
classification and entailment read one extract vector; similarity ADDS those of its two orders;
multiple choice maps each answer's to one scalar, softmax over the answers, with ONE
classifier-dropout mask shared by an example's answers. STS-B's head and loss: ``loss``.

Layer transfer (§5): ``n_transfer = K`` copies the embeddings and the first K blocks (0: the
embeddings only, -1: nothing); the rest keeps its fresh N(0, 0.02) initialisation.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from .fast import FastGPT
from .loss import STSB_CLASSES
from .model import GPT
from .settings import REGRESSIONS
from .steps import seeded_build
from .tasks import TaskSpec
from .tokenizer import SPECIAL_TOKENS
from .transforms import Batch


class TaskModel(nn.Module):
    """GPT-1 (or the LSTM baseline) with the special tokens and the task head W_y of one task
    family."""

    def __init__(
        self,
        transformer: nn.Module,
        task: TaskSpec,
        clf_pdrop: float = 0.1,
        regression: str = "soft_labels",
    ) -> None:
        super().__init__()
        if transformer.config.n_special < len(SPECIAL_TOKENS):
            raise ValueError("the transformer has no special tokens: call add_special_tokens()")
        if regression not in REGRESSIONS:
            raise ValueError(f"regression={regression!r}: choose one of {REGRESSIONS}")
        self.transformer = transformer
        self.family = task.family
        # None for a task with classes or answers; else how its score is trained (STS-B)
        self.regression = regression if task.family == "similarity" and not task.labels else None
        n_out = {None: len(task.labels), "mse": 1, "soft_labels": STSB_CLASSES}[self.regression]
        n_out = 1 if task.family == "multiple_choice" else n_out
        self.head = nn.Linear(transformer.config.n_embd, n_out)  # W_y
        nn.init.normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)
        self.clf_pdrop = clf_pdrop

    def forward(self, batch: Batch, lm: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The task scores (examples, classes or answers; STS-B: (examples, 6) logits, or
        (examples,) with MSE), and with ``lm`` the auxiliary L1, the mean of each sequence's mean
        over its real tokens."""
        l1 = None
        if lm:
            out = self.transformer(
                batch.ids,
                targets=batch.ids[:, 1:],
                loss_mask=batch.mask[:, 1:],
                reduction="mean_of_sequences",
            )
            hidden, l1 = out.hidden, out.loss
        else:
            hidden, _ = self.transformer.hidden(batch.ids)
        rows = torch.arange(batch.ids.size(0), device=batch.ids.device)
        h = hidden[rows, batch.extract].view(-1, batch.n_seq, hidden.size(-1))
        if self.family == "similarity":
            h = h.sum(1)  # the two orders' extract vectors, added
        elif self.family != "multiple_choice":
            h = h[:, 0]
        if self.training and self.clf_pdrop > 0:
            # one mask per example: shared by its answers in multiple choice
            shape = (h.size(0), 1, h.size(-1)) if h.dim() == 3 else h.shape
            keep = torch.full(shape, 1 - self.clf_pdrop, device=h.device, dtype=h.dtype)
            h = h * torch.bernoulli(keep) / (1 - self.clf_pdrop)
        scores = self.head(h)
        if self.family == "multiple_choice" or self.regression == "mse":
            scores = scores.squeeze(-1)
        return scores, l1


def transfer(src, dst, n_transfer: int | None) -> list[str]:
    """Copy the embeddings and the first ``n_transfer`` blocks (None: all; -1: not even the
    embeddings) of ``src`` into ``dst``; returns the names copied."""
    if n_transfer is None:
        n_transfer = src.config.n_layer
    if n_transfer < -1 or n_transfer > src.config.n_layer:
        raise ValueError(
            f"n_transfer={n_transfer}: use -1 (nothing), 0 (embeddings only) up "
            f"to {src.config.n_layer} (every block)"
        )
    if n_transfer == -1:
        return []
    copied = []
    with torch.no_grad():
        rows = src.tokens_embed.weight.size(0)
        dst.tokens_embed.weight[:rows] = src.tokens_embed.weight
        copied.append("tokens_embed.weight")
        if hasattr(src, "positions_embed"):  # the LSTM has none
            n_pos = min(src.config.n_ctx, dst.config.n_ctx)
            dst.positions_embed.weight[:n_pos] = src.positions_embed.weight[:n_pos]
            copied.append("positions_embed.weight")
        for i in range(n_transfer):
            dst.h[i].load_state_dict(src.h[i].state_dict())
            copied += [f"h.{i}.{k}" for k in src.h[i].state_dict()]
    return copied


def build_task_model(pretrained, task: TaskSpec, protocol) -> TaskModel:
    """A fresh model of ``pretrained``'s kind (GPT-1 run as ``FastGPT``, or the LSTM) with the
    special tokens, ``protocol.n_transfer`` layers of ``pretrained`` (a ``FinetuneConfig``) and a
    new head W_y for ``task``."""
    cfg = pretrained.config
    n_special = max(cfg.n_special, len(SPECIAL_TOKENS))
    n_ctx = min(cfg.n_ctx, protocol.max_len or cfg.n_ctx)
    cfg = replace(cfg, n_special=n_special, n_ctx=n_ctx)
    kind = FastGPT if isinstance(pretrained, GPT) else type(pretrained)
    fresh = seeded_build(kind, cfg, protocol.seed)
    transfer(pretrained, fresh, protocol.n_transfer)
    return TaskModel(fresh, task, protocol.clf_pdrop, protocol.regression)
