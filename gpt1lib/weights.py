"""Released GPT-1 weights in and out: the hub's transformers layout (``config.json`` +
``model.safetensors``, Conv1D matrices stored (in, out), the transpose of ``nn.Linear``) or a
local copy, the original release's ``params_*.npy`` shards, and export in the transformers layout.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

from .files import atomic_path, load_array, load_tensors, read_json
from .hub import HUB_ID, hub_files
from .model import GPT, GPTConfig

_CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
#: Per-block arrays of the original release, in the order of ``params_shapes.json``.
_ORIGINAL_BLOCK = tuple(
    f"{module}.{kind}"
    for module in ("attn.c_attn", "attn.c_proj", "ln_1", "mlp.c_fc", "mlp.c_proj", "ln_2")
    for kind in ("weight", "bias")
)


class WeightsMismatchError(ValueError):
    """A checkpoint does not fit the model: lists every missing, unexpected or misshapen key."""


class WeightsUnavailableError(RuntimeError):
    """The weights could not be fetched (hub unreachable or files missing)."""


_SIZES, _DROPOUTS = ("n_layer", "n_head", "n_embd"), ("embd_pdrop", "attn_pdrop", "resid_pdrop")


def config_from_hf(hf: dict) -> GPTConfig:
    """GPTConfig from a transformers ``config.json`` dictionary."""
    if hf.get("afn", "gelu") != "gelu":
        raise ValueError(f"config.json has afn={hf['afn']!r}; GPT-1 uses 'gelu' (the tanh form)")
    n_special = int(hf.get("gpt1lib_n_special", 0))
    return GPTConfig(
        vocab_size=int(hf["vocab_size"]) - n_special,
        n_special=n_special,
        n_ctx=int(hf.get("n_positions", hf.get("n_ctx", 512))),
        **{k: int(hf[k]) for k in _SIZES},
        **{k: float(hf.get(k, 0.1)) for k in _DROPOUTS},
        layer_norm_eps=float(hf.get("layer_norm_epsilon", 1e-5)),
    )


def config_to_hf(cfg: GPTConfig) -> dict:
    """A transformers ``config.json`` dictionary for ``cfg`` (specials counted in vocab_size)."""
    return {
        "architectures": ["OpenAIGPTLMHeadModel"],
        "model_type": "openai-gpt",
        "afn": "gelu",
        "vocab_size": cfg.n_tokens,
        "n_positions": cfg.n_ctx,
        **{k: getattr(cfg, k) for k in _SIZES + _DROPOUTS},
        "layer_norm_epsilon": cfg.layer_norm_eps,
        "initializer_range": 0.02,
        "tie_word_embeddings": True,
        "gpt1lib_n_special": cfg.n_special,
    }


def load_state_dict_hf(model: GPT, tensors: dict[str, torch.Tensor]) -> GPT:
    """Copy transformers-layout ``tensors`` into ``model``; any mismatch raises, listing all."""
    ours = model.state_dict()
    mapped: dict[str, torch.Tensor] = {}
    unexpected = []
    for key, t in tensors.items():
        k = key.removeprefix("transformer.")
        if k == "lm_head.weight":  # tied to tokens_embed; transformers may or may not store it
            continue
        if k not in ours:
            unexpected.append(f"{key} {tuple(t.shape)}")
            continue
        mapped[k] = t.t() if k.endswith(_CONV1D) else t
    missing = [f"{k} {tuple(ours[k].shape)}" for k in ours if k not in mapped]
    shapes = [
        f"{k}: checkpoint {tuple(t.shape)} vs model {tuple(ours[k].shape)}"
        for k, t in mapped.items()
        if t.shape != ours[k].shape
    ]
    problems = {"missing": missing, "unexpected": unexpected, "wrong shape": shapes}
    parts = [f"{name} ({len(v)}): " + ", ".join(v) for name, v in problems.items() if v]
    if parts:
        raise WeightsMismatchError(
            "checkpoint does not fit the model (check the config: vocab_size, n_special, n_ctx, "
            "n_layer, n_embd):\n  " + "\n  ".join(parts)
        )
    model.load_state_dict(mapped)
    return model


def load_pretrained(
    source: str | os.PathLike = HUB_ID, revision: str | None = None, **config_overrides
) -> GPT:
    """The released GPT-1 from the hub id ``source`` or a local folder with the same files;
    ``config_overrides`` change fields that do not touch the weights (dropout)."""
    folder = Path(source)
    if folder.is_dir():
        config_path, weights_path = folder / "config.json", folder / "model.safetensors"
        for p in (config_path, weights_path):
            if not p.is_file():
                raise WeightsUnavailableError(
                    f"{p} does not exist: a local copy of {HUB_ID} needs config.json and "
                    "model.safetensors (or pass a folder of the original params_*.npy release "
                    "to load_original)"
                )
    elif os.path.exists(source):
        raise WeightsUnavailableError(f"{source} is a file; pass the folder that holds it")
    else:
        config_path, weights_path = hub_files(
            str(source),
            ("config.json", "model.safetensors"),
            revision,
            WeightsUnavailableError,
            "Download config.json and model.safetensors of that repository on a machine that "
            "reaches the hub and pass their folder: load_pretrained('/path/to/openai-gpt')",
        )
    hf = read_json(config_path, _download_again(config_path, source))
    cfg = replace(config_from_hf(hf), **config_overrides)
    tensors = load_tensors(weights_path, fix=_download_again(weights_path, source))
    return load_state_dict_hf(GPT(cfg), tensors)


def _download_again(path: Path, source) -> str:
    """The fix for a file of ``load_pretrained``'s that is not whole: download it again."""
    if Path(source).is_dir():
        return f"download it again into {path.parent} (GPT-1's: the hub repository {HUB_ID})"
    return (
        f"download it again: huggingface_hub.hf_hub_download({str(source)!r}, {path.name!r}, "
        "force_download=True)"
    )


def export_hf(model: GPT, folder: str | os.PathLike) -> Path:
    """Write ``model`` as ``config.json`` + ``model.safetensors`` in the transformers layout."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for k, t in model.state_dict().items():
        t = t.t() if k.endswith(_CONV1D) else t
        tensors[f"transformer.{k}"] = t.detach().to("cpu", torch.float32).contiguous()
    with atomic_path(folder / "model.safetensors") as tmp:
        save_file(tensors, str(tmp), metadata={"format": "pt"})
    with atomic_path(folder / "config.json") as tmp:
        tmp.write_text(json.dumps(config_to_hf(model.config), indent=2))
    return folder


def original_shapes(cfg: GPTConfig) -> list[tuple[str, tuple[int, ...]]]:
    """Names and shapes of the original release's arrays, in ``params_shapes.json`` order."""
    d = cfg.n_embd
    out = [("positions_embed.weight", (cfg.n_ctx, d)), ("tokens_embed.weight", (cfg.vocab_size, d))]
    conv = {"attn.c_attn": (d, 3 * d), "attn.c_proj": (d, d), "mlp.c_fc": (d, 4 * d)}
    conv["mlp.c_proj"] = (4 * d, d)  # (in, out)
    for i in range(cfg.n_layer):
        for name in _ORIGINAL_BLOCK:
            module, kind = name.rsplit(".", 1)
            if module in conv:  # Conv1D: weight [1, in, out], bias [out]
                shape = (1, *conv[module]) if kind == "weight" else conv[module][1:]
            else:  # LayerNorm gain and bias
                shape = (d,)
            out.append((f"h.{i}.{name}", shape))
    return out


def read_original_shards(folder: str | os.PathLike) -> list[np.ndarray]:
    """The arrays of the original release: shards concatenated, split at cumulative sizes."""
    folder = Path(folder)
    shapes_path = folder / "params_shapes.json"
    if not shapes_path.is_file():
        raise WeightsUnavailableError(
            f"{shapes_path} does not exist: pass the folder of the original release "
            "(params_shapes.json and params_0.npy .. params_9.npy)"
        )
    shapes = json.loads(shapes_path.read_text())
    shards = sorted(folder.glob("params_*.npy"), key=lambda p: int(p.stem.split("_")[1]))
    if not shards:
        raise WeightsUnavailableError(f"no params_*.npy shards in {folder}")
    fix = "download the original release again: its shards hold float32 arrays"
    flat = np.concatenate([load_array(p, fix) for p in shards])
    sizes = [int(np.prod(s)) for s in shapes]
    if flat.size != sum(sizes):
        raise WeightsMismatchError(
            f"the shards in {folder} hold {flat.size} numbers but params_shapes.json needs "
            f"{sum(sizes)}: a shard is missing or truncated"
        )
    offsets = np.cumsum(sizes)[:-1]
    return [a.reshape(s) for a, s in zip(np.split(flat, offsets), shapes, strict=True)]


def load_original(folder: str | os.PathLike, n_ctx: int | None = None, **config_overrides) -> GPT:
    """GPT-1 from the original ``params_*.npy`` release, its config read off the shapes
    (n_head is not in them: 12, or pass ``n_head``)."""
    arrays = read_original_shards(folder)
    (n_pos, n_embd), (vocab, _) = arrays[0].shape, arrays[1].shape
    n_layer, rest = divmod(len(arrays) - 2, len(_ORIGINAL_BLOCK))
    if rest:
        raise WeightsMismatchError(
            f"{len(arrays)} arrays: not 2 embeddings plus {len(_ORIGINAL_BLOCK)} per block"
        )
    fields = {"vocab_size": vocab, "n_ctx": n_pos, "n_layer": n_layer, "n_embd": n_embd}
    cfg = GPTConfig(**{**fields, **config_overrides})
    names = [name for name, _ in original_shapes(cfg)]
    tensors = {  # Conv1D weights lose the leading 1 of [1, in, out]
        k: torch.from_numpy(np.ascontiguousarray(a.reshape(a.shape[-2:]) if a.ndim == 3 else a))
        for k, a in zip(names, arrays, strict=True)
    }
    model = load_state_dict_hf(GPT(cfg), tensors)
    if n_ctx is not None and n_ctx < n_pos:  # the released code kept only the first n_ctx rows
        with torch.no_grad():
            w = model.positions_embed.weight[:n_ctx].clone()
        model.positions_embed = torch.nn.Embedding.from_pretrained(w, freeze=False)
        model.config = replace(model.config, n_ctx=n_ctx)
    return model
