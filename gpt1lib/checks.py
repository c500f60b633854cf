"""Inputs checked before any expensive work, and warnings about data that is legal but suspect.

Every entry point (``pretrain``, ``finetune`` and its ``FinetuneRun``, ``zero_shot_score``, the
pretrain command line) checks its arguments here first (a chapter its parameters, in
``chapter.setup``), so that a bad one fails in a second with an error naming the input, its
value and the fix, not after pre-training with an unrelated one. ``tests/BAD_INPUTS.md`` lists
every bad input and what it gets.

The warnings (``DataWarning``) are for what runs but says little: a split that is all one
class, STS-B scores that are all equal (the correlations are undefined), inputs cut to fit the
context.
"""

from __future__ import annotations

import argparse
import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import fields
from numbers import Integral, Real
from pathlib import Path

from .tasks import DataWarning, Example, TaskSpec, get_task

__all__ = [
    "DataWarning",
    "check_batches",
    "check_finetune",
    "check_config",
    "check_labelled",
    "check_pretrain",
    "check_setting",
    "check_run_task",
    "check_source",
    "check_tokenizer",
    "count",
    "warn_data",
    "warn_truncated",
]


def count(name: str, value, minimum: int | None = 1, none: bool = False, hint: str = "") -> None:
    """``value`` must be a whole number >= ``minimum`` (any, if None; or None where ``none``)."""
    if value is None and none:
        return
    low = -math.inf if minimum is None else minimum
    if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
        allowed = "a whole number" + (f" >= {minimum}" if minimum is not None else "")
        allowed += " or None" if none else ""
        raise ValueError(f"{name}={value!r}: use {allowed}{f' ({hint})' if hint else ''}")


def number(
    name: str, value, low: float, high=math.inf, hint="", low_open=False, high_open=False
) -> None:
    """``value`` must be a real number in [low, high] (``low_open`` / ``high_open``: excluded)."""
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


def choice(name: str, value, choices: tuple, hint: str = "") -> None:
    """``value`` must be one of ``choices``."""
    if value not in choices:
        raise ValueError(
            f"{name}={value!r}: use one of {list(choices)}" + (f" ({hint})" if hint else "")
        )


RULES = {"count": count, "number": number, "choice": choice}


def check_setting(cls, field: str, value, name: str | None = None) -> None:
    """``value`` for the field ``field`` of the config class ``cls`` (``settings``), checked by
    the rule its declaration holds; the error names it ``name`` (else ``cls.field``)."""
    meta = cls.__dataclass_fields__[field].metadata
    kind, args = meta["check"]
    RULES[kind](name or f"{cls.__name__}.{field}", value, hint=meta["help"], **args)


def check_config(cfg) -> None:
    """Every field of a config (``settings``) that declares a check, in its range."""
    for f in fields(cfg):
        if f.metadata.get("check"):
            check_setting(type(cfg), f.name, getattr(cfg, f.name))


def check_pretrain(model, tokenizer, corpus, cfg, world: int, out_dir, stop_after) -> int:
    """Everything that can be wrong with a ``pretrain`` call (on ``world`` processes), before
    any work; returns the micro-batch size."""
    check_config(cfg)
    count("stop_after", stop_after, none=True, hint="None: run to total_steps")
    if Path(out_dir).is_file():
        raise ValueError(f"out_dir={str(out_dir)!r} is a file: give a folder for the run")
    model_cfg = model.config
    fix = "build the model with vocab_size=tokenizer.vocab_size (or load its own tokenizer)"
    check_tokenizer(tokenizer, model, fix)
    if corpus.train.block != model_cfg.n_ctx + 1:
        raise ValueError(
            f"the corpus was cut into blocks of {corpus.train.block} tokens but the "
            f"model's context is {model_cfg.n_ctx}: build_corpus(n_ctx={model_cfg.n_ctx})"
        )
    if int(corpus.train.tokens.max()) >= model_cfg.vocab_size:
        raise ValueError(
            "the corpus holds token ids outside the model's vocabulary: tokenise "
            "it with the tokenizer the model was built for"
        )
    micro = cfg.micro_batch_size or cfg.batch_size // world
    if cfg.batch_size % (micro * world):
        raise ValueError(
            f"batch_size={cfg.batch_size} is not a multiple of micro_batch_size="
            f"{micro} x {world} processes"
        )
    return micro


def check_tokenizer(tok, model, fix: str, error: type[Exception] = ValueError) -> None:
    """The one check that a vocabulary is the model's, so every id it makes is one the model
    knows: where a tokenizer meets a model (pre-training, a checkpoint's folder, fine-tuning,
    zero-shot); ``fix`` ends the ``error``."""
    if tok.vocab_size != model.config.vocab_size:
        raise error(
            f"the tokenizer has {tok.vocab_size} tokens but the model's vocab_size is "
            f"{model.config.vocab_size}: {fix}"
        )


# ---------------------------------------------------------------- tasks


def check_finetune(task: TaskSpec, train, evals: dict) -> None:
    """``finetune``'s examples: a training split, labelled evaluation splits; a
    ``DataWarning`` for a split of one class."""
    if not train:
        raise ValueError(f"no training examples for {task.name}")
    if not evals or not all(evals.values()):
        raise ValueError(
            f"give labelled evaluation examples for {task.name}, e.g. "
            "{'dev': load_examples(task, 'dev', source)}"
        )
    check_labelled(task, {"train": train, **evals})


def check_labelled(task: TaskSpec, splits: dict[str, Sequence[Example]]) -> None:
    """Every example of ``splits`` labelled and of ``task`` (its count of answers); then a
    ``DataWarning`` for a split of one class (``warn_data``)."""
    for split, exs in splits.items():
        if bad := [e for e in exs if e.label is None or len(e.answers) != (task.n_answers or 0)]:
            e, n = bad[0], task.n_answers or 0
            why = (
                "no label" if e.label is None else f"{len(e.answers)} answers; {task.title} has {n}"
            )
            raise ValueError(
                f"{task.name} {split}: {len(bad)} examples unlabelled or not {task.title}'s (e.g. "
                f"{e.uid!r}: {why}): pass labelled examples of that task, e.g. "
                f"load_examples({task.name!r}, {task.eval_split!r}, source)"
            )
    warn_data(task, splits)


def check_batches(n_train: int, cfg) -> None:
    """A run takes full batches only: at least one of them."""
    if n_train < cfg.batch_size:
        raise ValueError(
            f"{n_train} training examples do not fill one batch of {cfg.batch_size}: no update"
        )


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


def check_run_task(spec: TaskSpec, source, limit, eval_limit, also, eval_split) -> None:
    """A ``FinetuneRun``'s from a source: the limits, a source that holds two splits, an
    evaluation split that is not the training split, ``also`` tasks that share the head."""
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
            f"source={str(source)!r} is one file, and a fine-tuning run reads two splits (train "
            f"and {split}): one file never serves both. Pass the folder that holds both files"
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


def warn_truncated(spec: TaskSpec, encoded: dict, n_ctx: int) -> None:
    """A ``DataWarning`` for each split (``encoded``: name -> its §3.3 encodings) of which some
    examples lost tokens to fit ``n_ctx``."""
    for split, items in encoded.items():
        if cut := sum(enc.truncated for enc in items):
            warnings.warn(
                f"{spec.name} {split}: {cut} of {len(items)} examples truncated to fit "
                f"n_ctx={n_ctx} tokens (gpt1lib.transforms says what is cut)",
                DataWarning,
                stacklevel=3,
            )


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
