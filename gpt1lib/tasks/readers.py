"""Reading a task's data: the file readers of what ``layout.find`` finds, and the hub reader."""

from __future__ import annotations

import csv
import gzip
import json
from collections.abc import Iterable, Iterator
from itertools import groupby
from pathlib import Path

from ..files import not_utf8
from .layout import RACE_LEVELS, find, layout_hint
from .registry import Example, TaskDataUnavailableError, TaskSpec

Row = dict[str, object]


def _open_text(path: Path):
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8-sig", newline="")
    return path.open(encoding="utf-8-sig", newline="")


def _json(path: Path, text: str | None = None, where: str = "") -> object:
    """``text`` (by default all of ``path``) parsed as JSON; an error naming ``where`` if bad."""
    if text is None:
        try:
            with _open_text(path) as f:
                text = f.read()
        except UnicodeDecodeError as e:
            raise not_utf8(path, e) from e
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where or path}: not valid JSON ({e}); is this the right file?") from e


def _rows(spec: TaskSpec, path: Path) -> Iterator[tuple[str, Row]]:
    """The rows of ``path``, by its name: CSV; JSON(.gz), an array of records or an object of
    records keyed by row id (the subset files); jsonl(.gz), one record per line; else TSV."""
    name = path.name.lower()
    if name.endswith(".csv"):
        yield from _csv_rows(path)
    elif name.endswith((".json", ".json.gz")):
        data = _json(path)
        if isinstance(data, dict):
            yield from ((f"{path}, row {key!r}", {"id": key, **row}) for key, row in data.items())
        elif isinstance(data, list):
            yield from ((f"{path}, row {i}", row) for i, row in enumerate(data))
        else:
            raise ValueError(f"{path}: expected a JSON array or object of rows, got {type(data)}")
    elif name.endswith((".jsonl", ".jsonl.gz")):
        with _open_text(path) as f:
            lines = ((f"{path}, line {n}", line) for n, line in enumerate(f, start=1))
            yield from ((where, _json(path, line, where)) for where, line in lines if line.strip())
    else:
        yield from _tsv_rows(spec, path)


def _csv_rows(path: Path) -> Iterator[tuple[str, Row]]:
    """The rows of a CSV file, read by its header line."""
    with _open_text(path) as f:
        yield from ((f"{path}, line {n}", row) for n, row in enumerate(csv.DictReader(f), start=2))


def _tsv_rows(spec: TaskSpec, path: Path) -> Iterator[tuple[str, Row]]:
    """Tab-separated rows, no quoting (as GLUE writes them), read by the header line, or by
    ``spec.headerless`` where the first line is not one (CoLA train/dev, SciTail tsv_format)."""
    with _open_text(path) as f:
        lines = [line.rstrip("\r\n") for line in f]
    first = lines[0].split("\t") if lines else []
    headed = spec.headerless is None or spec.columns[0][0] in first
    header, start = (first, 1) if headed else (list(spec.headerless), 0)
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


def _text(value: object, where: str, column: str) -> str:
    text = str(value if value is not None else "").strip()
    if not text:
        raise ValueError(f"{where}: empty {column!r} text; fix or delete that row")
    return text


def _column(row: Row, names: tuple[str, ...], where: str, fix: str, what="column") -> str | None:
    """The first of ``names`` (the layouts' names for one column) that ``row`` has; if none, an
    error naming ``where`` and the ``fix``, or None where ``fix`` is "" (an optional column)."""
    col = next((n for n in names if n in row), None)
    if col is None and fix:
        raise ValueError(f"{where}: no {what} {names[0]!r} (columns: {list(row)}); {fix}")
    return col


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
    allowed = [*spec.labels, *(["0", "1"] if spec.digit_labels else []), *dict(spec.label_aliases)]
    raise ValueError(f"{where}: label {raw!r} is not a {spec.title} label; allowed: {allowed}")


def _choice(value: object, choices: str, where: str, what: str) -> int:
    """The index of ``value`` in ``choices``: RACE's answer letters "ABCD", Story Cloze's "12"."""
    if value not in tuple(choices):
        listed = f"{', '.join(choices[:-1])} or {choices[-1]}"
        raise ValueError(f"{where}: {what} {value!r} is not {listed}")
    return choices.index(value)


def _answers(spec: TaskSpec, candidates: Iterable[object], where: str) -> tuple[str, ...]:
    """The candidate answers of a multiple-choice item, stripped; an error unless ``n_answers``."""
    answers = tuple(str(a).strip() for a in candidates)
    if len(answers) != spec.n_answers:
        raise ValueError(
            f"{where}: {len(answers)} candidate answers {list(answers)}; "
            f"{spec.title} items have {spec.n_answers}"
        )
    return answers


def _read_pairs(spec: TaskSpec, split: str, path: Path) -> list[Example]:
    """A one-text or two-text task: each text and the label from the first of its column names
    (``spec.columns``) that the row has."""
    *text_names, label_names = spec.columns
    out = []
    for i, (where, row) in enumerate(_rows(spec, path)):
        texts = []
        for names in text_names:
            col = _column(row, names, where, f"is {path.name} a {spec.title} {split} file?")
            texts.append(_text(row[col], where, col))
        # GLUE test files carry no labels; every other split must
        needs = "" if split == "test" else f"{spec.title} {split} needs labels"
        col = _column(row, label_names, where, needs, "label column")
        if col is not None and spec.no_gold and str(row[col]).strip() == "-":
            continue
        label = None if col is None else _label_index(spec, row[col], where)
        uid = row.get("pairID") or row.get("index") or row.get("id") or row.get("idx") or i
        out.append(Example(tuple(texts), label=label, uid=str(uid)))
    return out


def _file_order(path: Path) -> tuple[int, str]:
    return (int(path.stem), "") if path.stem.isdigit() else (-1, path.stem)


def _race_level(where: str, passage: Row) -> str:
    """The school level a RACE passage id starts with (the jsonl and one-file layouts)."""
    pid = str(passage.get("id", ""))
    for level in RACE_LEVELS:
        if pid.startswith(level):
            return level
    raise ValueError(
        f"{where}: RACE id {pid!r} does not start with 'middle' or 'high', so its school level "
        "is unknown; use the official layout ({split}/middle/*.txt, {split}/high/*.txt) instead"
    )


def _read_race(spec: TaskSpec, split: str, path: Path) -> list[Example]:
    """One Example per RACE question: (article, question), four options, the answer's index;
    from a split folder (level: the sub-folder), a jsonl(.gz) or one passage file (level: the
    passage id)."""
    if path.is_dir():
        levels = [lv for lv in RACE_LEVELS if (path / lv).is_dir()]
        if not levels:
            raise FileNotFoundError(
                f"{path} has neither middle/ nor high/: the official RACE layout is "
                "{train,dev,test}/{middle,high}/<n>.txt, one passage (JSON) per file"
            )
        files = (f for lv in levels for f in sorted((path / lv).glob("*.txt"), key=_file_order))
        passages = ((str(f), f.parent.name, _json(f)) for f in files)
    else:
        jsonl = path.name.endswith((".jsonl", ".jsonl.gz"))
        rows = _rows(spec, path) if jsonl else [(str(path), _json(path))]
        passages = ((where, _race_level(where, p), p) for where, p in rows)
    out = []
    for where, level, p in passages:
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
        items = zip(p["questions"], p["options"], p["answers"], strict=True)
        for q, (question, options, letter) in enumerate(items):
            answers = _answers(spec, options, f"{where}, question {q}")
            label = _choice(letter, "ABCD", f"{where}, question {q}", "answer")
            uid = f"{p.get('id', Path(where).name)}-{q}"
            out.append(Example((article, str(question).strip()), answers, label, uid))
    return out


_STORY_COLUMNS = (
    "InputStoryid",
    *(f"InputSentence{i}" for i in (1, 2, 3, 4)),
    "RandomFifthSentenceQuiz1",
    "RandomFifthSentenceQuiz2",
    "AnswerRightEnding",
)


def _read_story_cloze(spec: TaskSpec, split: str, path: Path) -> list[Example]:
    """Story Cloze 2016: context = the four sentences joined by spaces, question "", 2 endings."""
    out, fix = [], f"the Story Cloze 2016 CSV files have {list(_STORY_COLUMNS)}"
    for where, row in _csv_rows(path):  # CSV whatever the file's name
        for column in _STORY_COLUMNS:
            _column(row, (column,), str(path), fix)
        context = " ".join(
            _text(row[f"InputSentence{i}"], where, f"InputSentence{i}") for i in (1, 2, 3, 4)
        )
        answers = tuple(_text(row[f"RandomFifthSentenceQuiz{i}"], where, "ending") for i in (1, 2))
        label = _choice(str(row["AnswerRightEnding"]).strip(), "12", where, "AnswerRightEnding")
        out.append(Example((context, ""), answers, label, row["InputStoryid"]))
    return out


def _read_dprd(spec: TaskSpec, split: str, path: Path) -> list[Example]:
    """DPRD's original format: blocks of sentence / pronoun / "cand1,cand2" / answer, blank line."""
    with _open_text(path) as f:
        numbered = list(enumerate((line.strip() for line in f), start=1))
    out = []
    for block in [list(b) for filled, b in groupby(numbered, key=lambda nl: bool(nl[1])) if filled]:
        where = f"{path}, block at line {block[0][0]}"
        if len(block) != 4:
            raise ValueError(
                f"{where}: {len(block)} lines, expected 4 (sentence, pronoun, "
                "'candidate1,candidate2', answer) and a blank line after"
            )
        sentence, pronoun, candidates, answer = (line for _, line in block)
        answers = _answers(spec, candidates.split(","), where)
        folded = [a.lower() for a in answers]
        if answer not in answers and answer.lower() not in folded:
            raise ValueError(f"{where}: answer {answer!r} is not one of {list(answers)}")
        label = answers.index(answer) if answer in answers else folded.index(answer.lower())
        out.append(Example((sentence, pronoun), answers, label, str(len(out))))
    return out


def read(spec: TaskSpec, split: str, source: str | Path) -> list[Example]:
    """The examples of ``split`` of ``spec`` in ``source``: ``"hub"``, or what ``find`` takes."""
    if source == "hub":
        return read_hub(spec, split)
    readers = {"race": _read_race, "story_cloze": _read_story_cloze, "dprd": _read_dprd}
    path = find(spec, split, source)
    try:
        examples = readers.get(spec.reader, _read_pairs)(spec, split, path)
    except UnicodeDecodeError as e:
        raise not_utf8(path, e) from e
    if not examples:
        raise TaskDataUnavailableError(
            f"{path} holds no {spec.title} {split} examples (a header and no rows, or no row "
            f"with a gold label): give a {split} file with rows"
        )
    return examples


def read_hub(spec: TaskSpec, split: str) -> list[Example]:
    """The examples of ``split`` of ``spec`` from the hub, through ``datasets``."""
    hub = spec.hub
    if hub is None:
        raise TaskDataUnavailableError(
            f"{spec.title} has no hub copy that `datasets` can load. {spec.manual}"
        )
    hub_split = hub.split(split)
    import datasets  # slow to import; only the hub source needs it

    try:
        rows = datasets.load_dataset(hub.repo, hub.config, split=hub_split)
    except Exception as e:  # offline, unreachable, renamed, or gated
        raise TaskDataUnavailableError(
            f"could not load {hub.repo!r} (config {hub.config!r}, split {hub_split!r}) from the "
            f"Hugging Face hub ({type(e).__name__}: {e}). Download the data where the hub is "
            f"reachable, or get the official release, and pass its folder: load_examples("
            f"{spec.name!r}, {split!r}, source='/path/to/folder'). {layout_hint(spec, split)}"
        ) from e
    out = []
    for i, row in enumerate(rows):
        where = f"{hub.repo} ({hub.config}) {hub_split}, row {i}"
        texts = [_text(row[hub.texts[0]], where, hub.texts[0])]
        for c in hub.texts[1:]:  # a multiple-choice question may be "", never the context
            texts.append(str(row[c] or "").strip() if spec.n_answers else _text(row[c], where, c))
        answers = _answers(spec, row[hub.answers], where) if hub.answers else ()
        value = row[hub.label]
        if hub_split in hub.unlabeled:
            label = None
        elif isinstance(value, int):  # a class index (ClassLabel) or an answer index
            if value < 0:  # SNLI's pairs without a gold label: dropped, as the local readers do
                continue
            if value >= (spec.n_answers or len(spec.labels)):
                raise ValueError(f"{where}: label {value} is out of range for {spec.title}")
            label = value
        elif isinstance(value, str) and spec.n_answers:  # RACE: the answer's letter
            label = _choice(value, "ABCD", where, "answer")
        else:  # a label name (SciTail) or a score (STS-B)
            label = _label_index(spec, value, where)
        out.append(Example(tuple(texts), answers, label, str(row.get("idx", i))))
    return out
