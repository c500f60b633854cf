"""A pre-trained model for a chapter: this book's own run, GPT-1's released weights, or a
checkpoint (``pretrained_model``); ``start_message`` says which, and how long it takes.
"""

from __future__ import annotations

import os
from pathlib import Path

from .checkpoint import check_model_folder, latest_checkpoint, load_run, read_state
from .experiments import checkpoint_tokenizer, pretrain_dir, pretraining
from .hub import HUB_ID
from .paths import shown
from .scales import SCALES
from .tokenizer import GPT1Tokenizer
from .weights import load_pretrained

#: What pre-training costs at each scale, said before a chapter starts it.
PRETRAIN_TIME = {
    "smoke": "seconds on a CPU",
    "cpu": "about 17 minutes on two CPU cores, the LSTM about 14 more",
    "small": "about 2.5 minutes on an H100, the LSTM 2.6 more; 20 minutes or more on a T4",
    "paper": "about 30 days on 8 GPUs (the paper's); run it apart, with torchrun",
}
#: The released model: 117 M float32 parameters on the hub.
RELEASED_TIME = "a 480 MB download, a minute or so"


def start_message(scale: str, out_dir, init: str, arch: str = "gpt") -> str:
    """What ``pretrained_model`` is about to do and about how long it takes, one line."""
    if init == "released":
        where = os.environ.get(RELEASED_ENV) or HUB_ID
        return f"starting from GPT-1's released weights ({where}; {RELEASED_TIME})"
    if init != "pretrain":
        return f"starting from the checkpoint {shown(init)}"
    run_dir = pretrain_dir(out_dir, scale, arch)
    ckpt, done = _progress(run_dir)
    if done:
        return f"starting from this book's pre-training run {shown(run_dir)} (done)"
    doing = "finishing" if ckpt is not None else "pre-training"
    return (
        f"{doing} the {scale} scale's {arch} model first in {shown(run_dir)} "
        f"({PRETRAIN_TIME[scale]}; init='released' starts from GPT-1's weights instead)"
    )


#: A local copy of the hub's openai-community/openai-gpt (config.json, model.safetensors,
#: vocab.json, merges.txt) that init="released" reads instead of the hub.
RELEASED_ENV = "GPT1_RELEASED_DIR"


def pretrained_model(
    scale: str,
    out_dir: str | os.PathLike = "runs",
    init: str | None = None,
    corpus: str | None = None,
    arch: str = "gpt",
    device: str | None = None,
    progress: bool = True,
):
    """The model fine-tuning starts from, its tokenizer, and a line saying what it is.

    ``init``: "pretrain", this book's pre-training run of ``arch`` at ``scale`` in ``out_dir``
    (``experiments.pretrain_dir``), run or finished first if needed; "released", GPT-1's
    released weights (from ``$GPT1_RELEASED_DIR`` where set, else the hub); a checkpoint folder
    written by ``pretrain``; or None, the scale's default (``Scale.init``).
    """
    if arch not in ("gpt", "lstm"):
        raise ValueError(f"arch={arch!r}: use 'gpt' (GPT-1) or 'lstm' (the Table 5 baseline)")
    if scale not in SCALES:
        raise ValueError(f"scale={scale!r}: choose one of {tuple(SCALES)}")
    init = (SCALES[scale].init if init is None else init) if arch == "gpt" else init or "pretrain"
    if init == "released":
        if arch != "gpt":
            raise ValueError("only GPT-1's transformer was released; pre-train the LSTM here")
        if folder := os.environ.get(RELEASED_ENV):
            f = Path(folder)
            tok = GPT1Tokenizer.from_released(f / "vocab.json", f / "merges.txt")
            return load_pretrained(f), tok, f"GPT-1's released weights ({RELEASED_ENV}={f})"
        return load_pretrained(), GPT1Tokenizer.from_hub(), f"GPT-1's released weights ({HUB_ID})"
    if init != "pretrain":
        check_model_folder(Path(init), f"init={str(init)!r}: use 'pretrain', 'released' or ")
        model, tok = load_run(init)
        return model, tok, f"checkpoint {shown(init)}"
    return _own_run(scale, out_dir, corpus, arch, device, progress)


def _progress(folder: Path) -> tuple[Path | None, bool]:
    """The newest checkpoint in ``folder`` (None: none yet), and whether the run is done."""
    ckpt = latest_checkpoint(folder)
    if ckpt is None:
        return None, False
    state = read_state(ckpt)
    return ckpt, state["step"] >= state["run_config"]["pretrain"]["total_steps"]


def _own_run(scale: str, out_dir, corpus, arch: str, device, progress: bool):
    """``pretrained_model``'s "pretrain": the run in ``out_dir/<scale>``, made or finished (the
    LSTM's after the transformer's, whose tokenizer it reads)."""
    folder = pretrain_dir(out_dir, scale, arch)
    ckpt, done = _progress(folder)
    if not done:
        if arch == "lstm" and checkpoint_tokenizer(pretrain_dir(out_dir, scale, "gpt")) is None:
            pretrained_model(scale, out_dir, "pretrain", corpus, "gpt", device, progress)
        run = pretraining(SCALES[scale], corpus, out_dir, arch=arch)  # a resume checked first
        run.run(device=device, progress=progress)
        ckpt = latest_checkpoint(folder)
    model, tok = load_run(ckpt)
    return model, tok, f"pre-trained here ({arch}, {scale}, {shown(ckpt)})"
