"""Reading a task's data: finding a split's file in a folder in the data set's official layout,
the file readers (TSV, CSV, JSON/JSONL(.gz), RACE, Story Cloze, DPRD), and the hub reader."""

from __future__ import annotations

import csv
import gzip
import json
import re
from collections.abc import Iterator
from pathlib import Path

from .registry import Example, TaskDataUnavailableError, TaskSpec

Row = dict[str, object]

# ---------------------------------------------------------------------------------------------
# Where each split lives in each official layout.


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
    files = dict(spec.files)[split]
    folders = [f for f in spec.folders if f]
    return (
        f"{spec.title} {split} needs one of {list(files)} in the folder given or in its "
        f"sub-folder {' / '.join(folders)}"
    )


def find(spec: TaskSpec, split: str, root: Path) -> Path:
    """The file (or RACE folder) holding ``split`` of ``spec`` under ``root``."""
    if not root.exists():
        raise FileNotFoundError(f"{root} does not exist. {_layout_hint(spec, split)}")
    if root.is_file():
        return root
    if spec.reader == "race" and any((root / lv).is_dir() for lv in ("middle", "high")):
        return root  # a RACE split folder itself
    for sub in spec.folders:
        folder = root / sub
        if not folder.is_dir():
            continue
        if spec.reader == "story_cloze":
            found = _story_cloze_file(folder, split)
            if found:
                return found
            continue
        for pattern in dict(spec.files)[split]:
            found = _match(folder, pattern)
            if found:
                return found
    hint = f" {spec.manual}" if spec.manual else ""
    raise FileNotFoundError(
        f"no {spec.title} {split} file under {root}. {_layout_hint(spec, split)}.{hint}"
    )


# ---------------------------------------------------------------------------------------------
# Rows out of files: each reader yields (where, row), ``where`` naming the file and line.


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
    name = dict(spec.label_aliases).get(text, text)
    if name in spec.labels:
        return spec.labels.index(name)
    if spec.digit_labels and text.isdigit() and int(text) < len(spec.labels):
        return int(text)
    allowed = list(spec.labels) + (["0", "1"] if spec.digit_labels else [])
    allowed += [alias for alias, _ in spec.label_aliases]
    raise ValueError(f"{where}: label {raw!r} is not a {spec.title} label; allowed: {allowed}")


def _text(value: object, where: str, column: str) -> str:
    text = str(value if value is not None else "").strip()
    if not text:
        raise ValueError(f"{where}: empty {column!r} text; fix or delete that row")
    return text


def _pair_examples(spec: TaskSpec, split: str, path: Path, rows) -> list[Example]:
    """Examples of a single-text or two-text task from ``rows``; labels checked row by row."""
    *text_names, label_names = spec.columns
    out = []
    for i, (where, row) in enumerate(rows):
        texts = []
        for names in text_names:
            col = next((n for n in names if n in row), None)
            if col is None:
                raise ValueError(
                    f"{where}: no column {names[0]!r} (columns: {list(row)}); "
                    f"is {path.name} a {spec.title} {split} file?"
                )
            texts.append(_text(row[col], where, col))
        col = next((n for n in label_names if n in row), None)
        if col is None:
            if split != "test":  # GLUE test files carry no labels; every other split must
                raise ValueError(
                    f"{where}: no label column {label_names[0]!r} (columns: {list(row)}); "
                    f"{spec.title} {split} needs labels"
                )
            label = None
        elif spec.no_gold and str(row[col]).strip() == "-":
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
        rows = _tsv_rows(path, spec.headerless, spec.columns[0][:1])
    return _pair_examples(spec, split, path, rows)


def _answer_count(spec: TaskSpec, answers: tuple[str, ...], where: str) -> None:
    if len(answers) != spec.n_answers:
        raise ValueError(
            f"{where}: {len(answers)} candidate answers {list(answers)}; "
            f"{spec.title} items have {spec.n_answers}"
        )


def _letter_index(letter: object, where: str) -> int:
    """A RACE answer letter as the answer's index."""
    if letter not in ("A", "B", "C", "D"):
        raise ValueError(f"{where}: answer {letter!r} is not A, B, C or D")
    return "ABCD".index(letter)


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
            for f in sorted((path / level).glob("*.txt"), key=_file_order):
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


def _read_race(spec: TaskSpec, split: str, path: Path) -> list[Example]:
    """One Example per RACE question: (article, question), four options, the answer's index."""
    out = []
    for where, level, p in _race_passages(path):
        if level not in spec.race_levels:
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
            label = _letter_index(letter, f"{where}, question {q}")
            uid = f"{p.get('id', Path(where).name)}-{q}"
            out.append(Example((article, str(question).strip()), answers, label, uid))
    return out


_STORY_COLUMNS = (
    "InputStoryid",
    *(f"InputSentence{i}" for i in (1, 2, 3, 4)),
    *(f"RandomFifthSentenceQuiz{i}" for i in (1, 2)),
    "AnswerRightEnding",
)


def _read_story_cloze(spec: TaskSpec, split: str, path: Path) -> list[Example]:
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
        out.append(Example((context, ""), answers, int(right) - 1, row["InputStoryid"]))
    return out


def _read_dprd(spec: TaskSpec, split: str, path: Path) -> list[Example]:
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
        out.append(Example((sentence, pronoun), answers, label, str(len(out))))
    return out


_READERS = {
    "pairs": _read_pairs,
    "race": _read_race,
    "story_cloze": _read_story_cloze,
    "dprd": _read_dprd,
}


def read(spec: TaskSpec, split: str, path: Path) -> list[Example]:
    """The examples in ``path``, a file (or RACE folder) holding ``split`` of ``spec``."""
    return _READERS[spec.reader](spec, split, path)


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


def read_hub(spec: TaskSpec, split: str) -> list[Example]:
    """The examples of ``split`` of ``spec`` from the hub, through ``datasets``."""
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
            label = _letter_index(value, where)
        else:  # a label name (SciTail) or a score (STS-B)
            label = _label_index(spec, value, where)
        out.append(
            Example(texts=tuple(texts), answers=answers, label=label, uid=str(row.get("idx", i)))
        )
    return out
