"""A pre-trained model for a chapter, and pre-training from the command line.

``pretrained_model`` gives fine-tuning its starting point: this book's own pre-training run at a
scale (made, or finished, first if it is missing: seconds at the smoke scale), GPT-1's released
weights, or any checkpoint folder ``pretrain`` wrote. ``main`` is ``python -m gpt1lib.pretrain``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
from dataclasses import asdict, replace
from pathlib import Path

import torch
import torch.distributed as dist

from .bundle import is_bundle
from .bundle import tokenizer as bundle_tokenizer
from .checkpoint import (
    CheckpointError,
    check_model_folder,
    latest_checkpoint,
    load_model,
    read_json,
    read_state,
    write_json,
)
from .checks import dropout, positive_int
from .corpus import build_corpus, load_documents
from .fast import FastGPT
from .finetune import FinetuneConfig, FinetuneResult, run_task
from .lstm import LSTMLM
from .paths import shown
from .pretrain import PretrainConfig, PretrainResult, init_distributed, pretrain, settings_diff
from .runtime import pick_device, seed_everything
from .scales import SCALES, Scale
from .tasks import unavailable
from .tokenizer import GPT1Tokenizer
from .weights import HUB_ID, load_pretrained


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


def _scale_of(meta: dict) -> str | None:
    """The scale whose model has the shape of ``meta`` (a run config's "model"): its blocks,
    heads and width (an LSTM's units), whatever its vocabulary, context or dropout."""
    for name, S in SCALES.items():
        own = asdict(S.lstm_config() if meta.get("arch") == "LSTMLM" else S.model_config())
        shape = [k for k in ("n_layer", "n_head", "n_embd", "n_hidden") if k in own]
        if all(own[k] == meta.get("config", {}).get(k) for k in shape):
            return name
    return None


def check_resume(
    ckpt: Path, S: Scale, cfg: PretrainConfig, arch: str, asked: str, fix: str, **overrides
) -> None:
    """A ``CheckpointError`` unless ``ckpt`` holds a run of the model and recipe that ``asked``
    gives (scale ``S``, ``cfg``, the model's ``overrides``), naming each difference and ``fix``.
    Called before any data is loaded: ``pretrain`` compares the whole run config too, but only
    once the scale's corpus is built (minutes of tokenising at cpu; offline, a hub error that
    says nothing of the checkpoint)."""
    run = read_state(ckpt).get("run_config")
    if not isinstance(run, dict) or "model" not in run:
        return  # not pretrain's checkpoint: pretrain says so
    vocab = run["model"]["config"]["vocab_size"]  # a resume reads the checkpoint's tokenizer
    with torch.device("meta"):  # the model's config, without memory for its weights
        model = new_model(S, vocab, arch, **overrides)
    diff = settings_diff(run, model, cfg)
    if diff:
        its = _scale_of(run["model"])
        shape = f"the {its} scale's shape" if its else "the shape of no scale"
        raise CheckpointError(
            f"{ckpt} is a run of another model or recipe than {asked} (its model has {shape}); "
            "they differ in\n  " + "\n  ".join(diff) + f"\n{fix}"
        )


def _model_and_corpus(S: Scale, tok, corpus, seed: int, cache_dir, limit=None, arch="gpt", **kw):
    """A new model of the scale's shape and ``corpus`` cut into its blocks by ``tok``, the two
    steps before ``pretrain`` (``kw`` overrides the model's config)."""
    data = build_corpus(
        tok, S.model_config().n_ctx, corpus, seed=seed, limit=limit, cache_dir=cache_dir
    )
    seed_everything(seed)
    return new_model(S, tok.vocab_size, arch, **kw), data


#: What pre-training costs at each scale, said before a chapter starts it (small: its 98 PFLOP
#: at 25-35% of a GPU's peak, gpt1lib.flops; cpu: measured on two cores).
PRETRAIN_TIME = {
    "smoke": "seconds on a CPU",
    "cpu": "about 17 minutes on two CPU cores, the LSTM about 14 more",
    "small": "about 15 minutes on an A100 or H100, 2 hours or more on a T4",
    "paper": "about 30 days on 8 GPUs (the paper's); run it apart, with torchrun",
}
#: The released model: 117 M float32 parameters on the hub.
RELEASED_TIME = "a 480 MB download, a minute or so"


def resolve_init(init: str | None, scale: str) -> str:
    """``init`` as given, or where None the scale's default (``Scale.init``): GPT-1's released
    weights ("released") at ``small`` and ``paper``, where pre-training first would take hours,
    and this book's own pre-training run ("pretrain") at ``smoke`` and ``cpu``, where it takes
    seconds or minutes and the released 12 x 768 model would be slower than the scale."""
    return init if init is not None else SCALES[scale].init


def start_message(scale: str, out_dir, init: str, arch: str = "gpt") -> str:
    """What ``pretrained_model`` is about to do and about how long it takes, one line."""
    if init == "released":
        where = os.environ.get(RELEASED_ENV) or HUB_ID
        return f"starting from GPT-1's released weights ({where}; {RELEASED_TIME})"
    if init != "pretrain":
        return f"starting from the checkpoint {shown(init)}"
    run_dir = Path(out_dir) / scale / ("pretrain" if arch == "gpt" else f"pretrain_{arch}")
    ckpt = latest_checkpoint(run_dir)
    state = read_state(ckpt) if ckpt is not None else None
    if state is not None and state["step"] >= state["run_config"]["pretrain"]["total_steps"]:
        return f"starting from this book's pre-training run {shown(run_dir)} (done)"
    doing = "finishing" if state is not None else "pre-training"
    return (
        f"{doing} the {scale} scale's {arch} model first in {shown(run_dir)} "
        f"({PRETRAIN_TIME[scale]}; "
        "init='released' starts from GPT-1's weights instead)"
    )


#: A local copy of the hub's openai-community/openai-gpt (config.json, model.safetensors,
#: vocab.json, merges.txt) that init="released" reads instead of the hub.
RELEASED_ENV = "GPT1_RELEASED_DIR"


def released_model():
    """GPT-1's released weights and vocabulary, and where they came from: the folder
    ``$GPT1_RELEASED_DIR`` (the hub repository's files) where it is set, else the hub."""
    folder = os.environ.get(RELEASED_ENV)
    if not folder:
        return load_pretrained(), GPT1Tokenizer.from_hub(), f"GPT-1's released weights ({HUB_ID})"
    f = Path(folder)
    tok = GPT1Tokenizer.from_released(f / "vocab.json", f / "merges.txt")
    return load_pretrained(f), tok, f"GPT-1's released weights ({RELEASED_ENV}={f})"


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

    ``init``: "pretrain", this project's pre-training run ``out_dir/<scale>/pretrain`` (or
    ``pretrain_lstm`` for ``arch="lstm"``), run or finished first if needed (``PRETRAIN_TIME``);
    "released", GPT-1's released weights and vocabulary (``released_model``); a checkpoint
    folder written by ``pretrain``; or None, the scale's default (``resolve_init``: released at
    small and paper, pretrain at smoke and cpu). The LSTM reads the transformer run's
    tokenizer, so the two see the same tokens.
    """
    if arch not in ("gpt", "lstm"):
        raise ValueError(f"arch={arch!r}: use 'gpt' (GPT-1) or 'lstm' (the Table 5 baseline)")
    if scale not in SCALES:
        raise ValueError(f"scale={scale!r}: choose one of {tuple(SCALES)}")
    init = resolve_init(init, scale) if arch == "gpt" else init or "pretrain"
    if init not in ("pretrain", "released"):
        check_model_folder(Path(init), f"init={str(init)!r}: use 'pretrain', 'released' or ")
    if init == "released":
        if arch != "gpt":
            raise ValueError("only GPT-1's transformer was released; pre-train the LSTM here")
        return released_model()
    if init != "pretrain":
        model, tok = load_run_model(init)
        return model, tok, f"checkpoint {shown(init)}"
    return _own_run(scale, out_dir, corpus, arch, device, progress)


def _own_run(scale: str, out_dir, corpus, arch: str, device, progress: bool):
    """``pretrained_model``'s "pretrain": the run in ``out_dir/<scale>``, made or finished."""
    S = SCALES[scale]
    run_dir = Path(out_dir) / scale / ("pretrain" if arch == "gpt" else f"pretrain_{arch}")
    ckpt = latest_checkpoint(run_dir)
    state = read_state(ckpt) if ckpt is not None else None
    if state is None or state["step"] < state["run_config"]["pretrain"]["total_steps"]:
        corpus = corpus or S.corpus
        cfg = replace(S.pretrain, experiment=f"pretrain:{arch}")
        if ckpt is not None:
            fix = (
                f"its settings are not the {scale} scale's now: delete {shown(run_dir)} (or pass "
                f"another out_dir) to pre-train the {scale} scale's model afresh"
            )
            check_resume(ckpt, S, cfg, arch, f"the {scale} scale", fix)
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
        cache = Path(out_dir) / "cache"
        model, data = _model_and_corpus(S, tok, corpus, cfg.seed, cache, S.corpus_limit, arch)
        kw = {"resume": ckpt is not None, "scale": scale, "device": device, "progress": progress}
        pretrain(model, tok, data, cfg, run_dir, **kw)
        ckpt = latest_checkpoint(run_dir)
    model, tok = load_run_model(ckpt)
    return model, tok, f"pre-trained here ({arch}, {scale}, {shown(ckpt)})"


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


def _parser(scale: str = "smoke") -> argparse.ArgumentParser:
    """The command line, its defaults those of ``scale`` (so ``--scale small --help`` shows
    small's)."""
    S, P = SCALES[scale], SCALES[scale].pretrain
    p = argparse.ArgumentParser(
        prog="python -m gpt1lib.pretrain",
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
    """``python -m gpt1lib.pretrain`` (or ``torchrun ... -m gpt1lib.pretrain``): the scale gives
    every default; ends with a summary (validation perplexity, checkpoint, how to resume).
    ``--out`` keeps the options in ``run.json``, written before any data is loaded, so that
    ``--resume`` starts a run stopped before its first checkpoint afresh (``_restart``)."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--scale", choices=tuple(SCALES), default="smoke")
    p = _parser(pre.parse_known_args(argv)[0].scale)
    args = p.parse_args(argv)
    if Path(args.out).is_file():
        p.error(f"--out {args.out} is a file: give a folder for the run")
    S, corpus, limit = SCALES[args.scale], args.corpus, args.corpus_limit
    given = {"total_steps": args.steps, "seed": args.seed}
    given |= {k: getattr(args, k) for k in ("batch_size", "micro_batch_size", "ckpt_interval")}
    cfg = replace(S.pretrain, **{k: v for k, v in given.items() if v is not None})
    names = ("embd_pdrop", "attn_pdrop", "resid_pdrop")
    drop = {} if args.dropout is None else dict.fromkeys(names, args.dropout)
    proc = init_distributed(pick_device(args.device))
    ckpt = latest_checkpoint(args.out) if args.resume else None
    if args.resume and ckpt is None:
        said = _restart(p, args)
        if proc.main:
            print(said)
    if ckpt is not None:  # before any data is loaded
        fix = (
            "resume with the --scale and options the run was started with, or start the "
            f"{args.scale} run in a new --out"
        )
        try:
            asked = f"--scale {args.scale} and these options"
            check_resume(ckpt, S, cfg, "gpt", asked, fix, **drop)
        except CheckpointError as e:
            p.error(f"--resume: {e}")
    if proc.main:
        write_json(Path(args.out) / RUN_JSON, _run_options(args))
    spec = str(ckpt) if ckpt is not None else args.tokenizer
    if spec.startswith("train:"):
        # BPE training breaks ties in an order that can change between runs: learn the merges
        # once, in the main process, and have every process read that tokenizer.
        saved = Path(args.out) / "tokenizer"
        if proc.main and not (saved / "tokenizer.json").is_file():
            texts = load_documents(corpus, "train", limit=limit).texts
            load_tokenizer(spec, texts).save(saved)
        if proc.world > 1:
            dist.barrier()
        spec = str(saved)
    tok = load_tokenizer(spec)
    cache = Path(args.out) / "cache"
    model, data = _model_and_corpus(S, tok, corpus, args.seed, cache, limit, **drop)
    kw = {"resume": ckpt is not None, "scale": args.scale, "device": args.device}
    kw["stop_after"] = args.stop_after
    result = pretrain(model, tok, data, cfg, args.out, progress=not args.no_progress, **kw)
    if proc.main:
        print(summary(result, argv if argv is not None else sys.argv[1:]))
    return result


def summary(result: PretrainResult, argv: list[str]) -> str:
    """The lines a command-line run ends with: how far it got, its validation perplexity, its
    newest checkpoint, and the command that continues it."""
    ckpt = latest_checkpoint(result.out_dir)
    ppl = f"{math.exp(result.val_loss):,.2f}" if result.val_loss is not None else "not yet measured"
    again = shlex.join(["python", "-m", "gpt1lib.pretrain", *argv])
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
