"""Where and how a run runs: the scale switch, the seed, the device.

Every chapter has a ``scale`` parameter. ``resolve_scale`` gives it its value: the parameter if
set (papermill ``-p scale small``), else the ``GPT1_SCALE`` environment variable (what CI and
``make`` set), else ``small`` where a GPU is at hand (a Colab user gets a real run) and ``smoke``
where not (seconds on a CPU).
"""

from __future__ import annotations

import os
import random

import numpy as np
import torch

#: smoke: seconds on a CPU, embedded data. cpu: real data, the whole book in about 1.5 hours on
#: two CPU cores (a 4-block model, subsampled tasks). small: hours on one GPU, real data.
#: paper: the paper's configuration.
SCALES = ("smoke", "cpu", "small", "paper")
#: The model preset each scale uses.
MODEL_PRESET = {"smoke": "tiny", "cpu": "mini", "small": "small", "paper": "paper"}


def resolve_scale(scale: str | None = None) -> str:
    """The scale to run at: ``scale``, else ``$GPT1_SCALE``, else by the hardware."""
    value = (
        scale or os.environ.get("GPT1_SCALE") or ("small" if torch.cuda.is_available() else "smoke")
    )
    if value not in SCALES:
        raise ValueError(
            f"unknown scale {value!r} (from the scale parameter or GPT1_SCALE); "
            f"choose one of {SCALES}"
        )
    return value


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
