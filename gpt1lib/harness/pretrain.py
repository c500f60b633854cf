"""Pre-train GPT-1 on a corpus (L1, §3.1) with a scale's recipe; or resume such a run.

``python -m gpt1lib.harness.pretrain`` on one GPU or a CPU, or under ``torchrun``: chapter 03's
pre-training, every default a scale's. A new run keeps its options in ``--out/run.json`` first,
so that ``--resume`` starts a run stopped before its first checkpoint afresh."""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from dataclasses import fields
from pathlib import Path

import torch.distributed as dist

from ..checkpoint import CheckpointError, latest_checkpoint
from ..corpus import load_documents
from ..experiments import pretraining
from ..files import read_json, write_json
from ..pretrain import PretrainResult
from ..runtime import Dist, init_distributed, pick_device
from ..scales import SCALES
from ..settings import PretrainConfig, real, whole
from ..tokenizer import GPT1Tokenizer
from . import command_line


def _parser(scale: str = "smoke") -> argparse.ArgumentParser:
    S = SCALES[scale]
    p = command_line("gpt1lib.harness.pretrain", __doc__)
    p.epilog = (
        f"The defaults shown are the {scale} scale's (gpt1lib/scales.py); "
        "--scale NAME --help shows another's."
    )
    p.add_argument("--scale", choices=tuple(SCALES), default="smoke", help="model, data, recipe")
    p.add_argument("--out", required=True, help="run folder: checkpoints, records, samples")
    p.add_argument("--corpus", default=S.corpus, help="'fixture', a text file or folder, a hub id")
    positive = whole().argument()
    p.add_argument(
        "--corpus-limit", type=positive, default=S.corpus_limit, help="documents (None: all)"
    )
    p.add_argument("--tokenizer", default=S.tokenizer, help="'released', 'train:N', or a folder")
    for f, flag in _OPTIONS.items():
        kind = f.metadata["check"].argument()
        default = getattr(S.pretrain, f.name)
        p.add_argument(flag, type=kind, default=default, help=f.metadata["help"])
    p.add_argument("--stop-after", type=positive, help="end this call after N updates")
    rate = real(0, 1, high_open=True).argument(float)
    p.add_argument("--dropout", type=rate, help="every dropout rate (None: the model's, 0.1)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out")
    p.add_argument("--device", help="cpu, cuda, cuda:1 ... (None: CUDA where available)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


_OPTIONS = {f: f.metadata["option"] for f in fields(PretrainConfig) if "option" in f.metadata}


RUN_JSON = "run.json"


def _run_options(args: argparse.Namespace) -> dict:
    skip = ("out", "resume", "stop_after", "device", "no_progress")
    return json.loads(json.dumps({k: v for k, v in vars(args).items() if k not in skip}))


def _restart(p: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """``--resume`` where ``--out`` holds no checkpoint: a run stopped before its first (as a
    retry loop passing --resume meets) starts afresh if ``run.json`` has the same options."""
    saved = Path(args.out) / RUN_JSON
    if not saved.is_file():
        p.error(
            f"--resume: {args.out} holds no checkpoint to continue (nor the {RUN_JSON} of a run "
            "stopped before its first): check --out, or drop --resume to start a new run there"
        )
    then, now = read_json(saved, "delete it, or drop --resume"), _run_options(args)
    diff = [
        f"--{k.replace('_', '-')}: {then.get(k)!r} then, {now.get(k)!r} now"
        for k in sorted(set(then) | set(now))
        if then.get(k) != now.get(k)
    ]
    if diff:
        p.error(
            f"--resume: {args.out} holds no checkpoint, and the run stopped there before its "
            "first had other options:\n  " + "\n  ".join(diff) + "\nresume with the run's "
            "options, or drop --resume to start a new run there"
        )
    return (
        f"--resume: {args.out} holds no checkpoint yet, only what this run left when it stopped "
        f"before its first ({RUN_JSON}: the same options): starting it afresh at update 0"
    )


def main(argv: list[str] | None = None) -> PretrainResult:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--scale", choices=tuple(SCALES), default="smoke")
    p = _parser(pre.parse_known_args(argv)[0].scale)
    args = p.parse_args(argv)
    if Path(args.out).is_file():
        p.error(f"--out {args.out} is a file: give a folder for the run")
    settings = {f.name: getattr(args, flag[2:].replace("-", "_")) for f, flag in _OPTIONS.items()}
    settings = {k: v for k, v in settings.items() if v is not None}
    names = ("embd_pdrop", "attn_pdrop", "resid_pdrop")
    drop = {} if args.dropout is None else dict.fromkeys(names, args.dropout)
    proc = init_distributed(pick_device(args.device))
    tokenizer = args.tokenizer  # a resumed run reads its checkpoint's
    if latest_checkpoint(args.out) is None:
        said = _restart(p, args) if args.resume else None
        if said and proc.main:
            print(said)
        if proc.main:
            write_json(Path(args.out) / RUN_JSON, _run_options(args))
        tokenizer = _tokenizer(args.tokenizer, args, proc)
    try:
        run = pretraining(
            SCALES[args.scale],
            args.corpus,
            args.out,
            folder=args.out,
            tokenizer=tokenizer,
            corpus_limit=args.corpus_limit,
            model_overrides=drop,
            **settings,
        )
    except CheckpointError as e:
        p.error(f"--resume: {e}" if args.resume else str(e))
    kw = {"device": args.device, "stop_after": args.stop_after, "progress": not args.no_progress}
    result = run.run(**kw)
    if proc.main:
        print(summary(result, argv if argv is not None else sys.argv[1:]))
    return result


def _tokenizer(spec: str, args, proc: Dist) -> str:
    """``spec``, or for ``train:N`` the tokenizer the main process learns into ``--out`` (BPE's
    ties may break differently in each process)."""
    if not spec.startswith("train:"):
        return spec
    saved = Path(args.out) / "tokenizer"
    if proc.main and not (saved / "tokenizer.json").is_file():
        texts = load_documents(args.corpus, "train", limit=args.corpus_limit).texts
        GPT1Tokenizer.from_spec(spec, texts).save(saved)
    if proc.world > 1:
        dist.barrier()
    return str(saved)


def summary(result: PretrainResult, argv: list[str]) -> str:
    """How far the run got, its validation perplexity, checkpoint and resuming command."""
    ckpt = latest_checkpoint(result.out_dir)
    ppl = f"{math.exp(result.val_loss):,.2f}" if result.val_loss is not None else "not yet measured"
    again = shlex.join(["python", "-m", "gpt1lib.harness.pretrain", *argv])
    again += "" if "--resume" in argv else " --resume"
    done = result.step >= result.total_steps
    lines = [
        f"pre-training {'done' if done else 'stopped'}: update {result.step:,} of "
        f"{result.total_steps:,} in {result.wall_time / 60:.1f} minutes",
        f"validation perplexity: {ppl}",
        f"checkpoint: {ckpt}",
        "resume: " + (again if not done else "nothing left to run (the run is complete)"),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
