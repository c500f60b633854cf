"""The task registry: one ``TaskSpec`` per task (what it is, how it is scored, where its data
is, how its files are read); ``compute_metrics``."""

from __future__ import annotations

import random
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from ..facts import PAPER_TABLES
from ..stats import METRICS

Family = Literal["classification", "entailment", "similarity", "multiple_choice"]
SPLITS = ("train", "dev", "test")
#: The fixture source: one folder per data set, each in its official layout (see README.md there).
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "tasks"


class TaskDataUnavailableError(RuntimeError):
    """A task's data could not be had from the source asked for."""


class DataWarning(UserWarning):
    """Data that runs but says little: one class only, constant scores, truncated inputs."""


@dataclass(frozen=True)
class Example:
    """One item of a task, in the parts §3.3 joins: ``texts`` (text,), (premise, hypothesis),
    (a, b) or (context, question); ``answers`` of multiple choice; ``label`` a class index, a
    score (STS-B), the right answer's index, or None (GLUE test)."""

    texts: tuple[str, ...]
    answers: tuple[str, ...] = ()
    label: int | float | None = None
    uid: str = ""


_HUB_SPLITS = (("train", "train"), ("dev", "validation"), ("test", "test"))


@dataclass(frozen=True)
class HubSource:
    """Where a task sits on the Hugging Face hub and how its columns become an ``Example``."""

    repo: str
    config: str | None
    texts: tuple[str, ...]  # columns that become Example.texts, in order
    label: str = "label"  # class index (-1: none), float score, answer letter, or label string
    answers: str = ""  # multiple choice: the column holding the candidate answers
    splits: tuple[tuple[str, str], ...] = _HUB_SPLITS  # (our split, the hub's split)
    unlabeled: tuple[str, ...] = ()  # hub splits whose labels are all -1 (GLUE test)

    def split(self, name: str) -> str:
        """The hub's name for our split ``name``."""
        if name not in dict(self.splits):
            ours = [ours for ours, _ in self.splits]
            raise ValueError(f"{self.repo} ({self.config}) has no {name!r} split; it has {ours}")
        return dict(self.splits)[name]


@dataclass(frozen=True)
class TaskSpec:
    """One evaluation task of the paper: what it is, how it is scored, where its data is."""

    name: str  # registry key
    title: str  # as in the paper's tables
    family: Family  # which input transformation of §3.3 / Figure 1
    labels: tuple[str, ...] = ()  # class names in index order; () for STS-B and multiple choice
    n_answers: int | None = None  # candidates per multiple-choice item
    metrics: tuple[str, ...] = ("accuracy",)  # the first is the paper's
    paper_split: str = "test"  # the split the paper reports ("" where it does not say)
    eval_split: str = "dev"  # the split a local reproduction compares on
    split_note: str = ""  # why eval_split stands in for paper_split, and what is missing locally
    hub: HubSource | None = None  # None: no hub copy that `datasets` loads without a script
    manual: str = ""  # "" or how to get the data by hand
    splits: tuple[str, ...] = SPLITS  # the splits this task has
    # The official layout: sub-folders of the folder given where the data set may sit (tried in
    # order; "" is the folder itself) and, per split, file names or globs in preference.
    folders: tuple[str, ...] = ("",)
    files: tuple[tuple[str, tuple[str, ...]], ...] = ()
    reader: Literal["pairs", "race", "story_cloze", "dprd"] = "pairs"
    #: pairs: for each text and then the label, the column names the layouts use for it.
    columns: tuple[tuple[str, ...], ...] = ()
    headerless: tuple[str, ...] | None = None  # column names where a layout has no header line
    label_aliases: tuple[tuple[str, str], ...] = ()  # file spellings -> label names
    digit_labels: bool = False  # files may give the class index as a digit ("0" / "1")
    no_gold: bool = False  # drop pairs without a gold label (gold_label "-"), as GLUE does
    race_levels: tuple[str, ...] = ()  # RACE: the school levels kept
    truncation: str = "family"  # how inputs are cut to fit n_ctx (transforms.TRUNCATIONS)


_GLUE_NOTE = (
    "The paper reports the GLUE server's test set (Table {}), whose labels are not public: "
    "compare on dev and say so. "
)
_NLI = ("entailment", "neutral", "contradiction")
_NLI_COLUMNS = (("sentence1", "text_a"), ("sentence2", "text_b"), ("gold_label", "label"))
_PARAPHRASE = ("not_paraphrase", "paraphrase")
_SUBSETS = ("train_subset_*.json",)


def _glue_hub(config: str, texts: tuple[str, ...], dev: str = "validation", test: str = "test"):
    splits = (("train", "train"), ("dev", dev), ("test", test))
    return HubSource("nyu-mll/glue", config, texts, splits=splits, unlabeled=(test,))


def _glue_folders(folder: str) -> tuple[str, ...]:
    return ("", folder, f"glue/{folder}", f"glue_data/{folder}")


def _jsonl(*stems: str) -> tuple[str, ...]:
    return tuple(f"{stem}.jsonl{gz}" for stem in stems for gz in ("", ".gz"))


def _glue(name, title, *args, texts, note, columns=(), train=(), dev=(), test=(), **kw):
    """A GLUE task, compared on dev: the hub's ``texts`` columns, the TSV ``columns`` (by
    default ``texts`` and "label") of the folder named ``title`` (``train`` / ``dev`` /
    ``test``: file names tried after train.tsv / after dev.tsv / before test.tsv)."""
    table = next(k for k, tasks in PAPER_TABLES.items() if name in tasks)
    return TaskSpec(
        name,
        title,
        *args,
        split_note=_GLUE_NOTE.format(table) + note,
        hub=_glue_hub(name, texts),
        folders=_glue_folders(title),
        files=(
            ("train", ("train.tsv", *train)),
            ("dev", ("dev.tsv", *dev)),
            ("test", (*test, "test.tsv")),
        ),
        columns=columns or (*((t,) for t in texts), ("label",)),
        **kw,
    )


def _mnli(name: str, title: str, which: str, note: str) -> TaskSpec:
    return TaskSpec(
        name,
        title,
        "entailment",
        _NLI,
        split_note=_GLUE_NOTE.format(2) + note,
        hub=_glue_hub("mnli", ("premise", "hypothesis"), f"validation_{which}", f"test_{which}"),
        folders=(*_glue_folders("MNLI"), "multinli_1.0"),
        files=(
            ("train", (*_jsonl("multinli_1.0_train"), "train.tsv", "train_subset_*")),
            ("dev", (*_jsonl(f"multinli_1.0_dev_{which}", f"dev_{which}"), f"dev_{which}.tsv")),
            ("test", (f"test_{which}.tsv",)),
        ),
        columns=_NLI_COLUMNS,
        no_gold=True,
    )


def _race(name: str, title: str, config: str, levels: tuple[str, ...], note: str) -> TaskSpec:
    return TaskSpec(
        name,
        title,
        "multiple_choice",
        n_answers=4,
        eval_split="test",
        split_note="RACE test labels are public: compare on test as the paper does (dev for "
        "model selection). Origin (middle/high school) comes from the passage id (jsonl) or the "
        f"folder (official). {note}",
        hub=HubSource("ehovy/race", config, ("article", "question"), "answer", answers="options"),
        folders=("", "race", "RACE"),
        files=tuple((s, (*_jsonl(s), f"{s}/")) for s in SPLITS),
        reader="race",
        race_levels=levels,
    )


# Hub ids and columns as the dataset cards give them (parquet). LSDSem/story_cloze is a loading
# script over manually downloaded files (datasets >= 4 runs no scripts), hence hub=None.
TASKS: dict[str, TaskSpec] = {
    t.name: t
    for t in (
        _glue("sst2", "SST-2", "classification", ("negative", "positive"), texts=("sentence",),
              digit_labels=True, note="Dev: 872 sentences."),
        _glue("cola", "CoLA", "classification", ("unacceptable", "acceptable"),
              texts=("sentence",), digit_labels=True, metrics=("matthews",),
              headerless=("source", "label", "orig_judgement", "sentence"),
              note="Dev: 1,043 sentences (in-domain + out-of-domain)."),
        _mnli("mnli_m", "MNLI-m", "matched", "Dev: dev_matched, 9,815 labeled pairs. The shared "
              "data has only 10k of the 392,702 train pairs (the largest train_subset_* file is "
              "used)."),
        _mnli("mnli_mm", "MNLI-mm", "mismatched", "Dev: dev_mismatched, 9,832 labeled pairs. "
              "Train is MNLI's (the same as mnli_m)."),
        TaskSpec(
            "snli", "SNLI", "entailment", _NLI, eval_split="test",
            split_note="SNLI test labels are public: compare on test (9,824 labeled pairs) as "
            "the paper does. The shared data has only 8,999 of the 550,152 train pairs.",
            # the hub's label is -1 where there is no gold label: such rows are dropped too
            hub=HubSource("stanfordnlp/snli", "plain_text", ("premise", "hypothesis")),
            folders=("", "snli", "snli_1.0"),
            files=tuple(
                (s, (*_jsonl(f"snli_1.0_{s}", s), f"snli_1.0_{s}.txt",
                     *(_SUBSETS if s == "train" else ()))) for s in SPLITS
            ),
            columns=_NLI_COLUMNS, no_gold=True,
        ),
        _glue("qnli", "QNLI", "entailment", ("entailment", "not_entailment"),
              texts=("question", "sentence"), train=_SUBSETS,
              columns=(("question", "text_a"), ("sentence", "text_b"), ("label",)),
              note="Dev: 5,463 pairs (QNLI v2). Texts are (question, sentence), GLUE's order. "
              "The shared data has only 8,999 of the 104,743 train pairs."),
        _glue("rte", "RTE", "entailment", ("entailment", "not_entailment"),
              texts=("sentence1", "sentence2"), note="Dev: 277 pairs."),
        TaskSpec(
            "scitail", "SciTail", "entailment", ("entailment", "neutral"), eval_split="test",
            split_note="SciTail test labels are public: compare on test (2,126 pairs) as the "
            "paper does. The official label 'entails' is read as 'entailment'; the shared CSV's "
            "'not_entailment' is SciTail's 'neutral'. SciTail train and an untokenized dev are "
            "not in the shared data (the hub's tsv_format has them).",
            # the hub's label is the string "entails" / "neutral", as in tsv_format
            hub=HubSource("allenai/scitail", "tsv_format", ("premise", "hypothesis")),
            folders=("", "scitail", "tsv_format", "SciTailV1.1/tsv_format", "scitail/tsv_format"),
            files=tuple((s, (f"scitail_1.0_{s}.tsv", f"{s}.tsv", f"{s}.csv")) for s in SPLITS),
            columns=(("premise",), ("hypothesis",), ("label",)),
            headerless=("premise", "hypothesis", "label"),
            label_aliases=(("entails", "entailment"), ("not_entailment", "neutral")),
        ),
        _glue("mrpc", "MRPC", "similarity", _PARAPHRASE, texts=("sentence1", "sentence2"),
              test=("msr_paraphrase_test.txt",),
              columns=(("#1 String", "text_a"), ("#2 String", "text_b"), ("Quality", "label")),
              digit_labels=True, metrics=("f1", "accuracy"),
              note="Dev: 408 pairs. MRPC's test labels are public in the original release: "
              "split 'test' reads msr_paraphrase_test.txt (labeled, the same 1,725 pairs as GLUE "
              "test) where the folder has it; the hub's test is unlabeled."),
        # the shared data's two QQP subsets are one draw of train split 90/10: the 8,999 train,
        # the 1,000 held apart are the evaluation split where there is no dev.tsv (named, not
        # globbed, so that the held-apart file can never be read as training data)
        _glue("qqp", "QQP", "similarity", _PARAPHRASE, texts=("question1", "question2"),
              train=("train_subset_8999.json",), dev=("train_subset_1000.json",),
              columns=(("question1", "text_a"), ("question2", "text_b"), ("is_duplicate", "label")),
              digit_labels=True, metrics=("f1", "accuracy"),
              note="Dev: 40,430 pairs (the hub or the GLUE download). The shared data has no dev "
              "file: there, the evaluation split 'dev' is train_subset_1000.json, 1,000 pairs of "
              "QQP's TRAINING set held apart from the 8,999 of train_subset_8999.json (the other "
              "10% of the same draw, disjoint from it), not GLUE's dev set; say so."),
        _glue("stsb", "STS-B", "similarity", (), texts=("sentence1", "sentence2"),
              columns=(("sentence1",), ("sentence2",), ("score",)), metrics=("pearson", "spearman"),
              note="Dev: 1,500 pairs; labels are similarity scores in [0, 5]."),
        _race("race_m", "RACE-m", "middle", ("middle",), "Middle school only: test 1,436 "
              "questions."),
        _race("race_h", "RACE-h", "high", ("high",), "High school only: test 3,498 questions."),
        _race("race", "RACE", "all", ("middle", "high"), "Both: test 4,934 questions."),
        TaskSpec(
            "story_cloze", "Story Cloze", "multiple_choice", n_answers=2, eval_split="test",
            split_note="As the paper: train on the Spring 2016 validation file (1,871 stories; "
            "split 'train'), test on the Spring 2016 test file (1,871 stories; labels public).",
            manual="The Story Cloze Test is handed out by its authors (Mostafazadeh et al. 2016) "
            "only through the request form on https://cs.rochester.edu/nlp/rocstories/ . Put the "
            "two Spring 2016 CSV files in one folder: the validation file (its name contains "
            "'val', e.g. 'cloze_test_val__spring2016 - cloze_test_ALL_val.csv') and the test "
            "file (its name contains 'test' but not 'val', e.g. 'cloze_test_test__spring2016 - "
            "cloze_test_ALL_test.csv'), and pass the folder: "
            "load_examples('story_cloze', 'test', source='/path/to/folder').",
            splits=("train", "test"), folders=("", "story_cloze", "storycloze"),
            # layout.find takes the one *.csv whose name says val / test (2016 if several)
            files=(("train", ("*val*.csv",)), ("test", ("*test*.csv",))), reader="story_cloze",
            truncation="halves",
        ),
        TaskSpec(
            "dprd", "DPRD", "multiple_choice", n_answers=2, paper_split="", eval_split="test",
            split_note="Zero-shot only in the paper (Figure 2 right), which does not say which "
            "split it scored; test (564 sentences) is the natural choice. Texts are (sentence, "
            "pronoun), answers the two candidate antecedents.",
            hub=HubSource("community-datasets/definite_pronoun_resolution", "plain_text",
                     ("sentence", "pronoun"), answers="candidates",
                     splits=(("train", "train"), ("test", "test"))),
            splits=("train", "test"), folders=("", "dprd", "DPRD"),
            files=(("train", ("train.c.txt", "train.txt")), ("test", ("test.c.txt", "test.txt"))),
            reader="dprd",
        ),
    )
}  # fmt: skip


def subsample(examples: list, limit: int | None, seed: int = 0) -> list:
    """``limit`` examples drawn with ``seed``, in file order; all of them if ``limit`` is None."""
    if limit is None or limit >= len(examples):
        return list(examples)
    if limit < 1:
        raise ValueError(f"limit={limit}: use a positive count, or None for every example")
    keep = sorted(random.Random(seed).sample(range(len(examples)), limit))
    return [examples[i] for i in keep]


#: Tasks scored by the model fine-tuned on another, whose training data they share: MNLI's
#: mismatched dev set beside its matched one, RACE's two levels beside the whole.
SCORED_BESIDE: dict[str, tuple[str, ...]] = {"mnli_m": ("mnli_mm",), "race": ("race_m", "race_h")}


def get_task(name: str) -> TaskSpec:
    """The task registered as ``name`` (the key, or the paper's title such as ``"MNLI-m"``)."""
    key = name.strip().lower()
    spec = TASKS.get(key) or next((t for t in TASKS.values() if t.title.lower() == key), None)
    if spec is None:
        raise ValueError(f"unknown task {name!r}; choose one of {sorted(TASKS)}")
    return spec


def compute_metrics(
    task: TaskSpec, predictions: np.ndarray, labels: np.ndarray
) -> dict[str, float]:
    """The task's metrics as percentages like the paper's: accuracy, F1 and Matthews
    correlation as the bootstrap scores them (``stats.METRICS``), the correlations by scipy."""
    from scipy.stats import pearsonr, spearmanr

    correlations = {"pearson": (pearsonr, "Pearson"), "spearman": (spearmanr, "Spearman")}
    out = {}
    for m in task.metrics:
        if m in correlations:
            out[m] = 100.0 * float(_correlation(*correlations[m], predictions, labels))
        else:
            p, y = np.asarray(predictions)[None], np.asarray(labels)[None]
            out[m] = float(METRICS[m](p, y)[0])
    return out


def _correlation(fn, name: str, predictions: np.ndarray, labels: np.ndarray) -> float:
    """``fn``'s correlation, or NaN with a ``DataWarning`` saying why it is undefined (in
    place of scipy's warning): fewer than two pairs, or constant gold scores or predictions."""
    for what, values in (("gold scores", labels), ("predictions", predictions)):
        values = np.asarray(values, dtype=float)
        if len(values) < 2 or np.ptp(values) == 0:
            warnings.warn(
                f"the {name} correlation is undefined (reported as NaN): the {what} are "
                f"{'constant' if len(values) else 'empty'} ({len(values)} values"
                f"{f', all {values[0]:g}' if len(values) else ''})",
                DataWarning,
                stacklevel=3,
            )
            return float("nan")
    return fn(predictions, labels)[0]
