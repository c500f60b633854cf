"""Files a run writes: atomically, and read back with a clear error when they are not right.

Every file is written beside its place and renamed onto it (``atomic_path``), so that a crash
leaves the old file or the new one, never half of one. A model is ``model.safetensors`` plus
``model.json`` (its class and config); a resumable checkpoint is a folder, written under a
temporary name and renamed into place, with everything a pre-training run needs to go on exactly
where it stopped: the model, AdamW's moments, the RNG states, the data position, the run's config
and the tokenizer."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from .lstm import LSTMLM, LSTMConfig
from .model import GPT, GPTConfig

MODEL_FILE, MODEL_META = "model.safetensors", "model.json"
#: The model classes a ``model.json`` may name (a ``fast.FastGPT`` is saved as a GPT).
ARCHITECTURES: dict[str, tuple[type, type]] = {
    "GPT": (GPT, GPTConfig),
    "LSTMLM": (LSTMLM, LSTMConfig),
}


class CheckpointError(ValueError):
    """A checkpoint folder is not a checkpoint, or does not belong to this run."""


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; when the block ends without an error it is
    synced and renamed onto ``path``, else removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        yield tmp
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    finally:
        tmp.unlink(missing_ok=True)


def write_json(path: str | os.PathLike, obj) -> None:
    """``obj`` as indented JSON at ``path``, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=1))


def _write_tensors(path: Path, tensors: dict) -> None:
    """``tensors`` (on any device) as a safetensors file at ``path``, atomically."""
    with atomic_path(path) as tmp:
        save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(tmp))


# ---------------------------------------------------------------- a model


def model_meta(model) -> dict:
    """What rebuilds ``model``: its class name and its config."""
    arch = "GPT" if isinstance(model, GPT) else type(model).__name__
    return {"arch": arch, "config": asdict(model.config)}


def save_model(model, folder: str | os.PathLike) -> Path:
    """Write ``model`` (a GPT or the LSTM baseline) as ``model.safetensors`` + ``model.json``."""
    folder = Path(folder)
    _write_tensors(folder / MODEL_FILE, model.state_dict())
    write_json(folder / MODEL_META, model_meta(model))
    return folder


def load_model(folder: str | os.PathLike, device: str | torch.device = "cpu"):
    """A model written by ``save_model`` (or by ``pretrain``'s checkpoints)."""
    folder = Path(folder)
    if not (folder / MODEL_META).is_file() or not (folder / MODEL_FILE).is_file():
        raise CheckpointError(
            f"{folder} holds no {MODEL_META} + {MODEL_FILE}: pass a "
            "folder written by save_model or pretrain"
        )
    meta = json.loads((folder / MODEL_META).read_text())
    if meta.get("arch") not in ARCHITECTURES:
        raise ValueError(
            f"unknown model class {meta.get('arch')!r}; known: {sorted(ARCHITECTURES)}"
        )
    cls, cfg_cls = ARCHITECTURES[meta["arch"]]
    model = cls(cfg_cls(**meta["config"]))
    model.load_state_dict(load_file(str(folder / MODEL_FILE), device=str(device)))
    return model


# ---------------------------------------------------------------- a resumable checkpoint

CHECKPOINT_FILES = (
    "state.json",
    MODEL_META,
    MODEL_FILE,
    "train_state.safetensors",
    "tokenizer.json",
)


def save_checkpoint(folder: Path, model, opt, tokenizer, state: dict) -> Path:
    """Write a resumable checkpoint to ``folder`` atomically: a temporary folder, then rename."""
    folder = Path(folder)
    tmp = folder.with_name(f".tmp-{folder.name}-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    save_model(model, tmp)
    sd = opt.state_dict()  # AdamW's moments as tensors p<i>.<name>, its groups as JSON
    tensors = {f"p{i}.{k}": v for i, st in sd["state"].items() for k, v in st.items()}
    tensors["rng.torch"] = torch.get_rng_state()
    if torch.cuda.is_available():
        tensors |= {f"rng.cuda{i}": s for i, s in enumerate(torch.cuda.get_rng_state_all())}
    _write_tensors(tmp / "train_state.safetensors", tensors)
    tokenizer.save(tmp)
    write_json(tmp / "state.json", {**state, "param_groups": sd["param_groups"]})
    old = folder.with_name(f".old-{folder.name}-{os.getpid()}")
    if folder.exists():
        os.rename(folder, old)
    os.rename(tmp, folder)
    _fsync_dir(folder.parent)
    shutil.rmtree(old, ignore_errors=True)
    return folder


def read_state(folder: str | os.PathLike) -> dict:
    """The ``state.json`` of a checkpoint folder, or a clear error if it is not one."""
    folder = Path(folder)
    missing = [n for n in CHECKPOINT_FILES if not (folder / n).is_file()]
    if missing:
        raise CheckpointError(
            f"{folder} is not a gpt1lib checkpoint (missing {missing}); pass "
            "a folder written by pretrain(), e.g. <out_dir>/checkpoints/step_*"
        )
    return json.loads((folder / "state.json").read_text())


def latest_checkpoint(out_dir: str | os.PathLike) -> Path | None:
    """The newest complete checkpoint of a run, or None."""
    pointer = Path(out_dir) / "checkpoints" / "latest.json"
    return pointer.with_name(json.loads(pointer.read_text())["name"]) if pointer.is_file() else None


def load_checkpoint(folder: Path, model, opt, device: torch.device) -> dict:
    """Restore model, optimiser and RNG states from ``folder``; returns its state.json."""
    state = read_state(folder)
    model.load_state_dict(load_file(str(folder / MODEL_FILE), device=str(device)))
    tensors = load_file(str(folder / "train_state.safetensors"))
    opt_state: dict[int, dict] = {}
    for key, t in tensors.items():
        if key.startswith("p"):
            name, k = key.split(".", 1)
            opt_state.setdefault(int(name[1:]), {})[k] = t
    opt.load_state_dict({"state": opt_state, "param_groups": state["param_groups"]})
    torch.set_rng_state(tensors["rng.torch"])
    cuda = [tensors[k] for k in sorted(tensors) if k.startswith("rng.cuda")]
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda)
    return state


def save_and_prune(out_dir: Path, model, opt, tokenizer, state: dict) -> None:
    """Write checkpoint ``state["step"]``, point ``latest.json`` at it, drop the older ones."""
    ckpts = Path(out_dir) / "checkpoints"
    name = f"step_{state['step']:08d}"
    save_checkpoint(ckpts / name, model, opt, tokenizer, state)
    write_json(ckpts / "latest.json", {"name": name, "step": state["step"]})
    for old in ckpts.glob("step_*"):
        if old.name != name:
            shutil.rmtree(old, ignore_errors=True)
