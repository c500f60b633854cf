"""Device and precision choice, with the GPU's capabilities mocked (no GPU needed), and one
float16 update with loss scaling."""

import pytest
import torch

from gpt1lib.optim import train_step
from gpt1lib.runtime import FLOAT32, pick_device, pick_precision


@pytest.fixture
def gpu(monkeypatch):
    """A CUDA device of a chosen compute capability, as torch would report it."""

    def make(capability):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
        # counts emulation: True on a T4 too, so the choice must not rest on it
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)

    return make


def test_the_cpu_runs_float32(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pick_device() == torch.device("cpu")
    assert pick_precision("cpu") is FLOAT32
    assert pick_device("cpu:0") == torch.device("cpu", 0)


@pytest.mark.parametrize(
    "capability, name, dtype",
    [
        ((7, 5), "float16 autocast with loss scaling", torch.float16),  # T4
        ((7, 0), "float16 autocast with loss scaling", torch.float16),  # V100
        ((8, 0), "bf16 autocast", torch.bfloat16),  # A100
        ((8, 9), "bf16 autocast", torch.bfloat16),  # L4
        ((9, 0), "bf16 autocast", torch.bfloat16),  # H100
    ],
)
def test_a_gpu_gets_bf16_only_where_it_has_it(gpu, capability, name, dtype):
    gpu(capability)
    assert pick_device() == torch.device("cuda")
    p = pick_precision(pick_device())
    assert (p.name, p.dtype) == (name, dtype)
    assert p.loss_scaling == (dtype == torch.float16)
    assert pick_precision("cuda", mixed=False) is FLOAT32  # cfg.bf16=False: float32


def test_float32_has_no_scaler_and_a_no_op_autocast():
    assert FLOAT32.scaler(torch.device("cpu")) is None
    with FLOAT32.autocast("cpu"):
        y = torch.ones(2, 2) @ torch.ones(2, 2)
    assert y.dtype == torch.float32


def test_a_float16_step_scales_the_loss_and_skips_an_overflow():
    """train_step with a GradScaler: the update equals an unscaled one; a step whose gradient
    is inf is skipped and the scale halved."""
    torch.manual_seed(0)
    a, b = torch.nn.Linear(4, 1), torch.nn.Linear(4, 1)
    b.load_state_dict(a.state_dict())
    x = torch.randn(8, 4)
    opt_a = torch.optim.SGD(a.parameters(), lr=0.1)
    opt_b = torch.optim.SGD(b.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    train_step(a, opt_a, 0.1, [a(x).pow(2).mean()], 1.0, scaler)
    train_step(b, opt_b, 0.1, [b(x).pow(2).mean()], 1.0)
    assert torch.allclose(a.weight, b.weight, atol=1e-6)
    before = a.weight.detach().clone()
    train_step(a, opt_a, 0.1, [a(x).sum() * float("inf")], 1.0, scaler)
    assert torch.equal(a.weight, before) and scaler.get_scale() == 2.0**9
