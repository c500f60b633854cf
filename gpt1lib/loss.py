"""The losses of training: L1 from the hidden states without the full logits
(``fused_lm_loss``), and the fine-tuning objective of §3.2, L3 = L2 + lambda * L1 (``task_loss``).

STS-B's gold label is a score in [0, 5]. The paper does not say how it was trained; the
released code defines ``stsb_label_encoding`` (utils.py), the soft labels of Tai, Socher &
Manning (2015) over 6 classes, and uses it for STS-B's training labels (train.py). That is the
default (``regression="soft_labels"``): 6 logits, Tai et al.'s KL divergence from the soft label
to the softmax, and their prediction, the softmax's expected score (the released code keeps
neither). ``regression="mse"``: one output, the squared error to the gold score.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F

from .runtime import capturing

#: Elements of one chunk of logits in ``fused_lm_loss`` (128 MB in float32): the loss never
#: holds more than two such chunks at once, whatever the batch.
LOSS_CHUNK_ELEMENTS = 2**25


class _LinearCrossEntropy(torch.autograd.Function):
    """sum_i w_i * CE(h_i W^T, t_i) over rows i, the logits made and dropped one chunk at a time.

    The gradients are computed in the forward pass, chunk by chunk, so the backward pass only
    scales them: the full logits and their gradient never exist. Rows of W past ``n_valid`` are
    padding: logits -inf, probability 0, no gradient.
    """

    @staticmethod
    def forward(ctx, h, W, targets, weights, n_valid: int, chunk: int, grads: bool):
        loss = torch.zeros((), device=h.device, dtype=torch.float32)
        grad_h = torch.empty_like(h) if grads else None
        grad_W = torch.empty(W.shape, device=W.device, dtype=torch.float32) if grads else None
        if grads and h.size(0) == 0:
            grad_W.zero_()
        with torch.autocast(h.device.type, enabled=False):
            for s in range(0, h.size(0), chunk):
                h_c, t_c, w_c = h[s : s + chunk], targets[s : s + chunk], weights[s : s + chunk]
                logits = h_c @ W.t()  # (rows, padded vocabulary)
                logits[:, n_valid:] = float("-inf")  # the padding: probability 0, gradient 0
                logp = torch.log_softmax(logits.float(), dim=1)
                del logits
                loss += -(logp.gather(1, t_c[:, None]).squeeze(1) * w_c).sum()
                if not grads:
                    continue
                g = logp.exp_().mul_(w_c[:, None])  # d loss / d logits = w * (softmax - one_hot)
                g[torch.arange(g.size(0), device=g.device), t_c] -= w_c
                g = g.to(W.dtype)
                torch.mm(g, W, out=grad_h[s : s + chunk])
                if W.dtype != torch.float32:
                    part = (g.t() @ h_c).float()
                    grad_W.copy_(part) if s == 0 else grad_W.add_(part)
                elif s == 0:
                    torch.mm(g.t(), h_c, out=grad_W)
                else:
                    grad_W.addmm_(g.t(), h_c)
        ctx.grads = (grad_h, grad_W)
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        grad_h, grad_W = ctx.grads
        ctx.grads = None
        if grad_h is None:
            raise RuntimeError("fused_lm_loss was computed without gradients (under no_grad)")
        grad_W = grad_W.mul_(grad_loss).to(grad_h.dtype)
        return grad_h.mul_(grad_loss.to(grad_h.dtype)), grad_W, None, None, None, None, None


@torch.compiler.disable
def fused_lm_loss(
    hidden: torch.Tensor,
    W: torch.Tensor,
    targets: torch.Tensor,
    mask: torch.Tensor | None = None,
    reduction: Literal["mean", "mean_of_sequences"] = "mean",
    n_tokens: int | None = None,
) -> torch.Tensor:
    """L1 from the final hidden states, equal to ``lm_loss(hidden @ W.T, targets, mask)``
    without the full (B, T, V) logits.

    ``hidden`` (B, T, d); ``W`` (V', d) the output layer, perhaps padded (``head_matrix``), its
    first ``n_tokens`` rows the tokens; ``targets`` (B, T'), T' <= T, the logits at t predicting
    ``targets[:, t]``; ``mask`` (B, T') the targets that count. ``reduction``: "mean" over the
    counted targets, or "mean_of_sequences" (the fine-tuning L1 of §3.2). Under autocast the
    matmuls run in the autocast dtype, the log-softmax in float32. It always runs eagerly, also
    in a compiled model: compiled on CUDA, the gradients of its forward pass came out as zeros.
    """
    B, Tt = targets.shape
    if hidden.dim() != 3 or hidden.size(0) != B or hidden.size(1) < Tt:
        raise ValueError(
            f"targets {tuple(targets.shape)} do not fit hidden states {tuple(hidden.shape)}: "
            "pass (B, T') targets with T' <= T, e.g. idx[:, 1:] for hidden states of idx[:, :-1]"
        )
    if mask is not None and mask.shape != targets.shape:
        raise ValueError(f"mask {tuple(mask.shape)} must have the targets' shape {(B, Tt)}")
    if reduction not in ("mean", "mean_of_sequences"):
        raise ValueError(f"reduction={reduction!r}: use 'mean' or 'mean_of_sequences'")
    n_tokens = W.size(0) if n_tokens is None else n_tokens
    h = hidden[:, :Tt].reshape(B * Tt, -1)
    t = targets.reshape(-1)
    m = torch.ones_like(targets, dtype=torch.float32) if mask is None else mask.float()
    if reduction == "mean":
        w = m / m.sum().clamp_min(1)
    else:
        w = m / m.sum(1, keepdim=True).clamp_min(1) / B
    w = w.reshape(-1)
    if mask is not None and not capturing():
        # logits only where a loss is needed; a CUDA graph has fixed shapes, so a captured
        # step scores every row, the masked ones with weight 0 (``steps``): the same loss
        keep = mask.reshape(-1).nonzero().squeeze(1)
        h, t, w = h[keep], t[keep], w[keep]
    device_type = hidden.device.type
    if torch.is_autocast_enabled(device_type):
        dtype = torch.get_autocast_dtype(device_type)
        h, W = h.to(dtype), W.to(dtype)
    chunk = max(1, LOSS_CHUNK_ELEMENTS // W.size(0))
    grads = torch.is_grad_enabled() and (h.requires_grad or W.requires_grad)
    return _LinearCrossEntropy.apply(h, W, t, w, n_tokens, chunk, grads)


#: Classes of STS-B's soft labels: the scores 0, 1, ..., 5 (utils.py's ``nclass=6``).
STSB_CLASSES = 6


def soft_labels(labels: torch.Tensor, n_class: int = STSB_CLASSES) -> torch.Tensor:
    """The released code's ``stsb_label_encoding``: each gold score y in [0, n_class - 1] puts
    ``floor(y) + 1 - y`` on class floor(y) and ``y - floor(y)`` on the next, so that the
    expected class is y. (examples,) -> (examples, n_class)."""
    y = labels.detach().float()
    # not in a capture (it cannot wait for the GPU): each shape's first, eager update checks
    # its batch, and STS-B's reader checks every score
    if y.numel() and not capturing() and not (0 <= y.min() and y.max() <= n_class - 1):
        raise ValueError(f"scores must lie in [0, {n_class - 1}]; got {y.min()}..{y.max()}")
    low = y.floor()
    out = torch.zeros(y.numel(), n_class, device=y.device)
    out.scatter_(1, low.long()[:, None], (1 + low - y)[:, None])
    up = (low.long() + 1).clamp(max=n_class - 1)  # y = 5: weight 0 on the (clamped) next class
    return out.scatter_add_(1, up[:, None], (y - low)[:, None])


def regression_predictions(scores: torch.Tensor, regression: str) -> torch.Tensor:
    """The predicted score of a regression head's outputs: the expected class under the
    softmax (soft labels, (examples, classes)) or the output itself (mse, (examples,))."""
    if regression == "mse":
        return scores.float()
    p = scores.float().softmax(-1)
    return p @ torch.arange(p.size(-1), dtype=p.dtype, device=p.device)


def task_loss(
    scores: torch.Tensor,
    labels: torch.Tensor,
    regression: str | None,
    l1: torch.Tensor | None,
    lm_coef: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """L3 as a loss to minimise: (total, task part L2, LM part L1), each a mean over the batch.

    L2: the cross-entropy of ``scores`` against ``labels``, or for a ``regression`` head (STS-B)
    the soft labels' KL divergence or the squared error. ``l1``: the auxiliary LM loss (None, or
    ``lm_coef`` 0: L2 alone).
    """
    if regression == "soft_labels":
        target = soft_labels(labels, scores.size(-1))
        l2 = F.kl_div(scores.float().log_softmax(-1), target, reduction="batchmean")
    elif regression == "mse":
        l2 = F.mse_loss(scores.float(), labels.float())
    else:
        l2 = F.cross_entropy(scores.float(), labels)
    if lm_coef == 0 or l1 is None:
        return l2, l2, torch.zeros_like(l2)
    return l2 + lm_coef * l1, l2, l1


def prior_loss(labels, regression: str | None, n_answers: int | None = None) -> float:
    """The task loss L2 of the best CONSTANT prediction on ``labels`` (the label prior alone):
    the entropy of the classes' shares; multiple choice: log of the answers; soft labels: the
    mean KL divergence to their mean; MSE: the variance of the scores."""
    y = torch.as_tensor(labels, dtype=torch.float32)
    if n_answers:
        return math.log(n_answers)
    if regression == "mse":
        return float(y.var(unbiased=False))
    if regression == "soft_labels":
        p = soft_labels(y)
        q = p.mean(0)
        return float((p * (p.clamp_min(1e-12).log() - q.clamp_min(1e-12).log())).sum(1).mean())
    shares = torch.bincount(y.long()).float() / len(y)
    shares = shares[shares > 0]
    return float(-(shares * shares.log()).sum())
