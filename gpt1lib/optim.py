"""The optimiser, the learning-rate schedules, and the one training step every loop takes.

AdamW (the released code's β 0.9/0.999, ε 1e-8) with decoupled weight decay (the paper's
"modified L2 regularization") on every weight of rank >= 2, none on biases and gains; gradients
clipped to one global norm (the released code's). Pre-training warms up linearly and anneals on
a cosine to 0 (§4.1). Fine-tuning's rate of update ``t`` (from 0: the first has rate 0) is the
released code's ``lr * warmup_linear(t / total, 0.002)``, ``total`` counting full batches only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch


def make_optimizer(
    model: torch.nn.Module,
    lr: float,
    weight_decay: float = 0.01,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
    graphs: bool = False,
) -> torch.optim.AdamW:
    """AdamW with decay on parameters of rank >= 2, fused where PyTorch has it for the device.
    With ``graphs`` (``steps.GraphedSteps``) the rate is a tensor a replayed step reads, and on
    CUDA the step can be captured."""
    params = list(model.parameters())
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    device = params[0].device
    fused = True  # one kernel for all parameters, where PyTorch has it for the device
    try:
        torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1, device=device))], fused=True)
    except (RuntimeError, ValueError):
        fused = None
    capturable = graphs and device.type == "cuda"
    lr = torch.tensor(lr, device=device) if graphs else lr
    return torch.optim.AdamW(
        groups, lr=lr, betas=betas, eps=eps, fused=fused, capturable=capturable
    )


def cosine_lr(step: int, max_lr: float, warmup_steps: int, total_steps: int) -> float:
    """Pre-training's rate for update ``step + 1``: linear warm-up from 0, then cosine to 0."""
    t = step + 1
    if t <= warmup_steps:
        return max_lr * t / warmup_steps
    progress = (t - warmup_steps) / max(1, total_steps - warmup_steps)
    return max_lr * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def warmup_linear(x: float, warmup: float) -> float:
    """Fine-tuning's rate factor at fraction ``x`` (from 0) of training, the released code's:
    ``(x / warmup if x <= warmup else 1) * (1 - x)``: 0 at the first update, a linear rise over
    the warm-up, linear decay to 0 (``warmup`` 0: no warm-up)."""
    rise = x / warmup if 0 < warmup and x <= warmup else 1.0
    return rise * max(0.0, 1.0 - x)


def set_lr(opt: torch.optim.Optimizer, lr: float) -> None:
    """Every group's rate to ``lr``, in place where it is the tensor a replayed step reads."""
    for g in opt.param_groups:
        g["lr"] = g["lr"].fill_(lr) if torch.is_tensor(g["lr"]) else lr


def train_step(
    model: torch.nn.Module,
    opt: torch.optim.Optimizer,
    lr: float,
    losses: Iterable[torch.Tensor],
    grad_clip: float = 1.0,
    scaler: torch.amp.GradScaler | None = None,
    check: bool = False,
) -> torch.Tensor:
    """One update at rate ``lr``: back-propagate each loss ``losses`` yields (micro-batches whose
    gradients add up), clip, step, and clear the gradients; returns the summed loss, detached.
    A float16 ``scaler`` scales the losses and unscales the gradients before the clip. With
    ``check`` (a loop's first update), gradients all zero are an error: a model that would not
    learn."""
    set_lr(opt, lr)
    total = None
    for loss in losses:
        (loss if scaler is None else scaler.scale(loss)).backward()
        total = loss.detach() if total is None else total + loss.detach()
    if scaler is not None:
        scaler.unscale_(opt)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    if check and norm.item() == 0:
        raise RuntimeError(
            "every gradient of the first update is zero, so the model would not learn: a loss "
            "that does not depend on the parameters, or a compiled graph that lost its gradients "
            "(run once without compile=True to tell which)"
        )
    if scaler is None:
        opt.step()
    else:
        scaler.step(opt)
        scaler.update()
    opt.zero_grad(set_to_none=True)
    return total
