"""Speed paths beside the model: ``FastGPT`` is ``model.GPT`` computed more cheaply.

The same parameters, function and names (it loads and saves what a GPT does); only how a step
is computed differs, each path held equal to the paper's model by ``tests/test_speed_paths.py``:
L1 from the hidden states (``loss.fused_lm_loss``) or, where ``loss_path = "logits"``, from the
full logits (compiled on a GPU the faster); on the CPU cheaper dropout masks and attention
written out to use them; optionally W_e padded with zero rows to a multiple of ``pad_vocab_to``
(64 suits tensor cores); ``compiled_regions``, compiled block by block. The training loops run
FastGPT; a reader's model is ``model.GPT``.
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
from torch import nn

from .loss import fused_lm_loss
from .model import GPT, CausalSelfAttention, GPTConfig, Reduction


def head_matrix(W_e: torch.Tensor, rows: int) -> torch.Tensor:
    """The output layer W_e with zero rows appended up to ``rows`` (``pad_vocab_to``): the same
    function, a matmul whose width suits the hardware. Without padding, W_e itself."""
    pad = rows - W_e.size(0)
    return F.pad(W_e, (0, 0, 0, pad)) if pad > 0 else W_e


def _cpu_eager(x: torch.Tensor) -> bool:
    """Whether ``x`` is on the CPU outside ``torch.compile`` (which fuses dropout itself)."""
    return x.device.type == "cpu" and not torch.compiler.is_compiling()


def dropout(x: torch.Tensor, p: float, training: bool, rows: int | None = None) -> torch.Tensor:
    """``F.dropout(x, p, training)``, then zero rows appended up to ``rows`` (for a padded W_e).

    On the CPU (eager) the mask comes from 16-bit uniform integers, in about half of
    ``F.dropout``'s time: an element is dropped with probability round(65536 p) / 65536 and the
    kept ones scaled by 1 / (1 - that), so the expectation is still x.
    """
    rows = x.size(0) if rows is None else rows
    if not training or p == 0:
        return head_matrix(x, rows)
    if p >= 1:
        return head_matrix(torch.zeros_like(x), rows)
    if _cpu_eager(x):
        return _CPUDropout.apply(x, p, rows)
    return head_matrix(F.dropout(x, p, True), rows)


class _CPUDropout(torch.autograd.Function):
    """Dropout with a mask of 16-bit uniform integers; the output may have extra zero rows."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, p: float, rows: int):
        k = round(p * 65536)  # dropped values of the 65536 an int16 takes
        n = x.numel()
        bits = torch.randint(-(2**31), 2**31, ((n + 1) // 2,), dtype=torch.int32)
        keep = (bits.view(torch.int16)[:n] >= k - 32768).view(x.shape)
        scale = 65536 / (65536 - k)
        if rows == x.size(0):
            out = torch.where(keep, x, 0.0).mul_(scale)
        else:
            out = x.new_empty((rows, *x.shape[1:]))
            torch.where(keep, x, x.new_zeros(()), out=out[: x.size(0)]).mul_(scale)
            out[x.size(0) :].zero_()
        ctx.save_for_backward(keep)
        ctx.scale, ctx.n = scale, x.size(0)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (keep,) = ctx.saved_tensors
        return torch.where(keep, grad[: ctx.n], 0.0).mul_(ctx.scale), None, None


class FastDropout(nn.Dropout):
    """``nn.Dropout`` with ``dropout``'s cheaper mask on the CPU."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)


class FastAttention(CausalSelfAttention):
    """Attention written out on the CPU when it drops, so that it can use the cheaper mask."""

    def attend(self, q, k, v, p: float) -> torch.Tensor:
        if p == 0 or not _cpu_eager(q):
            return super().attend(q, k, v, p)
        T = q.size(-2)
        att = (q @ k.transpose(-2, -1)).mul_(1.0 / math.sqrt(q.size(-1)))
        causal = torch.ones(T, T, dtype=torch.bool, device=q.device).triu_(1)
        att = att.masked_fill_(causal, float("-inf")).softmax(dim=-1)
        return dropout(att, p, True) @ v


class FastGPT(GPT):
    """``GPT`` with the speed paths of this module; ``pad_vocab_to`` 1 means no padding."""

    def __init__(self, cfg: GPTConfig, pad_vocab_to: int = 1) -> None:
        super().__init__(cfg)  # the same modules, initialised from the same random draws
        if pad_vocab_to < 1:
            raise ValueError(f"pad_vocab_to={pad_vocab_to}: use 1 (no padding) or e.g. 64")
        self.pad_vocab_to = pad_vocab_to
        self.loss_path = "fused"  # or "logits": L1 from the full logits (not state: a setting)
        self.compiled_loss = None  # GPT.lm_loss compiled, inside ``compiled_regions``
        for m in self.modules():  # behaviour-only subclasses: no new state
            if type(m) is nn.Dropout:
                m.__class__ = FastDropout
            elif type(m) is CausalSelfAttention:
                m.__class__ = FastAttention

    def embed(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cfg, T = self.config, idx.size(1)
        W_e, W_p = self.tokens_embed.weight, self.positions_embed.weight
        # padded rows only where they pay: on the CPU only for training (the backward pass
        # pays the copy back)
        rows = cfg.n_tokens
        if self.pad_vocab_to > 1 and (torch.is_grad_enabled() or not _cpu_eager(idx)):
            rows = -(-cfg.n_tokens // self.pad_vocab_to) * self.pad_vocab_to
        if cfg.embd_dropout == "matrix":
            W_out = dropout(W_e, self.drop.p, self.training, rows)
            return F.embedding(idx, W_out[: cfg.n_tokens]) + self.drop(W_p)[:T], W_out
        return self.drop(F.embedding(idx, W_e) + W_p[:T]), head_matrix(W_e, rows)

    def logits(self, h: torch.Tensor, W_out: torch.Tensor) -> torch.Tensor:
        return (h @ W_out.t())[..., : self.config.n_tokens]  # the padding is never a token

    def lm_loss(self, h, W_out, targets, loss_mask, reduction: Reduction) -> torch.Tensor:
        if self.loss_path == "logits":
            loss = self.compiled_loss or GPT.lm_loss
            return loss(self, h, W_out, targets, loss_mask, reduction)
        return fused_lm_loss(h, W_out, targets, loss_mask, reduction, self.config.n_tokens)

    @contextlib.contextmanager
    def compiled_regions(self):
        """Inside the ``with``, each block run as one graph compiled once for all of them, and L1
        from the logits another; eager again after it."""
        for block in self.h:
            block.compile()
        self.compiled_loss = torch.compile(GPT.lm_loss)
        try:
            yield self
        finally:
            for block in self.h:
                block._compiled_call_impl = None  # what nn.Module.compile set
            self.compiled_loss = None
