"""Inputs checked before any expensive work, and warnings about data that is legal but suspect.

Every entry point checks its arguments here first, so that a bad one fails in a second with an
error naming the input, its value and the fix (``tests/BAD_INPUTS.md`` lists them). The warnings
(``DataWarning``) are for what runs but says little: a split of one class, STS-B scores all
equal, inputs cut to fit the context.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import fields
from operator import attrgetter
from pathlib import Path

from .settings import whole
from .tasks import DataWarning, Example, TaskSpec, get_task


def check_config(cfg) -> None:
    """Every field of a config (``settings``) that declares a check, in its range."""
    for f in fields(cfg):
        if f.metadata.get("check"):
            f.metadata["check"](f"{type(cfg).__name__}.{f.name}", getattr(cfg, f.name))


def check_pretrain(model, tokenizer, corpus, cfg, world: int, out_dir, stop_after) -> int:
    """Everything that can be wrong with a ``pretrain`` call (on ``world`` processes), before
    any work; returns the micro-batch size."""
    check_config(cfg)
    whole(none=True, hint="None: run to total_steps")("stop_after", stop_after)
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
    """The one check, wherever a tokenizer meets a model, that its vocabulary is the model's;
    ``fix`` ends the ``error``."""
    if tok.vocab_size != model.config.vocab_size:
        raise error(
            f"the tokenizer has {tok.vocab_size} tokens but the model's vocab_size is "
            f"{model.config.vocab_size}: {fix}"
        )


# ---------------------------------------------------------------- tasks


def check_finetune(task: TaskSpec, train, evals: dict) -> None:
    """``finetune``'s examples: a training split, labelled evaluation splits."""
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
    """A ``FinetuneRun``'s: the limits, a source of two splits, an evaluation split that is not
    the training split, ``also`` tasks that share the head."""
    whole(none=True, hint="training examples; None: all")("limit", limit)
    whole(none=True, hint="evaluation examples; None: all")("eval_limit", eval_limit)
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
    head = attrgetter("family", "labels", "n_answers")  # what a task's head is made of
    for other in map(get_task, also if not isinstance(also, str) else [also]):
        if head(other) != head(spec):
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
            message = (
                f"every score is {labels[0]:g}, so Pearson and Spearman correlations are "
                "undefined on it (NaN): use a split with varied scores"
            )
        else:
            what = spec.labels[labels[0]] if spec.labels else f"answer {labels[0] + 1}"
            why = "nothing else can be learned" if split == "train" else "the metric says little"
            message = (
                f"all {len(labels)} examples are {what!r}, one class: {why}. Check the file, "
                "or raise the limit"
            )
        warnings.warn(f"{spec.name} {split}: {message}", DataWarning, stacklevel=3)


def warn_truncated(spec: TaskSpec, encoded: dict, n_ctx: int) -> None:
    """A ``DataWarning`` for each split (``encoded``: name -> its §3.3 encodings) of which some
    examples lost tokens to fit ``n_ctx``."""
    for split, items in encoded.items():
        if cut := sum(enc.truncated for enc in items):
            why = f"{cut} of {len(items)} examples truncated to fit n_ctx={n_ctx} tokens"
            message = f"{spec.name} {split}: {why} (gpt1lib.transforms says what is cut)"
            warnings.warn(message, DataWarning, stacklevel=3)
