"""A pre-trained model for a chapter, and pre-training from the command line.

``pretrained_model`` gives fine-tuning its starting point: this book's own pre-training run at a
scale (made, or finished, first if it is missing: seconds at the smoke scale), GPT-1's released
weights, or any checkpoint folder ``pretrain`` wrote. ``main`` is ``python -m gpt1lib.pretrain``.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path

import torch.distributed as dist

from .bundle import is_bundle
from .bundle import tokenizer as bundle_tokenizer
from .checkpoint import (
    CheckpointError,
    check_model_folder,
    latest_checkpoint,
    load_model,
    read_state,
)
from .checks import dropout, positive_int
from .corpus import build_corpus, load_documents
from .fast import FastGPT
from .finetune import FinetuneConfig, FinetuneResult, run_task
from .lstm import LSTMLM
from .pretrain import PretrainResult, init_distributed, pretrain
from .runtime import pick_device, seed_everything
from .scales import SCALES, Scale
from .tasks import unavailable
from .tokenizer import GPT1Tokenizer
from .weights import load_pretrained


def load_run_model(folder: str | os.PathLike, device: str = "cpu"):
    """The model and tokenizer of a checkpoint folder written by ``pretrain`` (a resumable
    checkpoint, or one of the log-spaced ones), checked to belong together."""
    model = load_model(folder, device)
    tok = GPT1Tokenizer.load(folder)
    if tok.vocab_size != model.config.vocab_size:
        raise CheckpointError(
            f"{folder}: its tokenizer has {tok.vocab_size} tokens but its model "
            f"{model.config.vocab_size}: the two were not saved together; use a folder "
            "written by pretrain"
        )
    return model, tok


def load_tokenizer(spec: str, train_texts=None) -> GPT1Tokenizer:
    """A tokenizer from ``spec``: "released" (the hub's GPT-1 vocabulary), "train:N" (N merges
    learned on ``train_texts``), or a folder/file written by ``GPT1Tokenizer.save``. A folder
    holding ``encoder_bpe_40000.json`` and ``vocab_40000.bpe`` gives the released vocabulary."""
    if spec == "released":
        return GPT1Tokenizer.from_hub()
    if spec.startswith("train:"):
        n = spec.split(":", 1)[1]
        if not n.isdigit():
            raise ValueError(f"tokenizer={spec!r}: use 'train:N' with N merges, e.g. 'train:600'")
        if train_texts is None:
            raise ValueError(f"tokenizer={spec!r} needs the texts to learn the merges from")
        return GPT1Tokenizer.train(texts=train_texts, n_merges=int(n))
    encoder = Path(spec) / "encoder_bpe_40000.json"
    if encoder.is_file():
        return GPT1Tokenizer.from_released(encoder, encoder.with_name("vocab_40000.bpe"))
    return GPT1Tokenizer.load(spec)


def new_model(S: Scale, vocab_size: int, arch: str = "gpt", **overrides):
    """A freshly initialised model of the scale's shape, as the training loops run it."""
    if arch == "lstm":
        n_ctx = S.model_config().n_ctx
        return LSTMLM(S.lstm_config(vocab_size=vocab_size, n_ctx=n_ctx, **overrides))
    return FastGPT(S.model_config(vocab_size=vocab_size, **overrides))


def _model_and_corpus(S: Scale, tok, corpus, seed: int, cache_dir, limit=None, arch="gpt", **kw):
    """A new model of the scale's shape and ``corpus`` cut into its blocks by ``tok``, the two
    steps before ``pretrain`` (``kw`` overrides the model's config)."""
    data = build_corpus(
        tok, S.model_config().n_ctx, corpus, seed=seed, limit=limit, cache_dir=cache_dir
    )
    seed_everything(seed)
    return new_model(S, tok.vocab_size, arch, **kw), data


def pretrained_model(
    scale: str,
    out_dir: str | os.PathLike = "runs",
    init: str = "pretrain",
    corpus: str | None = None,
    arch: str = "gpt",
    device: str | None = None,
    progress: bool = True,
):
    """The model fine-tuning starts from, its tokenizer, and a line saying what it is.

    ``init``: "pretrain", this project's pre-training run ``out_dir/<scale>/pretrain`` (or
    ``pretrain_lstm`` for ``arch="lstm"``), run or finished first if needed (seconds at the smoke
    scale); "released", GPT-1's released weights and vocabulary from the hub; or a checkpoint
    folder written by ``pretrain``. The LSTM reads the transformer run's tokenizer, so the two
    see the same tokens.
    """
    if arch not in ("gpt", "lstm"):
        raise ValueError(f"arch={arch!r}: use 'gpt' (GPT-1) or 'lstm' (the Table 5 baseline)")
    if scale not in SCALES:
        raise ValueError(f"scale={scale!r}: choose one of {tuple(SCALES)}")
    if init not in ("pretrain", "released"):
        check_model_folder(Path(init), f"init={str(init)!r}: use 'pretrain', 'released' or ")
    if init == "released":
        if arch != "gpt":
            raise ValueError("only GPT-1's transformer was released; pre-train the LSTM here")
        return load_pretrained(), GPT1Tokenizer.from_hub(), "GPT-1's released weights"
    if init != "pretrain":
        model, tok = load_run_model(init)
        return model, tok, f"checkpoint {init}"
    S = SCALES[scale]
    run_dir = Path(out_dir) / scale / ("pretrain" if arch == "gpt" else f"pretrain_{arch}")
    ckpt = latest_checkpoint(run_dir)
    state = read_state(ckpt) if ckpt is not None else None
    if state is None or state["step"] < state["run_config"]["pretrain"]["total_steps"]:
        corpus = corpus or S.corpus
        if ckpt is not None:
            tok = load_tokenizer(str(ckpt))
        elif arch == "gpt" and is_bundle(corpus):  # its ids were made by its own tokenizer
            tok = bundle_tokenizer(corpus)
        elif arch == "lstm":
            tok = pretrained_model(scale, out_dir, "pretrain", corpus, "gpt", device, progress)[1]
        else:
            texts = None
            if S.tokenizer.startswith("train:"):
                texts = load_documents(corpus, "train", limit=S.corpus_limit).texts
            tok = load_tokenizer(S.tokenizer, texts)
        cfg = replace(S.pretrain, experiment=f"pretrain:{arch}")
        cache = Path(out_dir) / "cache"
        model, data = _model_and_corpus(S, tok, corpus, cfg.seed, cache, S.corpus_limit, arch)
        kw = {"resume": ckpt is not None, "scale": scale, "device": device, "progress": progress}
        pretrain(model, tok, data, cfg, run_dir, **kw)
        ckpt = latest_checkpoint(run_dir)
    model, tok = load_run_model(ckpt)
    return model, tok, f"pre-trained here ({arch}, {scale}, {ckpt})"


def run_tasks(
    pretrained,
    tok,
    tasks: list[str],
    S: Scale,
    source: str,
    cfg: FinetuneConfig,
    *,
    limit: int | None = None,
    eval_limit: int | None = None,
    also: dict[str, list[str]] | None = None,
    out_dir: str | os.PathLike | None = None,
    device=None,
) -> tuple[dict[str, FinetuneResult], dict[str, str]]:
    """Fine-tune and score each of ``tasks`` from ``pretrained`` with ``cfg``, on the scale's
    example limits (``limit``/``eval_limit`` override them); ``also`` names tasks scored beside
    one (MNLI mismatched beside matched). Returns the results, and the tasks skipped because
    their data is missing from ``source`` with the reason."""
    results, skipped = {}, {}
    for name in tasks:
        if why := unavailable(name, source):  # e.g. Story Cloze without its files
            skipped[name] = why
            continue
        results[name] = run_task(
            pretrained,
            tok,
            name,
            source,
            cfg,
            **S.limits_for(name, limit, eval_limit),
            also=(also or {}).get(name, ()),
            scale=S.name,
            out_dir=out_dir,
            device=device,
        )
    return results, skipped


def main(argv: list[str] | None = None) -> PretrainResult:
    """``python -m gpt1lib.pretrain`` (or ``torchrun ... -m gpt1lib.pretrain``)."""
    p = argparse.ArgumentParser(prog="python -m gpt1lib.pretrain", description=pretrain.__doc__)
    p.add_argument("--scale", choices=tuple(SCALES), default="smoke")
    p.add_argument("--out", required=True, help="run folder: checkpoints, records, samples")
    p.add_argument("--corpus", default="fixture", help="'fixture', a text file/folder, or a hub id")
    p.add_argument("--tokenizer", help="'released', 'train:N', or a saved folder")
    p.add_argument("--steps", type=positive_int, help="total updates (default: the scale's)")
    p.add_argument("--batch-size", type=positive_int)
    p.add_argument("--micro-batch-size", type=positive_int)
    p.add_argument("--ckpt-interval", type=positive_int)
    p.add_argument("--stop-after", type=positive_int, help="end this call after N updates")
    p.add_argument("--dropout", type=dropout, help="all dropout rates (default 0.1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--resume", action="store_true", help="continue the run in --out")
    p.add_argument("--device")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    if args.resume and latest_checkpoint(args.out) is None:
        p.error(
            f"--resume: {args.out} holds no checkpoint to continue (a mistyped --out, or a run "
            "stopped before its first checkpoint); check --out, or drop --resume to start a "
            "new run there"
        )
    S = SCALES[args.scale]
    given = {"total_steps": args.steps, "seed": args.seed}
    given |= {k: getattr(args, k) for k in ("batch_size", "micro_batch_size", "ckpt_interval")}
    cfg = replace(S.pretrain, **{k: v for k, v in given.items() if v is not None})
    proc = init_distributed(pick_device(args.device))
    ckpt = latest_checkpoint(args.out) if args.resume else None
    spec = str(ckpt) if ckpt is not None else args.tokenizer or S.tokenizer
    if spec.startswith("train:"):
        # BPE training breaks ties in an order that can change between runs: learn the merges
        # once, in the main process, and have every process read that tokenizer.
        saved = Path(args.out) / "tokenizer"
        if proc.main and not (saved / "tokenizer.json").is_file():
            load_tokenizer(spec, load_documents(args.corpus, "train").texts).save(saved)
        if proc.world > 1:
            dist.barrier()
        spec = str(saved)
    tok = load_tokenizer(spec)
    names = ("embd_pdrop", "attn_pdrop", "resid_pdrop")
    drop = {} if args.dropout is None else dict.fromkeys(names, args.dropout)
    model, data = _model_and_corpus(
        S, tok, args.corpus, args.seed, Path(args.out) / "cache", **drop
    )
    kw = {
        "resume": args.resume,
        "scale": args.scale,
        "device": args.device,
        "stop_after": args.stop_after,
    }
    return pretrain(model, tok, data, cfg, args.out, progress=not args.no_progress, **kw)
