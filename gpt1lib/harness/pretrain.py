"""``python -m gpt1lib.harness.pretrain`` (or ``torchrun ... -m gpt1lib.harness.pretrain``):
pre-training from the command line, every default a scale's (``--scale small --help`` lists
small's).

It runs the chapter's experiment (``experiments.pretraining``) in ``--out`` and ends with a
summary: its validation perplexity, its newest checkpoint, and the exact command that resumes
it. ``--out`` keeps the run's options in ``run.json``, written before any data is loaded, so
that ``--resume`` starts a run stopped before its first checkpoint afresh, and refuses a folder
holding another run, or none (a mistyped ``--out``).
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from dataclasses import replace
from pathlib import Path

import torch.distributed as dist

from ..checkpoint import CheckpointError, latest_checkpoint
from ..checks import dropout, positive_int
from ..corpus import load_documents
from ..experiments import check_resume, pretraining
from ..files import read_json, write_json
from ..pretrain import PretrainResult
from ..runtime import Dist, init_distributed, pick_device
from ..scales import SCALES
from ..tokenizer import GPT1Tokenizer


def _parser(scale: str = "smoke") -> argparse.ArgumentParser:
    """The command line, its defaults those of ``scale`` (so ``--scale small --help`` shows
    small's)."""
    S, P = SCALES[scale], SCALES[scale].pretrain
    p = argparse.ArgumentParser(
        prog="python -m gpt1lib.harness.pretrain",
        description="Pre-train GPT-1 on a corpus (L1, §3.1) with a scale's recipe, on one GPU, "
        "a CPU, or many GPUs under torchrun; or resume such a run.",
        epilog=f"The defaults shown are the {scale} scale's (gpt1lib/scales.py); "
        "--scale NAME --help shows another's.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    arg = p.add_argument
    arg("--scale", choices=tuple(SCALES), default="smoke", help="model, data and recipe")
    arg("--out", required=True, help="run folder: checkpoints, records, samples")
    arg("--corpus", default=S.corpus, help="'fixture', a text file or folder, or a hub id")
    arg("--corpus-limit", type=positive_int, default=S.corpus_limit, help="documents (None: all)")
    arg("--tokenizer", default=S.tokenizer, help="'released', 'train:N', or a saved folder")
    arg("--steps", type=positive_int, default=P.total_steps, help="updates (None: epochs)")
    arg("--batch-size", type=positive_int, default=P.batch_size, help="sequences per update")
    arg("--micro-batch-size", type=positive_int, help="per forward pass (None: the batch)")
    arg("--ckpt-interval", type=positive_int, default=P.ckpt_interval, help="updates")
    arg("--stop-after", type=positive_int, help="end this call after N updates (None: at the end)")
    arg("--dropout", type=dropout, help="every dropout rate (None: the model's, 0.1)")
    arg("--seed", type=int, default=0, help="seeds the model, the batches and the tokenizer")
    arg("--resume", action="store_true", help="continue the run in --out")
    arg("--device", help="cpu, cuda, cuda:1 ... (None: CUDA where available)")
    arg("--no-progress", action="store_true", help="no progress bar")
    return p


#: The options a command-line run was started with, in its --out (``_restart``).
RUN_JSON = "run.json"


def _run_options(args: argparse.Namespace) -> dict:
    """The options that make a run what it is (not where it goes, how far this call takes it,
    on which device, nor how it shows), as JSON reads them back."""
    skip = ("out", "resume", "stop_after", "device", "no_progress")
    return json.loads(json.dumps({k: v for k, v in vars(args).items() if k not in skip}))


def _restart(p: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """``--resume`` where ``--out`` holds no checkpoint: the line saying the run starts afresh
    where ``run.json`` there holds the same options (a run stopped before its first
    checkpoint, which a retry loop that always passes --resume must get going), else an error
    (a mistyped --out holds none). ``run.json`` rather than the records or the tokenizer: it is
    written before any data is loaded, so a run stopped while tokenising has one too, and it
    holds the options, which tell this run's leftovers from another's."""
    saved = Path(args.out) / RUN_JSON
    if not saved.is_file():
        p.error(
            f"--resume: {args.out} holds no checkpoint to continue (nor the {RUN_JSON} of a run "
            "stopped before its first: a mistyped --out?); check --out, or drop --resume to "
            "start a new run there"
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
    """``python -m gpt1lib.harness.pretrain`` (or ``torchrun ... -m gpt1lib.harness.pretrain``):
    the scale gives every default; ends with a summary (validation perplexity, checkpoint, how
    to resume). ``--out`` keeps the options in ``run.json``, written before any data is loaded,
    so that ``--resume`` starts a run stopped before its first checkpoint afresh
    (``_restart``)."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--scale", choices=tuple(SCALES), default="smoke")
    p = _parser(pre.parse_known_args(argv)[0].scale)
    args = p.parse_args(argv)
    if Path(args.out).is_file():
        p.error(f"--out {args.out} is a file: give a folder for the run")
    S, corpus, limit = SCALES[args.scale], args.corpus, args.corpus_limit
    given = {"total_steps": args.steps, "seed": args.seed}
    given |= {k: getattr(args, k) for k in ("batch_size", "micro_batch_size", "ckpt_interval")}
    settings = {k: v for k, v in given.items() if v is not None}
    cfg = replace(S.pretrain, experiment="pretrain:gpt", **settings)
    names = ("embd_pdrop", "attn_pdrop", "resid_pdrop")
    drop = {} if args.dropout is None else dict.fromkeys(names, args.dropout)
    proc = init_distributed(pick_device(args.device))
    ckpt = _resumed(p, args, cfg, drop, proc)  # before any data is loaded
    if proc.main:
        write_json(Path(args.out) / RUN_JSON, _run_options(args))
    spec = _tokenizer(str(ckpt) if ckpt is not None else args.tokenizer, args, proc)
    run = pretraining(
        S,
        corpus,
        args.out,
        folder=args.out,
        tokenizer=spec,
        corpus_limit=limit,
        model_overrides=drop,
        **settings,
    )
    kw = {"device": args.device, "stop_after": args.stop_after, "progress": not args.no_progress}
    result = run.run(**kw)
    if proc.main:
        print(summary(result, argv if argv is not None else sys.argv[1:]))
    return result


def _resumed(p: argparse.ArgumentParser, args, cfg, drop: dict, proc: Dist) -> Path | None:
    """With ``--resume``, the checkpoint in ``--out`` that the run goes on from, checked against
    the scale and options asked for (an error naming what differs), or None where the run
    starts afresh (``_restart``); None without ``--resume``."""
    if not args.resume:
        return None
    ckpt = latest_checkpoint(args.out)
    if ckpt is None:
        said = _restart(p, args)
        if proc.main:
            print(said)
        return None
    fix = (
        "resume with the --scale and options the run was started with, or start the "
        f"{args.scale} run in a new --out"
    )
    try:
        asked = f"--scale {args.scale} and these options"
        check_resume(ckpt, SCALES[args.scale], cfg, "gpt", asked, fix, **drop)
    except CheckpointError as e:
        p.error(f"--resume: {e}")
    return ckpt


def _tokenizer(spec: str, args, proc: Dist) -> str:
    """The tokenizer the run loads: ``spec``, or for ``train:N`` the folder in ``--out`` that
    the main process saves the learned one in (once: a resumed run reads it again)."""
    if not spec.startswith("train:"):
        return spec
    # BPE training breaks ties in an order that can change between runs: learn the merges
    # once, in the main process, and have every process read that tokenizer.
    saved = Path(args.out) / "tokenizer"
    if proc.main and not (saved / "tokenizer.json").is_file():
        texts = load_documents(args.corpus, "train", limit=args.corpus_limit).texts
        GPT1Tokenizer.from_spec(spec, texts).save(saved)
    if proc.world > 1:
        dist.barrier()
    return str(saved)


def summary(result: PretrainResult, argv: list[str]) -> str:
    """The lines a command-line run ends with: how far it got, its validation perplexity, its
    newest checkpoint, and the command that continues it."""
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
