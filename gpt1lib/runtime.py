"""Where and how a run runs: the seed, the device and its precision."""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch


def seed_everything(seed: int) -> torch.Generator:
    """Seed python, numpy and torch (all devices); returns a torch generator with that seed."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def pick_device(device: str | None = None) -> torch.device:
    """``device`` if given, else CUDA where available, else the CPU."""
    if device:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def synchronize(device: torch.device) -> None:
    """Wait for the work queued on ``device`` (CUDA runs asynchronously; the CPU does not)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass(frozen=True)
class Precision:
    """How a loop computes on its device: float32, or autocast to ``dtype`` (float16 with loss
    scaling, since its narrow range lets small gradients underflow to 0)."""

    dtype: torch.dtype | None  # the autocast dtype; None: float32 throughout
    name: str

    @property
    def loss_scaling(self) -> bool:
        return self.dtype == torch.float16

    def autocast(self, device_type: str):
        """The context a forward pass runs in (a no-op for float32)."""
        return torch.autocast(device_type, self.dtype or torch.bfloat16, enabled=bool(self.dtype))

    def scaler(self, device: torch.device) -> torch.amp.GradScaler | None:
        """A ``GradScaler`` for float16, else None (bf16 and float32 need no loss scaling)."""
        return torch.amp.GradScaler(device.type) if self.loss_scaling else None


FLOAT32 = Precision(None, "float32")


def pick_precision(device: torch.device | str, mixed: bool = True) -> Precision:
    """The precision of a run on ``device``: float32 on a CPU or with ``mixed=False``; on a GPU
    bf16 autocast where it computes bf16 natively (compute capability 8.0 and up: A100, H100,
    L4, RTX 30xx), else float16 autocast with loss scaling (the T4 and V100, compute capability
    7.x, have no bf16 units; ``torch.cuda.is_bf16_supported()`` answers True there by default
    because it counts emulation, which runs slower than float32)."""
    device = torch.device(device)
    if not mixed or device.type != "cuda":
        return FLOAT32
    if torch.cuda.get_device_capability(device)[0] >= 8:
        return Precision(torch.bfloat16, "bf16 autocast")
    return Precision(torch.float16, "float16 autocast with loss scaling")
