"""The twelve data sets of Table 1 (§4.2) and DPRD (§5), as one registry and one reader.

Every task is a ``TaskSpec``: its family (which §3.3 input transformation it takes), label names,
metric, the split the paper reports and the split a local reproduction compares on (GLUE test
labels are not public, so GLUE tasks compare on dev and say so). ``load_examples`` turns any
source of a task's data into a list of ``Example``:

* ``"fixture"``: small files written for this project, in each data set's official layout, under
  ``gpt1lib/fixtures/tasks`` (always at hand, offline; smoke runs and tests);
* ``"hub"``: ``datasets.load_dataset`` on the registry's hub id (parquet, no loading script);
* a folder (or one file) in the data set's official layout: the GLUE TSV folders, the MultiNLI
  and SNLI jsonl releases, SciTail's ``tsv_format`` or the CSV copy in shared/data, RACE as
  ``{train,dev,test}/{middle,high}/*.txt`` or one passage per line in ``{split}.jsonl(.gz)``,
  the Story Cloze 2016 CSV files, DPRD's original ``train.c.txt`` / ``test.c.txt``.

Splits are always called ``train``, ``dev`` and ``test``; each layout's own file names are mapped
here (``describe_source`` names the file a split is read from). Bad data raises an error that
names the file, the row and the fix; nothing is skipped silently except what the data sets'
own conventions drop (MultiNLI/SNLI pairs without a gold label, gold_label ``-``, as GLUE does).
"""

from __future__ import annotations

import csv
import gzip
import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Family = Literal["classification", "entailment", "similarity", "multiple_choice"]
SPLITS = ("train", "dev", "test")
#: The fixture source: one folder per data set, each in its official layout (see README.md there).
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tasks"


class TaskDataUnavailableError(RuntimeError):
    """A task's data could not be had from the source asked for (hub unreachable, manual data)."""


@dataclass(frozen=True)
class Example:
    """One item of a task, already split into the parts the §3.3 transformations join.

    ``texts``: classification ``(text,)``; entailment ``(premise, hypothesis)``; similarity
    ``(a, b)``; multiple choice ``(context, question)``, the question possibly ``""`` (Story
    Cloze) and, for DPRD, ``(sentence, pronoun)``. ``answers``: the candidates of a multiple
    choice item. ``label``: index into ``TaskSpec.labels``, a float score (STS-B), the index of
    the right answer (multiple choice), or None where the split has no labels (GLUE test).
    """

    texts: tuple[str, ...]
    answers: tuple[str, ...] = ()
    label: int | float | None = None
    uid: str = ""


@dataclass(frozen=True)
class HubSource:
    """Where a task sits on the Hugging Face hub and how its columns become an ``Example``."""

    repo: str
    config: str | None
    splits: tuple[tuple[str, str], ...]  # (our split, the hub's split)
    texts: tuple[str, ...]  # columns that become Example.texts, in order
    label: str  # class index (-1: none), float score, answer letter, or label string
    answers: str = ""  # multiple choice: the column holding the candidate answers
    unlabeled: tuple[str, ...] = ()  # hub splits whose labels are all -1 (GLUE test)

    def split(self, name: str) -> str:
        """The hub's name for our split ``name``."""
        for ours, theirs in self.splits:
            if ours == name:
                return theirs
        raise ValueError(
            f"{self.repo} ({self.config}) has no {name!r} split; it has "
            f"{[ours for ours, _ in self.splits]}"
        )


@dataclass(frozen=True)
class TaskSpec:
    """One evaluation task of the paper: what it is, how it is scored, where its data is."""

    name: str  # registry key
    title: str  # as in the paper's tables
    family: Family  # which input transformation of §3.3 / Figure 1
    labels: tuple[str, ...]  # class names in index order; () for STS-B and multiple choice
    n_answers: int | None  # candidates per multiple-choice item
    metrics: tuple[str, ...]  # the first is the paper's
    paper_split: str  # the split the paper reports ("" where it does not say)
    eval_split: str  # the split a local reproduction compares on
    split_note: str  # why eval_split stands in for paper_split, and what is missing locally
    hub: HubSource | None  # None: no hub copy that `datasets` loads without a script
    manual: str  # "" or how to get the data by hand
    paper_table: str  # "2", "3", "4", or "" (DPRD: zero-shot only, Figure 2)
    splits: tuple[str, ...] = SPLITS  # the splits this task has


def _glue_hub(config: str, texts: tuple[str, ...], dev: str = "validation", test: str = "test"):
    return HubSource(
        repo="nyu-mll/glue",
        config=config,
        splits=(("train", "train"), ("dev", dev), ("test", test)),
        texts=texts,
        label="label",
        unlabeled=(test,),
    )


_GLUE_NOTE = (
    "The paper reports the GLUE server's test set (Table 4), whose labels are not public: "
    "compare on dev and say so."
)
_NLI_NOTE = (
    "The paper reports the GLUE server's test set (Table 2), whose labels are not public: "
    "compare on dev and say so."
)
_RACE_NOTE = (
    "RACE test labels are public: compare on test as the paper does (dev for model selection). "
    "Origin (middle/high school) comes from the passage id (jsonl) or the folder (official)."
)


def _race_hub(config: str) -> HubSource:
    return HubSource(
        repo="ehovy/race",
        config=config,
        splits=(("train", "train"), ("dev", "validation"), ("test", "test")),
        texts=("article", "question"),
        label="answer",
        answers="options",
    )


# Hub ids, checked against the dataset cards (README dataset_info: configs, splits, features):
# nyu-mll/glue: parquet; configs cola sst2 mrpc qqp stsb mnli qnli rte; columns and label names
#   seen for cola, qqp, mnli (ax); the others are the GLUE card's well-known columns (partly
#   verified). Test labels are -1.
# stanfordnlp/snli plain_text, allenai/scitail tsv_format, community-datasets/
#   definite_pronoun_resolution plain_text: parquet, columns seen on the card.
# ehovy/race: parquet, configs all/high/middle and splits seen; columns (example_id, article,
#   answer, question, options) seen only in an older card (partly verified).
# LSDSem/story_cloze is a loading script over manually downloaded files (datasets >= 4 runs no
#   scripts), hence hub=None. None of the ids could be loaded here: the hub is unreachable.
TASKS: dict[str, TaskSpec] = {
    t.name: t
    for t in (
        TaskSpec(
            name="sst2",
            title="SST-2",
            family="classification",
            labels=("negative", "positive"),
            n_answers=None,
            metrics=("accuracy",),
            paper_split="test",
            eval_split="dev",
            split_note=_GLUE_NOTE + " Dev: 872 sentences.",
            hub=_glue_hub("sst2", ("sentence",)),
            manual="",
            paper_table="4",
        ),
        TaskSpec(
            name="cola",
            title="CoLA",
            family="classification",
            labels=("unacceptable", "acceptable"),
            n_answers=None,
            metrics=("matthews",),
            paper_split="test",
            eval_split="dev",
            split_note=_GLUE_NOTE + " Dev: 1,043 sentences (in-domain + out-of-domain).",
            hub=_glue_hub("cola", ("sentence",)),
            manual="",
            paper_table="4",
        ),
        TaskSpec(
            name="mnli_m",
            title="MNLI-m",
            family="entailment",
            labels=("entailment", "neutral", "contradiction"),
            n_answers=None,
            metrics=("accuracy",),
            paper_split="test",
            eval_split="dev",
            split_note=_NLI_NOTE + " Dev: dev_matched, 9,815 labeled pairs. The shared data has "
            "only 10k of the 392,702 train pairs (the largest train_subset_* file is used).",
            hub=_glue_hub("mnli", ("premise", "hypothesis"), "validation_matched", "test_matched"),
            manual="",
            paper_table="2",
        ),
        TaskSpec(
            name="mnli_mm",
            title="MNLI-mm",
            family="entailment",
            labels=("entailment", "neutral", "contradiction"),
            n_answers=None,
            metrics=("accuracy",),
            paper_split="test",
            eval_split="dev",
            split_note=_NLI_NOTE + " Dev: dev_mismatched, 9,832 labeled pairs. Train is MNLI's "
            "(the same as mnli_m).",
            hub=_glue_hub(
                "mnli", ("premise", "hypothesis"), "validation_mismatched", "test_mismatched"
            ),
            manual="",
            paper_table="2",
        ),
        TaskSpec(
            name="snli",
            title="SNLI",
            family="entailment",
            labels=("entailment", "neutral", "contradiction"),
            n_answers=None,
            metrics=("accuracy",),
            paper_split="test",
            eval_split="test",
            split_note="SNLI test labels are public: compare on test (9,824 labeled pairs) as "
            "the paper does. The shared data has only 8,999 of the 550,152 train pairs.",
            hub=HubSource(
                repo="stanfordnlp/snli",
                config="plain_text",
                splits=(("train", "train"), ("dev", "validation"), ("test", "test")),
                texts=("premise", "hypothesis"),
                label="label",  # -1 where there is no gold label: those rows are dropped
            ),
            manual="",
            paper_table="2",
        ),
        TaskSpec(
            name="qnli",
            title="QNLI",
            family="entailment",
            labels=("entailment", "not_entailment"),
            n_answers=None,
            metrics=("accuracy",),
            paper_split="test",
            eval_split="dev",
            split_note=_NLI_NOTE + " Dev: 5,463 pairs (QNLI v2). Texts are (question, "
            "sentence), GLUE's order. The shared data has only 8,999 of the 104,743 train pairs.",
            hub=_glue_hub("qnli", ("question", "sentence")),
            manual="",
            paper_table="2",
        ),
        TaskSpec(
            name="rte",
            title="RTE",
            family="entailment",
            labels=("entailment", "not_entailment"),
            n_answers=None,
            metrics=("accuracy",),
            paper_split="test",
            eval_split="dev",
            split_note=_NLI_NOTE + " Dev: 277 pairs.",
            hub=_glue_hub("rte", ("sentence1", "sentence2")),
            manual="",
            paper_table="2",
        ),
        TaskSpec(
            name="scitail",
            title="SciTail",
            family="entailment",
            labels=("entailment", "neutral"),
            n_answers=None,
            metrics=("accuracy",),
            paper_split="test",
            eval_split="test",
            split_note="SciTail test labels are public: compare on test (2,126 pairs) as the "
            "paper does. The official label 'entails' is read as 'entailment'; the shared CSV's "
            "'not_entailment' is SciTail's 'neutral'. SciTail train and an untokenized dev are "
            "not in the shared data (the hub's tsv_format has them).",
            hub=HubSource(
                repo="allenai/scitail",
                config="tsv_format",
                splits=(("train", "train"), ("dev", "validation"), ("test", "test")),
                texts=("premise", "hypothesis"),
                label="label",  # the strings "entails" / "neutral"
            ),
            manual="",
            paper_table="2",
        ),
        TaskSpec(
            name="mrpc",
            title="MRPC",
            family="similarity",
            labels=("not_paraphrase", "paraphrase"),
            n_answers=None,
            metrics=("f1", "accuracy"),
            paper_split="test",
            eval_split="dev",
            split_note=_GLUE_NOTE + " Dev: 408 pairs. MRPC's test labels are public in the "
            "original release: split 'test' reads msr_paraphrase_test.txt (labeled, the same "
            "1,725 pairs as GLUE test) where the folder has it; the hub's test is unlabeled.",
            hub=_glue_hub("mrpc", ("sentence1", "sentence2")),
            manual="",
            paper_table="4",
        ),
        TaskSpec(
            name="qqp",
            title="QQP",
            family="similarity",
            labels=("not_paraphrase", "paraphrase"),
            n_answers=None,
            metrics=("f1", "accuracy"),
            paper_split="test",
            eval_split="dev",
            split_note=_GLUE_NOTE + " Dev: 40,430 pairs, NOT in the shared data (hub or GLUE "
            "download); there, train_subset_1000.json is a disjoint 10% of the same train draw "
            "and can stand in if passed as the source file, said so.",
            hub=_glue_hub("qqp", ("question1", "question2")),
            manual="",
            paper_table="4",
        ),
        TaskSpec(
            name="stsb",
            title="STS-B",
            family="similarity",
            labels=(),
            n_answers=None,
            metrics=("pearson", "spearman"),
            paper_split="test",
            eval_split="dev",
            split_note=_GLUE_NOTE + " Dev: 1,500 pairs; labels are similarity scores in [0, 5].",
            hub=_glue_hub("stsb", ("sentence1", "sentence2")),
            manual="",
            paper_table="4",
        ),
        *(
            TaskSpec(
                name=name,
                title=title,
                family="multiple_choice",
                labels=(),
                n_answers=4,
                metrics=("accuracy",),
                paper_split="test",
                eval_split="test",
                split_note=f"{_RACE_NOTE} {note}",
                hub=_race_hub(config),
                manual="",
                paper_table="3",
            )
            for name, title, config, note in (
                ("race_m", "RACE-m", "middle", "Middle school only: test 1,436 questions."),
                ("race_h", "RACE-h", "high", "High school only: test 3,498 questions."),
                ("race", "RACE", "all", "Both: test 4,934 questions."),
            )
        ),
        TaskSpec(
            name="story_cloze",
            title="Story Cloze",
            family="multiple_choice",
            labels=(),
            n_answers=2,
            metrics=("accuracy",),
            paper_split="test",
            eval_split="test",
            split_note="As the paper: train on the Spring 2016 validation file (1,871 stories; "
            "split 'train'), test on the Spring 2016 test file (1,871 stories; labels public).",
            hub=None,
            manual="The Story Cloze Test is handed out by its authors (Mostafazadeh et al. 2016) "
            "only through the request form on https://cs.rochester.edu/nlp/rocstories/ . Put the "
            "two Spring 2016 CSV files in one folder: the validation file (its name contains "
            "'val', e.g. 'cloze_test_val__spring2016 - cloze_test_ALL_val.csv') and the test "
            "file (its name contains 'test' but not 'val', e.g. 'cloze_test_test__spring2016 - "
            "cloze_test_ALL_test.csv'), and pass the folder: "
            "load_examples('story_cloze', 'test', source='/path/to/folder').",
            paper_table="3",
            splits=("train", "test"),
        ),
        TaskSpec(
            name="dprd",
            title="DPRD",
            family="multiple_choice",
            labels=(),
            n_answers=2,
            metrics=("accuracy",),
            paper_split="",
            eval_split="test",
            split_note="Zero-shot only in the paper (Figure 2 right), which does not say which "
            "split it scored; test (564 sentences) is the natural choice. Texts are (sentence, "
            "pronoun), answers the two candidate antecedents.",
            hub=HubSource(
                repo="community-datasets/definite_pronoun_resolution",
                config="plain_text",
                splits=(("train", "train"), ("test", "test")),
                texts=("sentence", "pronoun"),
                label="label",
                answers="candidates",
            ),
            manual="",
            paper_table="",
            splits=("train", "test"),
        ),
    )
}


def get_task(name: str) -> TaskSpec:
    """The task registered as ``name`` (the key, or the paper's title such as ``"MNLI-m"``)."""
    key = name.strip().lower()
    if key in TASKS:
        return TASKS[key]
    for spec in TASKS.values():
        if spec.title.lower() == key:
            return spec
    raise ValueError(f"unknown task {name!r}; choose one of {sorted(TASKS)}")


# ---------------------------------------------------------------------------------------------
# Where each split lives in each official layout.


@dataclass(frozen=True)
class _Layout:
    """Sub-folders where a data set may sit under the folder given, and each split's files."""

    folders: tuple[str, ...]  # tried in order; "" is the folder itself
    files: tuple[tuple[str, tuple[str, ...]], ...]  # split -> file names or globs, in preference


def _glue_layout(folder: str, train: tuple[str, ...] = (), test: tuple[str, ...] = ()) -> _Layout:
    return _Layout(
        folders=("", folder, f"glue/{folder}", f"glue_data/{folder}"),
        files=(
            ("train", ("train.tsv", *train)),
            ("dev", ("dev.tsv",)),
            ("test", (*test, "test.tsv")),
        ),
    )


def _mnli_layout(which: str) -> _Layout:
    return _Layout(
        folders=("", "MNLI", "glue/MNLI", "glue_data/MNLI", "multinli_1.0"),
        files=(
            (
                "train",
                (
                    "multinli_1.0_train.jsonl",
                    "multinli_1.0_train.jsonl.gz",
                    "train.tsv",
                    "train_subset_*",
                ),
            ),
            (
                "dev",
                (
                    f"multinli_1.0_dev_{which}.jsonl",
                    f"multinli_1.0_dev_{which}.jsonl.gz",
                    f"dev_{which}.jsonl",
                    f"dev_{which}.jsonl.gz",
                    f"dev_{which}.tsv",
                ),
            ),
            ("test", (f"test_{which}.tsv",)),
        ),
    )


#: The RACE tasks and the school levels each keeps.
_RACE = {"race_m": ("middle",), "race_h": ("high",), "race": ("middle", "high")}


def _race_layout() -> _Layout:
    return _Layout(
        folders=("", "race", "RACE"),
        files=tuple((s, (f"{s}.jsonl", f"{s}.jsonl.gz", f"{s}/")) for s in SPLITS),
    )


_LAYOUTS: dict[str, _Layout] = {
    "sst2": _glue_layout("SST-2"),
    "cola": _glue_layout("CoLA"),
    "mrpc": _glue_layout("MRPC", test=("msr_paraphrase_test.txt",)),
    "stsb": _glue_layout("STS-B"),
    "qnli": _glue_layout("QNLI", train=("train_subset_*.json",)),
    "rte": _glue_layout("RTE"),
    "qqp": _glue_layout("QQP", train=("train_subset_*.json",)),
    "mnli_m": _mnli_layout("matched"),
    "mnli_mm": _mnli_layout("mismatched"),
    "snli": _Layout(
        folders=("", "snli", "snli_1.0"),
        files=tuple(
            (
                s,
                (
                    f"snli_1.0_{s}.jsonl",
                    f"snli_1.0_{s}.jsonl.gz",
                    f"{s}.jsonl",
                    f"{s}.jsonl.gz",
                    f"snli_1.0_{s}.txt",
                    *(("train_subset_*.json",) if s == "train" else ()),
                ),
            )
            for s in SPLITS
        ),
    ),
    "scitail": _Layout(
        folders=("", "scitail", "tsv_format", "SciTailV1.1/tsv_format", "scitail/tsv_format"),
        files=tuple((s, (f"scitail_1.0_{s}.tsv", f"{s}.tsv", f"{s}.csv")) for s in SPLITS),
    ),
    "race_m": _race_layout(),
    "race_h": _race_layout(),
    "race": _race_layout(),
    # Story Cloze: any *.csv whose name says val / test (see _story_cloze_file).
    "story_cloze": _Layout(
        folders=("", "story_cloze", "storycloze"),
        files=(("train", ("*val*.csv",)), ("test", ("*test*.csv",))),
    ),
    "dprd": _Layout(
        folders=("", "dprd", "DPRD"),
        files=(("train", ("train.c.txt", "train.txt")), ("test", ("test.c.txt", "test.txt"))),
    ),
}


def _subset_size(path: Path) -> int:
    """The row count a ``train_subset_<n>[k]...`` file states in its name (0 if none)."""
    m = re.search(r"subset_(\d+)(k?)", path.name)
    return int(m.group(1)) * (1000 if m.group(2) else 1) if m else 0


def _story_cloze_file(folder: Path, split: str) -> Path | None:
    """The Spring 2016 val (train) or test CSV in ``folder``; an error if it is ambiguous."""
    csvs = sorted(folder.glob("*.csv"))
    if split == "train":
        found = [p for p in csvs if "val" in p.name.lower()]
    else:
        found = [p for p in csvs if "test" in p.name.lower() and "val" not in p.name.lower()]
    if len(found) > 1:  # e.g. the 2016 and 2018 releases side by side: keep the paper's 2016
        found = [p for p in found if "2016" in p.name] or found
    if len(found) > 1:
        raise ValueError(
            f"{folder} holds several Story Cloze {split} files {[p.name for p in found]}; keep "
            "the Spring 2016 one or pass its path as the source"
        )
    return found[0] if found else None


def _match(folder: Path, pattern: str) -> Path | None:
    if pattern.endswith("/"):
        return folder / pattern[:-1] if (folder / pattern[:-1]).is_dir() else None
    if "*" not in pattern:
        return folder / pattern if (folder / pattern).is_file() else None
    found = [p for p in folder.glob(pattern) if p.is_file()]
    # train_subset_*: the largest by the count in its name; ties: the last name in sort order
    return max(found, key=lambda p: (_subset_size(p), p.name)) if found else None


def _layout_hint(spec: TaskSpec, split: str) -> str:
    layout = _LAYOUTS[spec.name]
    files = dict(layout.files)[split]
    folders = [f for f in layout.folders if f]
    return (
        f"{spec.title} {split} needs one of {list(files)} in the folder given or in its "
        f"sub-folder {' / '.join(folders)}"
    )


def _find(spec: TaskSpec, split: str, root: Path) -> Path:
    """The file (or RACE folder) holding ``split`` of ``spec`` under ``root``."""
    if not root.exists():
        raise FileNotFoundError(f"{root} does not exist. {_layout_hint(spec, split)}")
    if root.is_file():
        return root
    if spec.name in _RACE and any((root / lv).is_dir() for lv in ("middle", "high")):
        return root  # a RACE split folder itself
    layout = _LAYOUTS[spec.name]
    for sub in layout.folders:
        folder = root / sub
        if not folder.is_dir():
            continue
        if spec.name == "story_cloze":
            found = _story_cloze_file(folder, split)
            if found:
                return found
            continue
        for pattern in dict(layout.files)[split]:
            found = _match(folder, pattern)
            if found:
                return found
    hint = f" {spec.manual}" if spec.manual else ""
    raise FileNotFoundError(
        f"no {spec.title} {split} file under {root}. {_layout_hint(spec, split)}.{hint}"
    )


# ---------------------------------------------------------------------------------------------
# Rows out of files: each reader yields (where, row) with ``where`` naming the file and line.

Row = dict[str, object]


def _open_text(path: Path):
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8-sig", newline="")
    return path.open(encoding="utf-8-sig", newline="")


def _tsv_rows(path: Path, headerless: tuple[str, ...] | None, text_columns: tuple[str, ...]):
    """Tab-separated rows, no quoting (as GLUE writes them); a header unless the layout has none.

    ``headerless``: the column names of layouts that ship without a header (CoLA train/dev,
    SciTail tsv_format); such a file is still read by its header if its first line is one.
    """
    with _open_text(path) as f:
        lines = [line.rstrip("\r\n") for line in f]
    first = lines[0].split("\t") if lines else []
    if headerless is None or all(c in first for c in text_columns):
        header, start = first, 1
    else:
        header, start = list(headerless), 0
    for n, line in enumerate(lines[start:], start=start + 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != len(header):
            raise ValueError(
                f"{path}, line {n}: {len(fields)} tab-separated fields, the header has "
                f"{len(header)} ({header}); fix or delete that line"
            )
        yield f"{path}, line {n}", dict(zip(header, fields, strict=True))


def _csv_rows(path: Path) -> Iterator[tuple[str, Row]]:
    with _open_text(path) as f:
        for n, row in enumerate(csv.DictReader(f), start=2):
            yield f"{path}, line {n}", row


def _jsonl_rows(path: Path) -> Iterator[tuple[str, Row]]:
    with _open_text(path) as f:
        for n, line in enumerate(f, start=1):
            if line.strip():
                yield f"{path}, line {n}", _json(line, f"{path}, line {n}")


def _json_rows(path: Path) -> Iterator[tuple[str, Row]]:
    """A JSON array of records, or an object of records keyed by row id (the subset files)."""
    with _open_text(path) as f:
        data = _json(f.read(), str(path))
    if isinstance(data, dict):
        for key, row in data.items():
            yield f"{path}, row {key!r}", {"id": key, **row}
    elif isinstance(data, list):
        for i, row in enumerate(data):
            yield f"{path}, row {i}", row
    else:
        raise ValueError(f"{path}: expected a JSON array or object of rows, got {type(data)}")


def _json(text: str, where: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: not valid JSON ({e}); is this the right file?") from e


# ---------------------------------------------------------------------------------------------
# Rows into examples.

#: Label spellings of the official files beyond the class names themselves.
_LABEL_ALIASES: dict[str, dict[str, str]] = {
    # SciTail's tsv_format says "entails"; the shared CSV renamed neutral to "not_entailment".
    "scitail": {"entails": "entailment", "not_entailment": "neutral"},
}
#: Tasks whose official files give the class index as a digit ("0" / "1").
_DIGIT_LABELS = ("sst2", "cola", "mrpc", "qqp")
#: Tasks whose files keep pairs without a gold label (gold_label "-"); dropped, as GLUE does.
_NO_GOLD = ("mnli_m", "mnli_mm", "snli")

#: Pair-task columns: for each text and then the label, the names the layouts use for it.
_NLI = (("sentence1", "text_a"), ("sentence2", "text_b"), ("gold_label", "label"))
_COLUMNS: dict[str, tuple[tuple[str, ...], ...]] = {
    "sst2": (("sentence",), ("label",)),
    "cola": (("sentence",), ("label",)),
    "mrpc": (("#1 String", "text_a"), ("#2 String", "text_b"), ("Quality", "label")),
    "stsb": (("sentence1",), ("sentence2",), ("score",)),
    "qnli": (("question", "text_a"), ("sentence", "text_b"), ("label",)),
    "rte": (("sentence1",), ("sentence2",), ("label",)),
    "qqp": (("question1", "text_a"), ("question2", "text_b"), ("is_duplicate", "label")),
    "mnli_m": _NLI,
    "mnli_mm": _NLI,
    "snli": _NLI,
    "scitail": (("premise",), ("hypothesis",), ("label",)),
}
#: Layouts without a header line: CoLA's GLUE train/dev, SciTail's tsv_format.
_HEADERLESS = {
    "cola": ("source", "label", "orig_judgement", "sentence"),
    "scitail": ("premise", "hypothesis", "label"),
}


def _label_index(spec: TaskSpec, raw: object, where: str) -> int | float:
    """``raw`` as a class index (or an STS-B score); an error naming ``where`` if it is not one."""
    text = str(raw).strip()
    if not spec.labels:  # STS-B
        try:
            score = float(text)
        except ValueError:
            score = -1.0
        if not 0.0 <= score <= 5.0:
            raise ValueError(f"{where}: {spec.title} score {raw!r} is not a number in [0, 5]")
        return score
    name = _LABEL_ALIASES.get(spec.name, {}).get(text, text)
    if name in spec.labels:
        return spec.labels.index(name)
    if spec.name in _DIGIT_LABELS and text.isdigit() and int(text) < len(spec.labels):
        return int(text)
    allowed = list(spec.labels) + (["0", "1"] if spec.name in _DIGIT_LABELS else [])
    allowed += list(_LABEL_ALIASES.get(spec.name, {}))
    raise ValueError(f"{where}: label {raw!r} is not a {spec.title} label; allowed: {allowed}")


def _column(row: Row, names: tuple[str, ...]) -> str | None:
    for name in names:
        if name in row:
            return name
    return None


def _text(value: object, where: str, column: str) -> str:
    text = str(value if value is not None else "").strip()
    if not text:
        raise ValueError(f"{where}: empty {column!r} text; fix or delete that row")
    return text


def _pair_examples(spec: TaskSpec, split: str, path: Path, rows) -> list[Example]:
    """Examples of a single-text or two-text task from ``rows``; labels checked row by row."""
    *text_names, label_names = _COLUMNS[spec.name]
    out = []
    for i, (where, row) in enumerate(rows):
        texts = []
        for names in text_names:
            col = _column(row, names)
            if col is None:
                raise ValueError(
                    f"{where}: no column {names[0]!r} (columns: {list(row)}); "
                    f"is {path.name} a {spec.title} {split} file?"
                )
            texts.append(_text(row[col], where, col))
        col = _column(row, label_names)
        if col is None:
            if split != "test":  # GLUE test files carry no labels; every other split must
                raise ValueError(
                    f"{where}: no label column {label_names[0]!r} (columns: {list(row)}); "
                    f"{spec.title} {split} needs labels"
                )
            label = None
        elif spec.name in _NO_GOLD and str(row[col]).strip() == "-":
            continue
        else:
            label = _label_index(spec, row[col], where)
        uid = row.get("pairID") or row.get("index") or row.get("id") or row.get("idx") or i
        out.append(Example(texts=tuple(texts), label=label, uid=str(uid)))
    return out


def _read_pairs(spec: TaskSpec, split: str, path: Path) -> list[Example]:
    name = path.name.lower()
    if name.endswith((".jsonl", ".jsonl.gz")):
        rows = _jsonl_rows(path)
    elif name.endswith((".json", ".json.gz")):
        rows = _json_rows(path)
    elif name.endswith(".csv"):
        rows = _csv_rows(path)
    else:
        first_text = tuple(_COLUMNS[spec.name][0][:1])
        rows = _tsv_rows(path, _HEADERLESS.get(spec.name), first_text)
    return _pair_examples(spec, split, path, rows)


def _answer_count(spec: TaskSpec, answers: tuple[str, ...], where: str) -> None:
    if len(answers) != spec.n_answers:
        raise ValueError(
            f"{where}: {len(answers)} candidate answers {list(answers)}; "
            f"{spec.title} items have {spec.n_answers}"
        )


def _race_level(passage: Row, where: str) -> str:
    pid = str(passage.get("id", ""))
    for level in ("middle", "high"):
        if pid.startswith(level):
            return level
    raise ValueError(
        f"{where}: RACE id {pid!r} does not start with 'middle' or 'high', so its school level "
        "is unknown; use the official layout ({split}/middle/*.txt, {split}/high/*.txt) instead"
    )


def _race_passages(path: Path) -> Iterator[tuple[str, str, Row]]:
    """(where, level, passage) from a RACE split folder, a jsonl(.gz), or one passage file."""
    if path.is_dir():
        levels = [lv for lv in ("middle", "high") if (path / lv).is_dir()]
        if not levels:
            raise FileNotFoundError(
                f"{path} has neither middle/ nor high/: the official RACE layout is "
                "{train,dev,test}/{middle,high}/<n>.txt, one passage (JSON) per file"
            )
        for level in levels:
            files = sorted((path / level).glob("*.txt"), key=_file_order)
            for f in files:
                yield str(f), level, _json(f.read_text(encoding="utf-8-sig"), str(f))
    elif path.name.endswith((".jsonl", ".jsonl.gz")):
        for where, passage in _jsonl_rows(path):
            yield where, _race_level(passage, where), passage
    else:
        with _open_text(path) as f:
            passage = _json(f.read(), str(path))
        yield str(path), _race_level(passage, str(path)), passage


def _file_order(path: Path) -> tuple[int, str]:
    return (int(path.stem), "") if path.stem.isdigit() else (-1, path.stem)


def _read_race(spec: TaskSpec, path: Path) -> list[Example]:
    """One Example per RACE question: (article, question), four options, the answer's index."""
    keep = _RACE[spec.name]
    out = []
    for where, level, p in _race_passages(path):
        if level not in keep:
            continue
        missing = [k for k in ("article", "questions", "options", "answers") if k not in p]
        if missing:
            raise ValueError(f"{where}: RACE passage without {missing} (keys: {list(p)})")
        article = _text(p["article"], where, "article")
        if not len(p["questions"]) == len(p["options"]) == len(p["answers"]):
            raise ValueError(
                f"{where}: {len(p['questions'])} questions, {len(p['options'])} option lists "
                f"and {len(p['answers'])} answers; they must match"
            )
        for q, (question, options, letter) in enumerate(
            zip(p["questions"], p["options"], p["answers"], strict=True)
        ):
            answers = tuple(str(o).strip() for o in options)
            _answer_count(spec, answers, f"{where}, question {q}")
            if letter not in ("A", "B", "C", "D"):
                raise ValueError(f"{where}, question {q}: answer {letter!r} is not A, B, C or D")
            uid = f"{p.get('id', Path(where).name)}-{q}"
            out.append(
                Example(
                    texts=(article, str(question).strip()),
                    answers=answers,
                    label="ABCD".index(letter),
                    uid=uid,
                )
            )
    return out


_STORY_COLUMNS = (
    "InputStoryid",
    "InputSentence1",
    "InputSentence2",
    "InputSentence3",
    "InputSentence4",
    "RandomFifthSentenceQuiz1",
    "RandomFifthSentenceQuiz2",
    "AnswerRightEnding",
)


def _read_story_cloze(spec: TaskSpec, path: Path) -> list[Example]:
    """Story Cloze 2016: context = the four sentences joined by spaces, question "", 2 endings."""
    out = []
    for where, row in _csv_rows(path):
        missing = [c for c in _STORY_COLUMNS if c not in row]
        if missing:
            raise ValueError(
                f"{path}: no column {missing[0]!r} (columns: {list(row)}); the Story Cloze 2016 "
                f"CSV files have {list(_STORY_COLUMNS)}"
            )
        context = " ".join(
            _text(row[f"InputSentence{i}"], where, f"InputSentence{i}") for i in (1, 2, 3, 4)
        )
        answers = tuple(_text(row[f"RandomFifthSentenceQuiz{i}"], where, "ending") for i in (1, 2))
        right = str(row["AnswerRightEnding"]).strip()
        if right not in ("1", "2"):
            raise ValueError(f"{where}: AnswerRightEnding {right!r} is not 1 or 2")
        out.append(
            Example(
                texts=(context, ""), answers=answers, label=int(right) - 1, uid=row["InputStoryid"]
            )
        )
    return out


def _read_dprd(spec: TaskSpec, path: Path) -> list[Example]:
    """DPRD's original format: blocks of sentence / pronoun / "cand1,cand2" / answer, blank line."""
    with _open_text(path) as f:
        lines = [line.strip() for line in f]
    blocks, block, start = [], [], 0
    for n, line in enumerate([*lines, ""], start=1):
        if line:
            if not block:
                start = n
            block.append(line)
        elif block:
            blocks.append((start, block))
            block = []
    out = []
    for start, block in blocks:
        where = f"{path}, block at line {start}"
        if len(block) != 4:
            raise ValueError(
                f"{where}: {len(block)} lines, expected 4 (sentence, pronoun, "
                "'candidate1,candidate2', answer) and a blank line after"
            )
        sentence, pronoun, candidates, answer = block
        answers = tuple(c.strip() for c in candidates.split(","))
        _answer_count(spec, answers, where)
        folded = [a.lower() for a in answers]
        if answer not in answers and answer.lower() not in folded:
            raise ValueError(f"{where}: answer {answer!r} is not one of {list(answers)}")
        label = answers.index(answer) if answer in answers else folded.index(answer.lower())
        out.append(
            Example(texts=(sentence, pronoun), answers=answers, label=label, uid=str(len(out)))
        )
    return out


def _read(spec: TaskSpec, split: str, path: Path) -> list[Example]:
    if spec.name in _RACE:
        return _read_race(spec, path)
    if spec.name == "story_cloze":
        return _read_story_cloze(spec, path)
    if spec.name == "dprd":
        return _read_dprd(spec, path)
    return _read_pairs(spec, split, path)


# ---------------------------------------------------------------------------------------------
# The hub.


def _hub_rows(spec: TaskSpec, split: str):
    hub = spec.hub
    if hub is None:
        raise TaskDataUnavailableError(
            f"{spec.title} has no hub copy that `datasets` can load. {spec.manual}"
        )
    hub_split = hub.split(split)
    import datasets  # slow to import; only the hub source needs it

    try:
        return datasets.load_dataset(hub.repo, hub.config, split=hub_split)
    except Exception as e:  # offline, unreachable, renamed, or gated
        raise TaskDataUnavailableError(
            f"could not load {hub.repo!r} (config {hub.config!r}, split {hub_split!r}) from the "
            f"Hugging Face hub ({type(e).__name__}: {e}). Download the data where the hub is "
            f"reachable, or get the official release, and pass its folder: "
            f"load_examples({spec.name!r}, {split!r}, source='/path/to/folder'). "
            f"{_layout_hint(spec, split)}"
        ) from e


def _from_hub(spec: TaskSpec, split: str) -> list[Example]:
    hub = spec.hub
    rows = _hub_rows(spec, split)
    unlabeled = hub.split(split) in hub.unlabeled
    out = []
    for i, row in enumerate(rows):
        where = f"{hub.repo} ({hub.config}) {hub.split(split)}, row {i}"
        texts = [_text(row[hub.texts[0]], where, hub.texts[0])]
        for c in hub.texts[1:]:  # a multiple-choice question may be "", never the context
            texts.append(str(row[c] or "").strip() if spec.n_answers else _text(row[c], where, c))
        answers = tuple(str(a).strip() for a in row[hub.answers]) if hub.answers else ()
        if hub.answers:
            _answer_count(spec, answers, where)
        value = row[hub.label]
        if unlabeled:
            label = None
        elif isinstance(value, int):  # a class index (ClassLabel) or an answer index
            if value < 0:  # SNLI's pairs without a gold label: dropped, as the local readers do
                continue
            if value >= (spec.n_answers or len(spec.labels)):
                raise ValueError(f"{where}: label {value} is out of range for {spec.title}")
            label = value
        elif isinstance(value, str) and spec.n_answers:  # RACE: the answer's letter
            if value not in ("A", "B", "C", "D"):
                raise ValueError(f"{where}: answer {value!r} is not A, B, C or D")
            label = "ABCD".index(value)
        else:  # a label name (SciTail) or a score (STS-B)
            label = _label_index(spec, value, where)
        out.append(
            Example(texts=tuple(texts), answers=answers, label=label, uid=str(row.get("idx", i)))
        )
    return out


# ---------------------------------------------------------------------------------------------
# The entry points.


def _spec_and_split(task: str | TaskSpec, split: str) -> TaskSpec:
    spec = task if isinstance(task, TaskSpec) else get_task(task)
    if split not in spec.splits:
        raise ValueError(f"{spec.title} has no split {split!r}; it has {list(spec.splits)}")
    return spec


def unavailable(task: str | TaskSpec, source: str | Path = "fixture") -> str | None:
    """Why ``task`` cannot be fine-tuned and scored from ``source`` (its train or its
    evaluation split is missing there, e.g. Story Cloze without its files, or QQP without a dev
    file), or None when both load."""
    spec = task if isinstance(task, TaskSpec) else get_task(task)
    try:
        for split in dict.fromkeys(("train", spec.eval_split)):
            load_examples(spec, split, source, limit=1)
    except (FileNotFoundError, RuntimeError) as e:
        return str(e)
    return None


def _source_path(spec: TaskSpec, split: str, source: str | Path) -> Path:
    root = FIXTURES if isinstance(source, str) and source == "fixture" else Path(source)
    return _find(spec, split, root)


def describe_source(task: str | TaskSpec, split: str, source: str | Path = "fixture") -> str:
    """The file (or hub split) that ``load_examples(task, split, source)`` reads."""
    spec = _spec_and_split(task, split)
    if isinstance(source, str) and source == "hub":
        if spec.hub is None:
            return f"no hub copy ({spec.manual})"
        return f"hub {spec.hub.repo} (config {spec.hub.config}, split {spec.hub.split(split)})"
    return str(_source_path(spec, split, source))


def subsample(examples: list[Example], limit: int | None, seed: int = 0) -> list[Example]:
    """``limit`` examples drawn with ``seed``, in file order; all of them if ``limit`` is None."""
    if limit is None or limit >= len(examples):
        return list(examples)
    if limit < 1:
        raise ValueError(f"limit={limit}: use a positive count, or None for every example")
    keep = sorted(random.Random(seed).sample(range(len(examples)), limit))
    return [examples[i] for i in keep]


def load_examples(
    task: str | TaskSpec,
    split: str,
    source: str | Path = "fixture",
    limit: int | None = None,
    seed: int = 0,
) -> list[Example]:
    """The examples of ``split`` ("train", "dev", "test") of ``task`` from ``source``.

    ``source``: ``"fixture"`` (the small files shipped with gpt1lib), ``"hub"`` (the registry's
    hub id through ``datasets``), or a folder in the data set's official layout (or the one file
    to read). ``limit`` keeps that many examples, drawn with ``seed``, in file order.
    """
    spec = _spec_and_split(task, split)
    if isinstance(source, str) and source == "hub":
        examples = _from_hub(spec, split)
    else:
        examples = _read(spec, split, _source_path(spec, split, source))
    return subsample(examples, limit, seed)
