"""The FLOPs of a training step, the peaks they are measured against, and MFU.

FLOPs, the model FLOPs of PaLM (Chowdhery et al. 2022, appendix B), no recomputation counted:

    per token, forward + backward = 6 * N + 12 * n_layer * T * d

N = the blocks' parameters plus n_tokens * d for the tied output matmul (116,141,568 at the
paper's preset; the embedding lookups do no matmul); 12 * n_layer * T * d is attention's QK^T and
AV, the causal mask's zeros counted as PaLM does; the real vocabulary counts, not the padded one.

MFU = FLOPs per token x tokens per second / peak: on CUDA the data-sheet dense bf16 rate
(``PEAK_TFLOPS``), else a measured bf16 matmul; on the CPU a measured float32 matmul.
"""

from __future__ import annotations

import torch

from .model import GPTConfig
from .runtime import timed

#: Dense bf16 tensor-core peaks in TFLOP/s (fp16 for the T4, which has no bf16), from the
#: vendors' data sheets, without sparsity; matched in order against the CUDA device's name.
PEAK_TFLOPS: tuple[tuple[str, float], ...] = (
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.0),  # SXM: the name reads "NVIDIA H100 80GB HBM3"
    ("H200", 989.0),
    ("A100", 312.0),
    ("L4", 121.0),
    ("T4", 65.0),
)


def matmul_params(cfg: GPTConfig) -> int:
    """N of the FLOPs formula: the blocks' parameters plus the output matmul's n_tokens * d."""
    d = cfg.n_embd
    per_block = (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d) + 4 * d
    return cfg.n_layer * per_block + cfg.n_tokens * d


def model_flops_per_token(cfg: GPTConfig, seq: int) -> float:
    """Training FLOPs per token: 6 * N + 12 * n_layer * seq * n_embd (see the module doc)."""
    return 6.0 * matmul_params(cfg) + 12.0 * cfg.n_layer * seq * cfg.n_embd


def mfu(flops_per_token: float, tokens_per_s: float, peak_tflops: float) -> float:
    """Model FLOPs utilisation: the FLOPs done per second over the peak (a fraction)."""
    return flops_per_token * tokens_per_s / (peak_tflops * 1e12)


def measured_matmul_tflops(
    device: torch.device, dtype: torch.dtype = torch.float32, n: int = 2048, repeats: int = 5
) -> float:
    """The best rate of an n x n x n ``torch.matmul`` in ``dtype`` on ``device``, in TFLOP/s."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    a @ b  # warm-up
    best = min(timed(lambda: a @ b, device)[0] for _ in range(repeats))
    return 2 * n**3 / best / 1e12


def table_peak(device_name: str) -> tuple[float, str] | None:
    """The data-sheet peak of a CUDA device by name (``PEAK_TFLOPS``), or None if unknown."""
    for key, tflops in PEAK_TFLOPS:
        if key in device_name:
            kind = "fp16" if key == "T4" else "bf16"
            return tflops, f"{device_name}: dense {kind} data-sheet peak"
    return None


def peak_tflops(device: torch.device) -> tuple[float, str]:
    """The peak that MFU divides by, in TFLOP/s, and where it comes from."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        return table_peak(name) or (
            measured_matmul_tflops(device, torch.bfloat16, 8192),
            f"{name}: measured bf16 matmul, 8192^3 (not in PEAK_TFLOPS)",
        )
    return measured_matmul_tflops(device), "measured float32 matmul, 2048^3"
