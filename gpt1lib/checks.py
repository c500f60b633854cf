"""Inputs checked before any expensive work, and warnings about data that is legal but suspect.

Every entry point (``pretrain``, ``finetune``, ``run_task``, ``zero_shot_score``, the pretrain
command line and each chapter's set-up cell) checks its arguments here first, so that a bad one
fails in a second with an error naming the input, its value and the fix, not after pre-training
with an unrelated one. ``tests/BAD_INPUTS.md`` lists every bad input and what it gets.

The warnings (``DataWarning``) are for what runs but says little: a split that is all one
class, STS-B scores that are all equal (the correlations are undefined), inputs cut to fit the
context.
"""

from __future__ import annotations

import argparse
import math
import os
import warnings
from collections.abc import Callable, Sequence
from numbers import Integral, Real
from pathlib import Path

from .loss import REGRESSIONS
from .paths import local_path, results_dir, runs_dir
from .tasks import DataWarning, Example, TaskSpec, get_task, task_names

__all__ = [
    "DataWarning", "check_finetune", "check_finetune_config", "check_parameters",
    "check_pretrain_config", "check_run_task", "check_source", "check_tokenizer", "count",
    "warn_data", "warn_truncated",
]  # fmt: skip


def count(name: str, value, minimum: int | None = 1, none: bool = False, hint: str = "") -> None:
    """``value`` must be a whole number >= ``minimum`` (any, if None; or None where ``none``)."""
    if value is None and none:
        return
    low = -math.inf if minimum is None else minimum
    if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
        allowed = "a whole number" + (f" >= {minimum}" if minimum is not None else "")
        allowed += " or None" if none else ""
        raise ValueError(f"{name}={value!r}: use {allowed}{f' ({hint})' if hint else ''}")


def number(name: str, value, low: float, high: float = math.inf, hint: str = "", **open_) -> None:
    """``value`` must be a real number in [low, high] (``low_open`` / ``high_open``: excluded)."""
    low_open, high_open = open_.get("low_open", False), open_.get("high_open", False)
    ok = isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > low if low_open else value >= low)
    ok = ok and (value < high if high_open else value <= high)
    if not ok:
        left = "(" if low_open else "["
        right = ")" if high_open or high == math.inf else "]"
        raise ValueError(
            f"{name}={value!r}: use a number in {left}{low:g}, {high:g}{right}"
            + (f" ({hint})" if hint else "")
        )


# ---------------------------------------------------------------- configs


def check_finetune_config(cfg) -> None:
    """Every field of a ``FinetuneConfig`` in its range."""
    c = "FinetuneConfig."
    number(c + "lr", cfg.lr, 0, low_open=True, hint="the paper: 6.25e-5")
    count(c + "batch_size", cfg.batch_size, hint="the paper: 32")
    count(c + "epochs", cfg.epochs, hint="the paper: 3")
    number(c + "warmup", cfg.warmup, 0, 1, hint="a fraction of training; the paper: 0.002")
    number(c + "weight_decay", cfg.weight_decay, 0, hint="the paper: 0.01")
    number(c + "grad_clip", cfg.grad_clip, 0, low_open=True, hint="a global norm, e.g. 1.0")
    number(c + "lm_coef", cfg.lm_coef, 0, hint="lambda of L3: the paper's 0.5, 0 turns L1 off")
    number(c + "clf_pdrop", cfg.clf_pdrop, 0, 1, high_open=True, hint="the paper: 0.1")
    count(c + "n_transfer", cfg.n_transfer, -1, none=True, hint="None: every block")
    count(c + "max_len", cfg.max_len, 4, none=True, hint="None: the model's context")
    count(c + "eval_batch_size", cfg.eval_batch_size)
    count(c + "eval_train_examples", cfg.eval_train_examples, 0)
    count(c + "seed", cfg.seed, None)


def check_pretrain_config(cfg, stop_after: int | None = None) -> None:
    """Every field of a ``PretrainConfig`` in its range (and ``pretrain``'s ``stop_after``)."""
    c = "PretrainConfig."
    count(c + "total_steps", cfg.total_steps, none=True, hint="None: `epochs` over the corpus")
    number(c + "epochs", cfg.epochs, 0, low_open=True, hint="the paper: 100")
    count(c + "batch_size", cfg.batch_size, hint="sequences per update; the paper: 64")
    count(c + "micro_batch_size", cfg.micro_batch_size, none=True, hint="None: no accumulation")
    number(c + "max_lr", cfg.max_lr, 0, low_open=True, hint="the paper: 2.5e-4")
    count(c + "warmup_steps", cfg.warmup_steps, 0, hint="the paper: 2000")
    number(c + "weight_decay", cfg.weight_decay, 0, hint="the paper: 0.01")
    number(c + "grad_clip", cfg.grad_clip, 0, low_open=True, hint="a global norm, e.g. 1.0")
    for name in ("log_interval", "eval_interval", "eval_batches", "ckpt_interval"):
        count(c + name, getattr(cfg, name), hint="updates (batches) between two")
    count(c + "n_log_checkpoints", cfg.n_log_checkpoints, 0)
    count(c + "seed", cfg.seed, None)
    count("stop_after", stop_after, none=True, hint="None: run to total_steps")


def check_tokenizer(tok, model, fix: str) -> None:
    """The tokenizer's vocabulary is the model's, so every id it makes is one the model knows
    (ids are checked once, where they enter); ``fix`` ends the error."""
    if tok.vocab_size != model.config.vocab_size:
        raise ValueError(
            f"the tokenizer has {tok.vocab_size} tokens but the model's vocab_size is "
            f"{model.config.vocab_size}: {fix}"
        )


# ---------------------------------------------------------------- tasks


def check_finetune(task: TaskSpec, cfg, train, evals: dict) -> None:
    """``finetune``'s config and examples: a training split, labelled evaluation splits; a
    ``DataWarning`` for a split of one class."""
    check_finetune_config(cfg)
    if not train:
        raise ValueError(f"no training examples for {task.name}")
    if not evals or not all(evals.values()):
        raise ValueError(
            f"give labelled evaluation examples for {task.name}, e.g. "
            "{'dev': load_examples(task, 'dev', source)}"
        )
    for split, exs in {"train": train, **evals}.items():
        if unlabeled := [e.uid for e in exs if e.label is None]:
            raise ValueError(
                f"{task.name} {split} has {len(unlabeled)} unlabelled examples (e.g. "
                f"{unlabeled[0]!r}): train and evaluate on labelled splits"
            )
    warn_data(task, {"train": train, **evals})


def check_source(source, name: str = "source") -> None:
    """A task source: "fixture", "hub", or a folder or file that exists."""
    if source in ("fixture", "hub"):
        return
    if not isinstance(source, (str, os.PathLike)) or not Path(source).exists():
        raise ValueError(
            f"{name}={source!r}: no such file or folder. Use 'fixture' (the small files in "
            "the package), 'hub', or a folder with the data sets in their official layouts "
            "(glue/<TASK>/*.tsv, snli/, race/, ...), e.g. ../../shared/data"
        )


def check_run_task(spec: TaskSpec, source, cfg, limit, eval_limit, also, eval_split) -> None:
    """``run_task``'s arguments: the config, the limits, a source that holds two splits, an
    evaluation split that is not the training split, ``also`` tasks that share the head."""
    check_finetune_config(cfg)
    count("limit", limit, none=True, hint="training examples; None: all")
    count("eval_limit", eval_limit, none=True, hint="evaluation examples; None: all")
    check_source(source)
    split = eval_split or spec.eval_split
    if split not in spec.splits or split == "train":
        raise ValueError(
            f"eval_split={split!r}: {spec.title} is scored on one of "
            f"{[s for s in spec.splits if s != 'train']}, never on the split it trains on"
        )
    if source not in ("fixture", "hub") and Path(source).is_file():
        raise ValueError(
            f"source={str(source)!r} is one file, and run_task reads two splits (train and "
            f"{split}): one file never serves both. Pass the folder that holds both files"
        )
    for other in map(get_task, also if not isinstance(also, str) else [also]):
        if (other.family, other.labels, other.n_answers) != (
            spec.family,
            spec.labels,
            spec.n_answers,
        ):
            raise ValueError(
                f"also={other.name!r}: its labels or family differ from {spec.name}'s, so the "
                f"model fine-tuned on {spec.name} cannot score it; `also` is for tasks that "
                "share the training data (mnli_mm beside mnli_m, race_m beside race)"
            )


def warn_data(spec: TaskSpec, splits: dict[str, Sequence[Example]]) -> None:
    """A ``DataWarning`` for each split whose labels are all one class (or STS-B scores all
    one value: the correlations are undefined on it)."""
    for split, examples in splits.items():
        labels = [e.label for e in examples if e.label is not None]
        if len(labels) < 2 or len(set(labels)) > 1:
            continue
        if spec.family == "similarity" and not spec.labels:
            warnings.warn(
                f"{spec.name} {split}: every score is {labels[0]:g}, so Pearson and Spearman "
                "correlations are undefined on it (NaN): use a split with varied scores",
                DataWarning,
                stacklevel=3,
            )
            continue
        what = spec.labels[labels[0]] if spec.labels else f"answer {labels[0] + 1}"
        why = "nothing else can be learned" if split == "train" else "the metric says little"
        warnings.warn(
            f"{spec.name} {split}: all {len(labels)} examples are {what!r}, one class: {why}. "
            "Check the file, or raise the limit",
            DataWarning,
            stacklevel=3,
        )


def _full_lengths(ex: Example, family: str, tok) -> list[int]:
    """Each §3.3 sequence's length before truncation."""
    parts = [len(tok.encode(t)) for t in ex.texts]
    if family == "classification":
        return [2 + parts[0]]
    if family == "multiple_choice":
        return [3 + sum(parts) + len(tok.encode(a)) for a in ex.answers]
    return [3 + sum(parts)] * (2 if family == "similarity" else 1)


def warn_truncated(spec: TaskSpec, examples: dict, encoded: dict, tok, n_ctx: int) -> dict:
    """How many examples of each split (``examples``: name -> examples; ``encoded``: name ->
    their §3.3 encodings) lost tokens to fit ``n_ctx``; a ``DataWarning`` for each split that
    lost any."""
    out = {}
    for split, items in encoded.items():
        exs = examples[split]
        out[split] = sum(
            sum(map(len, enc.seqs)) < sum(_full_lengths(ex, spec.family, tok))
            for ex, enc in zip(exs, items, strict=True)
        )
        if out[split]:
            warnings.warn(
                f"{spec.name} {split}: {out[split]} of {len(exs)} examples truncated to fit "
                f"n_ctx={n_ctx} tokens (gpt1lib.transforms says what is cut)",
                DataWarning,
                stacklevel=3,
            )
    return out


# ---------------------------------------------------------------- chapters


def _path(name: str, value, must_exist: bool = True) -> None:
    if not isinstance(value, (str, os.PathLike)):
        raise ValueError(f"{name}={value!r}: give a path")
    if must_exist and not Path(value).exists():
        raise ValueError(f"{name}={str(value)!r}: no such file or folder")
    if not must_exist and Path(value).is_file():
        raise ValueError(f"{name}={str(value)!r} is a file: give a folder (it is made if missing)")


def _corpus(name: str, value) -> None:
    """None, "fixture", a local text file or folder, or a hub id ("owner/name")."""
    if value in (None, "fixture"):
        return
    text = str(value)
    looks_local = text.startswith(("/", ".", "~")) or text.count("/") > 1
    if looks_local and not Path(text).expanduser().exists():
        raise ValueError(
            f"{name}={text!r}: no such file or folder (nor a hub id, owner/name). Use "
            "'fixture', a text file or a folder of .txt files, or e.g. 'emozilla/pg19'"
        )


def _tokenizer(name: str, value) -> None:
    """None, "released", "train:N", or a folder written by ``GPT1Tokenizer.save``."""
    text = str(value)
    if value is None or text == "released" or (text[:6] == "train:" and text[6:].isdigit()):
        return
    if not Path(text).exists():
        raise ValueError(
            f"{name}={text!r}: use 'released', 'train:N' (N merges learned on the corpus) or "
            "a folder written by GPT1Tokenizer.save"
        )


def _init(value, S) -> int | None:
    """Check ``init``; returns the depth of the model it gives where known before loading."""
    from .checkpoint import check_model_folder
    from .runs import resolve_init

    if value is None and S is not None:
        value = resolve_init(value, S.name)
    if value in (None, "pretrain"):
        return S.model_config().n_layer if S is not None else None
    if value == "released":
        return 12
    if not isinstance(value, (str, os.PathLike)):
        raise ValueError(f"init={value!r}: use 'pretrain', 'released' or a checkpoint folder")
    check_model_folder(Path(local_path(value)), f"init={str(value)!r}: ")
    return None


def _folder(name: str, value, resolve: Callable) -> None:
    """None (the repository's folder), or a folder path, resolved as the chapter will."""
    if value is not None:
        _path(name, resolve(value) if isinstance(value, (str, os.PathLike)) else value, False)


def _rule(kind: str, *args) -> Callable:
    fns = {"count": count, "number": number, "path": _path}
    return lambda name, value: fns[kind](name, value, *args)


#: Each chapter parameter's check (``init``, ``n_transfer`` and ``tasks`` are checked apart).
PARAMETERS: dict[str, Callable] = {
    "seed": _rule("count", None, False, "e.g. -p seed 1"),
    "lm_coef": _rule("number", 0, math.inf, "lambda of L3: the paper's 0.5, or 0"),
    "limit": _rule("count", 1, True, "examples; None: the scale's"),
    "eval_limit": _rule("count", 1, True, "examples; None: the scale's"),
    "corpus_limit": _rule("count", 1, True, "documents; None: the scale's"),
    "steps": _rule("count", 1, True, "updates; None: the scale's"),
    "n_merges": _rule("count", 0, True, "None: the scale's"),
    "agreement_texts": _rule("count", 0, False, "paragraphs"),
    "batch": _rule("count", 1, True, "None: the scale's"),
    "seq": _rule("count", 2, True, "None: the scale's"),
    "task": lambda name, value: get_task(value),
    "tasks": lambda name, value: value is None or task_names(value),
    "source": lambda name, value: value is None or check_source(local_path(value), name),
    "corpus": lambda name, value: _corpus(name, local_path(value)),
    "tokenizer": lambda name, value: _tokenizer(name, local_path(value)),
    "out_dir": lambda name, value: _folder(name, value, runs_dir),
    "results_dir": lambda name, value: _folder(name, value, results_dir),
    "released_bpe": lambda name, value: value is None or _path(name, local_path(value)),
    "resume": lambda name, value: _boolean(name, value),
    "compile": lambda name, value: _boolean(name, value),
    "regression": lambda name, value: _choice(name, value, REGRESSIONS),
}


def _choice(name: str, value, choices: tuple) -> None:
    if value not in choices:
        raise ValueError(f"{name}={value!r}: use one of {list(choices)}")


def _boolean(name: str, value) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name}={value!r}: use True or False")


def check_parameters(S, **params) -> None:
    """A chapter's parameters (its set-up cell passes them all, right after resolving the
    scale: ``S``, its ``Scale``, or None), each checked before anything is loaded or
    pre-trained; an error names the parameter, its value and what it takes."""
    try:
        n_layer = _init(params.get("init"), S)
        for name, value in params.items():
            if name == "n_transfer":
                high = f" up to {n_layer} (every block)" if n_layer is not None else ""
                count(name, value, -1, True, f"-1: nothing, 0: the embeddings,{high}")
                if None not in (value, n_layer) and value > n_layer:
                    raise ValueError(
                        f"n_transfer={value}: the model has {n_layer} blocks; use -1 (nothing), "
                        f"0 (the embeddings) up to {n_layer} (every block)"
                    )
            elif name in PARAMETERS:
                PARAMETERS[name](name, value)
            elif name != "init":
                raise KeyError(f"no rule for the parameter {name!r}: add one to PARAMETERS")
    except ValueError as e:
        raise ValueError(f"bad chapter parameter: {e}") from None


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return value


def dropout(text: str) -> float:
    """An argparse type: a probability in [0, 1)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a dropout rate in [0, 1)")
    return value
