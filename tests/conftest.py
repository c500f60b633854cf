"""Shared test set-up: nothing waits on the network, and the shared data is optional."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("GPT1_SCALE", "smoke")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    """../shared/data beside the checkout; tests that need it skip where it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is not here")
    return SHARED_DATA


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A tiny pre-trained run that a module's bad-input cases share (tests/bad_inputs.py)."""
    from bad_inputs import make_base  # after the offline settings above

    return make_base(tmp_path_factory.mktemp("run"))


@pytest.fixture
def c(base, tmp_path, monkeypatch, capsys):
    """One bad-input case's context: the shared run, a fresh folder, the captured output."""
    from bad_inputs import context

    return context(base, tmp_path, monkeypatch, capsys)
