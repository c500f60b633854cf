"""Models and resumable checkpoints, written atomically (``files``) and checked when read back.

A model is ``model.safetensors`` plus ``model.json`` (its class and config). A resumable
checkpoint is a folder, written under a temporary name and renamed into place, with the model,
AdamW's moments, the RNG states, the run's state and config, and the tokenizer; every file's
sha256 is kept and checked when read back."""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import asdict
from pathlib import Path

import torch

from .checks import check_tokenizer
from .files import (
    CheckpointError,
    clean_leftovers,
    damaged,
    file_sha256,
    fsync_dir,
    load_tensors,
    read_json,
    verify_files,
    write_json,
    write_tensors,
)
from .lstm import LSTMLM
from .model import GPT, GPTConfig
from .settings import LSTMConfig
from .tokenizer import GPT1Tokenizer

MODEL_FILE, MODEL_META = "model.safetensors", "model.json"
#: The model classes a ``model.json`` may name (a ``fast.FastGPT`` is saved as a GPT).
ARCHITECTURES = {"GPT": (GPT, GPTConfig), "LSTMLM": (LSTMLM, LSTMConfig)}


log = logging.getLogger(__name__)


def model_meta(model) -> dict:
    """What rebuilds ``model``: its class name and its config."""
    arch = "GPT" if isinstance(model, GPT) else type(model).__name__
    return {"arch": arch, "config": asdict(model.config)}


def save_model(model, folder: str | os.PathLike) -> Path:
    """Write ``model`` (a GPT or the LSTM baseline) as ``model.safetensors`` + ``model.json``
    (its class, config and the weights' sha256)."""
    folder = Path(folder)
    digest = write_tensors(folder / MODEL_FILE, model.state_dict())
    write_json(folder / MODEL_META, model_meta(model) | {"sha256": digest})
    return folder


def check_model_folder(folder: Path, prefix: str = "") -> None:
    """A clear error (``prefix`` first) unless ``folder`` holds a model written by gpt1lib."""
    if not folder.is_dir():
        raise CheckpointError(
            f"{prefix}{folder} does not exist{' (it is a file)' if folder.exists() else ''}: "
            "pass a folder written by save_model or pretrain, e.g. <out_dir>/checkpoints/step_* "
            "or <out_dir>/log_checkpoints/step_*"
        )
    if (folder / "config.json").is_file() and not (folder / MODEL_META).is_file():
        raise CheckpointError(
            f"{prefix}{folder} holds config.json but no {MODEL_META}: a transformers folder, "
            "not a gpt1lib one. Load it with gpt1lib.weights.load_pretrained(folder) (or "
            "init='released' for the hub's GPT-1)"
        )
    if not (folder / MODEL_META).is_file() or not (folder / MODEL_FILE).is_file():
        raise CheckpointError(
            f"{prefix}{folder} holds no {MODEL_META} + {MODEL_FILE}: pass a folder written by "
            "save_model or pretrain"
        )


def load_model(folder: str | os.PathLike, device: str | torch.device = "cpu"):
    """A model written by ``save_model`` (or by ``pretrain``'s checkpoints), its weights
    checked against the sha256 in ``model.json``."""
    folder = Path(folder)
    check_model_folder(folder)
    meta = read_json(folder / MODEL_META, "it should hold the model's class and config")
    arch = meta.get("arch") if isinstance(meta, dict) else None
    if arch not in ARCHITECTURES or not isinstance(meta.get("config"), dict):
        raise CheckpointError(
            f"{folder / MODEL_META} names model class {arch!r} (known: {sorted(ARCHITECTURES)}) "
            "or holds no config: it was not written by gpt1lib's save_model"
        )
    cls, cfg_cls = ARCHITECTURES[arch]
    try:
        model = cls(cfg_cls(**meta["config"]))
    except TypeError as e:
        raise CheckpointError(
            f"{folder / MODEL_META}: its config does not fit {cfg_cls.__name__} ({e}); was it "
            "written by another version of gpt1lib?"
        ) from e
    path = folder / MODEL_FILE
    if "sha256" in meta and file_sha256(path) != meta["sha256"]:
        raise damaged(path, f"its sha256 differs from the one in {MODEL_META}")
    _load_weights(model, load_tensors(path, device), path)
    return model


def load_run(folder: str | os.PathLike, device: str | torch.device = "cpu"):
    """The model and tokenizer of a checkpoint folder written by ``pretrain`` (a resumable
    checkpoint, or one of the log-spaced ones), checked to belong together."""
    model = load_model(folder, device)
    tok = GPT1Tokenizer.load(folder)
    fix = f"{folder}: the two were not saved together; use a folder written by pretrain"
    check_tokenizer(tok, model, fix, CheckpointError)
    return model, tok


def _load_weights(model, tensors: dict, path: Path) -> None:
    try:
        model.load_state_dict(tensors)
    except RuntimeError as e:  # missing, unexpected or misshapen keys
        raise CheckpointError(
            f"{path} does not fit the model its folder describes: {str(e)[:300]}"
        ) from e


CHECKPOINT_FILES = (
    "state.json",
    MODEL_META,
    MODEL_FILE,
    "train_state.safetensors",
    "tokenizer.json",
)


def save_checkpoint(folder: Path, model, opt, tokenizer, state: dict) -> Path:
    """Write a resumable checkpoint to ``folder`` atomically: a temporary folder, then rename.
    ``state.json`` holds ``state``, the optimiser's groups and every other file's sha256."""
    folder = Path(folder)
    tmp = folder.with_name(f".tmp-{folder.name}-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    save_model(model, tmp)
    sd = opt.state_dict()  # AdamW's moments as tensors p<i>.<name>, its groups as JSON
    tensors = {f"p{i}.{k}": v for i, st in sd["state"].items() for k, v in st.items()}
    tensors["rng.torch"] = torch.get_rng_state()
    if torch.cuda.is_available():
        tensors |= {f"rng.cuda{i}": s for i, s in enumerate(torch.cuda.get_rng_state_all())}
    digests = {"train_state.safetensors": write_tensors(tmp / "train_state.safetensors", tensors)}
    digests[MODEL_FILE] = json.loads((tmp / MODEL_META).read_text())["sha256"]  # hashed once
    tokenizer.save(tmp)
    others = [n for n in CHECKPOINT_FILES if n != "state.json"]
    files = {n: digests.get(n) or file_sha256(tmp / n) for n in others}
    write_json(tmp / "state.json", {**state, "param_groups": sd["param_groups"], "files": files})
    old = folder.with_name(f".old-{folder.name}-{os.getpid()}")
    if folder.exists():
        os.rename(folder, old)
    os.rename(tmp, folder)
    fsync_dir(folder.parent)
    shutil.rmtree(old, ignore_errors=True)
    return folder


def read_state(folder: str | os.PathLike) -> dict:
    """The ``state.json`` of a checkpoint folder, or a clear error if it is not one."""
    folder = Path(folder)
    if missing := [n for n in CHECKPOINT_FILES if not (folder / n).is_file()]:
        why = f"lacks {missing}" if folder.is_dir() else "does not exist"
        raise CheckpointError(
            f"{folder} {why}: pass a checkpoint folder written by pretrain(), e.g. "
            "<out_dir>/checkpoints/step_*"
        )
    fix = "delete this checkpoint to resume from an earlier one, or start a new run"
    state = read_json(folder / "state.json", fix)
    lacks = [k for k in ("step", "param_groups") if not isinstance(state, dict) or k not in state]
    if lacks:
        raise CheckpointError(f"{folder / 'state.json'} lacks {lacks}: not pretrain's; {fix}")
    return state


def config_diff(old: dict, new: dict, prefix: str = "") -> list[str]:
    """The settings that differ between two run configs, as readable lines (where the corpus
    is found is no difference: its sha256 says whether it is the same)."""
    out = []
    for k in sorted(set(old) | set(new)):
        a, b = old.get(k), new.get(k)
        if f"{prefix}{k}" == "corpus.source" or (f"{prefix}{k}" == "corpus" and isinstance(a, str)):
            continue  # where the corpus is found; or a run from before its sha256 was kept
        if isinstance(a, dict) and isinstance(b, dict):
            out += config_diff(a, b, f"{prefix}{k}.")
        elif a != b:
            out.append(f"{prefix}{k}: checkpoint {a!r} vs now {b!r}")
    return out


def latest_checkpoint(out_dir: str | os.PathLike) -> Path | None:
    """The newest complete checkpoint of a run (``checkpoints/latest.json`` names it), or None
    where the run has none yet."""
    pointer = Path(out_dir) / "checkpoints" / "latest.json"
    if not pointer.is_file():
        return None
    found = sorted(p.name for p in pointer.parent.glob("step_*"))
    fix = (
        f'it names the newest checkpoint, as {{"name": "step_00000040", "step": 40}} (folders '
        f"there: {found}): write that, or delete the run's folder {out_dir} to start again"
    )
    name = read_json(pointer, fix)
    name = name.get("name") if isinstance(name, dict) else None
    if not isinstance(name, str) or not (pointer.parent / name).is_dir():
        raise CheckpointError(f"{pointer} names {name!r}, which is not a folder there; {fix}")
    return pointer.with_name(name)


def load_checkpoint(folder: Path, model, opt, device: torch.device) -> dict:
    """Restore model, optimiser and RNG states from ``folder``, each file checked against its
    recorded sha256; returns its state.json."""
    folder = Path(folder)
    state = read_state(folder)
    verify_files(folder, state.get("files", {}))  # checkpoints written before sha256: none
    _load_weights(model, load_tensors(folder / MODEL_FILE, device), folder / MODEL_FILE)
    tensors = load_tensors(folder / "train_state.safetensors")
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


def clean_run(out_dir: str | os.PathLike) -> list[Path]:
    """What a crash mid-write left in a run folder, its checkpoints, tokenizer and log
    checkpoints (not deeper, nor its cache: other runs or processes may write there)."""
    out_dir = Path(out_dir)
    removed = clean_leftovers(out_dir) + clean_leftovers(out_dir / "checkpoints")
    removed += clean_leftovers(out_dir / "tokenizer")
    removed += clean_leftovers(out_dir / "log_checkpoints", depth=1)
    if removed:
        log.warning("removed %d leftovers of interrupted writes: %s", len(removed), removed)
    return removed


def save_and_prune(out_dir: Path, model, opt, tokenizer, state: dict) -> None:
    """Write checkpoint ``state["step"]``, point ``latest.json`` at it, drop the older ones."""
    ckpts = Path(out_dir) / "checkpoints"
    name = f"step_{state['step']:08d}"
    save_checkpoint(ckpts / name, model, opt, tokenizer, state)
    write_json(ckpts / "latest.json", {"name": name, "step": state["step"]})
    for old in ckpts.glob("step_*"):
        if old.name != name:
            shutil.rmtree(old, ignore_errors=True)
