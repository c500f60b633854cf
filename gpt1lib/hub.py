"""The Hugging Face hub: GPT-1's repository, and its files fetched with a clear error offline."""

from __future__ import annotations

import os
from pathlib import Path

import huggingface_hub

#: GPT-1 as OpenAI released it, on the hub (config.json, model.safetensors, vocab.json, ...).
HUB_ID = "openai-community/openai-gpt"


def hub_files(
    repo_id: str, names: tuple[str, ...], revision: str | None, error: type[Exception], local: str
) -> list[Path]:
    """The files ``names`` of hub repository ``repo_id``; else ``error`` ending with ``local``
    (how to use a local copy instead)."""
    paths = []
    for name in names:
        try:
            paths.append(Path(huggingface_hub.hf_hub_download(repo_id, name, revision=revision)))
        except Exception as e:  # offline, unreachable, gated, or missing file
            raise error(
                f"could not get {name!r} of {repo_id!r} from the Hugging Face hub "
                f"({type(e).__name__}; HF_HUB_OFFLINE={os.environ.get('HF_HUB_OFFLINE', '0')}). "
                + local
            ) from e
    return paths
