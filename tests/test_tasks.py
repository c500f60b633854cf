"""The task registry of the paper's Table 1 and its readers: fixtures, official layouts, the
hub mapping, the row counts of the shared data, and every bad-input error."""

import gzip
import json
import shutil
import time
from collections import Counter

import pytest

from gpt1lib.facts import PAPER_TABLES
from gpt1lib.tasks import (
    FIXTURES,
    TASKS,
    Example,
    TaskDataUnavailableError,
    describe_source,
    get_task,
    load_examples,
    subsample,
    unavailable,
)

#: Examples per fixture split (labeled splits are balanced; see the fixture README).
FIXTURE_COUNTS = {
    **{(t, s): n for t in ("sst2", "cola", "qnli", "rte", "mrpc", "qqp", "stsb")
       for s, n in (("train", 32), ("dev", 24), ("test", 16))},
    **{(t, s): n for t in ("mnli_m", "mnli_mm")
       for s, n in (("train", 36), ("dev", 24), ("test", 15))},
    ("snli", "train"): 36, ("snli", "dev"): 24, ("snli", "test"): 24,
    ("scitail", "train"): 28, ("scitail", "dev"): 20, ("scitail", "test"): 20,
    **{(t, s): n for t in ("race_m", "race_h")
       for s, n in (("train", 24), ("dev", 12), ("test", 12))},
    ("race", "train"): 48, ("race", "dev"): 24, ("race", "test"): 24,
    ("story_cloze", "train"): 32, ("story_cloze", "test"): 24,
    ("dprd", "train"): 32, ("dprd", "test"): 24,
}  # fmt: skip
#: Splits without labels in the fixture (GLUE test; MRPC test is the labeled MSR file).
UNLABELED = {
    (t, "test") for t in ("sst2", "cola", "qnli", "rte", "qqp", "stsb", "mnli_m", "mnli_mm")
}


def test_registry_is_the_papers_tables():
    by_table = {table: sorted(tasks) for table, tasks in PAPER_TABLES.items()}
    assert by_table == {
        "2": ["mnli_m", "mnli_mm", "qnli", "rte", "scitail", "snli"],
        "3": ["race", "race_h", "race_m", "story_cloze"],
        "4": ["cola", "mrpc", "qqp", "sst2", "stsb"],
    }
    assert set(TASKS) - {t for ts in PAPER_TABLES.values() for t in ts} == {"dprd"}  # Figure 2
    assert TASKS["cola"].metrics[0] == "matthews"
    assert TASKS["mrpc"].metrics[0] == TASKS["qqp"].metrics[0] == "f1"
    assert TASKS["stsb"].metrics[0] == "pearson" and TASKS["stsb"].labels == ()
    assert TASKS["scitail"].labels == ("entailment", "neutral")
    assert {t.n_answers for t in TASKS.values() if t.family == "multiple_choice"} == {2, 4}
    for name, spec in TASKS.items():
        assert spec.name == name and spec.eval_split in spec.splits
        assert (spec.hub is None) == (name == "story_cloze")
        assert spec.split_note and hash(spec)  # frozen and hashable (HubSource included)
    assert "rocstories" in TASKS["story_cloze"].manual


def test_get_task_by_key_or_title_and_unknown_names():
    assert get_task("MNLI-m") is TASKS["mnli_m"] and get_task(" SST2 ") is TASKS["sst2"]
    with pytest.raises(ValueError, match="choose one of .*'sst2'"):
        get_task("sst-5")
    with pytest.raises(ValueError, match="Story Cloze has no split 'dev'"):
        load_examples("story_cloze", "dev")


@pytest.mark.parametrize("name,split", sorted(FIXTURE_COUNTS))
def test_every_task_loads_from_the_fixture(name, split):
    spec = TASKS[name]
    examples = load_examples(name, split)
    assert len(examples) == FIXTURE_COUNTS[name, split]
    assert FIXTURES in (FIXTURES / describe_source(name, split)).parents
    width = {"classification": 1, "multiple_choice": 2}.get(spec.family, 2)
    for e in examples:
        assert isinstance(e, Example) and len(e.texts) == width and all(e.texts[:1])
        assert len(e.answers) == (spec.n_answers or 0)
        if (name, split) in UNLABELED:
            assert e.label is None
        elif name == "stsb":
            assert isinstance(e.label, float) and 0.0 <= e.label <= 5.0
        else:
            assert isinstance(e.label, int) and 0 <= e.label < (spec.n_answers or len(spec.labels))
    if (name, split) not in UNLABELED and spec.labels:
        counts = Counter(e.label for e in examples)
        assert sorted(counts) == list(range(len(spec.labels))) and len(set(counts.values())) == 1
    assert len({e.uid for e in examples}) == len(examples)


@pytest.mark.parametrize(
    "name",
    ["sst2", "cola", "mnli_m", "snli", "qnli", "rte", "scitail", "mrpc", "qqp", "story_cloze"],
)
def test_fixture_signal_is_learnable(name):
    """A bag of words learns each of these fixtures from train alone (a tiny GPT should, too)."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    spec = TASKS[name]

    def xy(split):
        exs = load_examples(name, split)
        if spec.family == "multiple_choice":  # one row per ending: is it the right one?
            return [a for e in exs for a in e.answers], [
                int(i == e.label) for e in exs for i in range(len(e.answers))
            ]
        return [" | ".join(e.texts) for e in exs], [e.label for e in exs]

    vec = CountVectorizer(token_pattern=r"[^ ]+")
    x_train, y_train = xy("train")
    clf = LogisticRegression(C=10.0, max_iter=2000).fit(vec.fit_transform(x_train), y_train)
    x_eval, y_eval = xy(spec.eval_split)
    assert clf.score(vec.transform(x_eval), y_eval) >= 0.85


# ---------------------------------------------------------------------- official layouts


def test_glue_folder_task_folder_or_single_file_give_the_same_examples():
    expected = load_examples("qqp", "dev")
    assert load_examples("qqp", "dev", FIXTURES / "glue") == expected
    assert load_examples("qqp", "dev", FIXTURES / "glue" / "QQP") == expected
    assert load_examples("qqp", "dev", str(FIXTURES / "glue" / "QQP" / "dev.tsv")) == expected


def test_headerless_cola_and_the_mrpc_bom():
    source, label, _, sentence = (
        (FIXTURES / "glue/CoLA/train.tsv").read_text().split("\n")[0].split("\t")
    )
    assert load_examples("cola", "train")[0] == Example((sentence,), label=int(label), uid="0")
    raw = (FIXTURES / "glue/MRPC/train.tsv").read_text(encoding="utf-8").splitlines()
    assert raw[0].startswith("\ufeffQuality")  # GLUE writes MRPC with a byte-order mark
    quality, _, _, a, b = raw[1].split("\t")
    assert load_examples("mrpc", "train")[0] == Example((a, b), label=int(quality), uid="0")


def test_largest_train_subset_is_read_and_test_prefers_labeled_mrpc():
    assert describe_source("qnli", "train").endswith("train_subset_32.json")
    assert describe_source("mrpc", "test").endswith("msr_paraphrase_test.txt")


def test_nli_jsonl_gz_and_glue_tsv_layouts_agree(tmp_path):
    """MultiNLI jsonl, its .gz, and GLUE's dev_matched.tsv give the same pairs, '-' dropped."""
    src = FIXTURES / "multinli_1.0" / "multinli_1.0_dev_matched.jsonl"
    lines = src.read_text().splitlines()
    assert sum(json.loads(x)["gold_label"] == "-" for x in lines) == 2
    expected = load_examples("mnli_m", "dev")
    assert len(expected) == len(lines) - 2
    with gzip.open(tmp_path / "dev_matched.jsonl.gz", "wt") as f:
        f.write(src.read_text())
    assert load_examples("mnli_m", "dev", tmp_path) == expected
    rows = [json.loads(x) for x in lines]
    header = "index\tpromptID\tpairID\tgenre\tsentence1\tsentence2\tlabel1\tgold_label"
    tsv = [header] + [
        f"{i}\t{r['promptID']}\t{r['pairID']}\t{r['genre']}\t{r['sentence1']}\t{r['sentence2']}"
        f"\t{r['gold_label']}\t{r['gold_label']}"
        for i, r in enumerate(rows)
        if r["gold_label"] != "-"
    ]
    (tmp_path / "glue" / "MNLI").mkdir(parents=True)
    (tmp_path / "glue" / "MNLI" / "dev_matched.tsv").write_text("\n".join(tsv) + "\n")
    (tmp_path / "dev_matched.jsonl.gz").unlink()
    assert load_examples("mnli_m", "dev", tmp_path) == expected


def test_scitail_tsv_and_csv_labels():
    train = load_examples("scitail", "train")  # "entails" / "neutral"
    test = load_examples("scitail", "test")  # the CSV's "entailment" / "not_entailment"
    assert {e.label for e in train} == {e.label for e in test} == {0, 1}
    lines = (FIXTURES / "scitail" / "test.csv").read_text().splitlines()
    assert lines[1].endswith(",entailment") == (test[0].label == 0)


def test_race_jsonl_and_official_folders_agree(tmp_path):
    """One passage per line (ids 'middle<n>.txt') and {split}/{middle,high}/<n>.txt agree."""
    folder = FIXTURES / "race" / "dev"
    lines = [
        (folder / level / f"{n}.txt").read_text()
        for level in ("middle", "high")
        for n in (1, 2, 3, 4)
    ]
    with gzip.open(tmp_path / "dev.jsonl.gz", "wt") as f:
        f.write("\n".join(lines) + "\n")
    for name in ("race", "race_m", "race_h"):
        assert load_examples(name, "dev", tmp_path) == load_examples(name, "dev")
    assert load_examples("race", "dev", folder) == load_examples("race", "dev")
    first = load_examples("race_h", "dev")[0]
    passage = json.loads((folder / "high" / "1.txt").read_text())
    assert first.texts == (passage["article"], passage["questions"][0])
    assert first.answers == tuple(passage["options"][0])
    assert "ABCD"[first.label] == passage["answers"][0] and first.uid == "high1.txt-0"


def test_story_cloze_picks_the_2016_files(tmp_path):
    src = FIXTURES / "story_cloze"
    for name in (
        "cloze_test_val__spring2016 - cloze_test_ALL_val.csv",
        "cloze_test_val__winter2018-cloze_test_ALL_val - 1 - 1.csv",
        "cloze_test_test__spring2016 - cloze_test_ALL_test.csv",
    ):
        kind = "val" if "_val_" in name else "test"
        shutil.copy(src / f"stories_{kind}.csv", tmp_path / name)
    assert "spring2016" in describe_source("story_cloze", "train", tmp_path)
    assert "spring2016" in describe_source("story_cloze", "test", tmp_path)
    e = load_examples("story_cloze", "test", tmp_path)[0]
    row = (src / "stories_test.csv").read_text().splitlines()[1].split(",")
    assert e.texts == (" ".join(row[1:5]), "") and e.answers == tuple(row[5:7])
    assert e.label == int(row[7]) - 1
    shutil.copy(src / "stories_val.csv", tmp_path / "val2016_copy.csv")
    with pytest.raises(ValueError, match="several Story Cloze train files"):
        load_examples("story_cloze", "train", tmp_path)


def test_story_cloze_without_its_test_file_splits_the_validation_file(tmp_path):
    shutil.copy(FIXTURES / "story_cloze" / "stories_val.csv", tmp_path)
    stories = load_examples("story_cloze", "train", FIXTURES / "story_cloze" / "stories_val.csv")
    train = load_examples("story_cloze", "train", tmp_path)
    test = load_examples("story_cloze", "test", tmp_path)
    assert len(train) + len(test) == len(stories) and len(test) == len(stories) // 2
    assert sorted(train + test, key=stories.index) == stories  # the halves share no story
    assert load_examples("story_cloze", "test", tmp_path, seed=5) == test  # same halves any seed
    assert unavailable("story_cloze", tmp_path) is None
    assert "no test file" in describe_source("story_cloze", "test", tmp_path)
    (tmp_path / "stories_val.csv").unlink()
    with pytest.raises(FileNotFoundError, match="Story Cloze train"):
        load_examples("story_cloze", "test", tmp_path)


def test_dprd_blocks():
    e = load_examples("dprd", "train")[0]
    block = (FIXTURES / "dprd" / "train.c.txt").read_text().split("\n\n")[0].splitlines()
    assert e.texts == (block[0], block[1]) and e.answers == tuple(block[2].split(","))
    assert e.answers[e.label] == block[3]


def test_limit_is_a_reproducible_seeded_subsample():
    full = load_examples("sst2", "train")
    a = load_examples("sst2", "train", limit=8, seed=3)
    assert a == load_examples("sst2", "train", limit=8, seed=3)
    assert a != load_examples("sst2", "train", limit=8, seed=4)
    assert len(a) == 8 and a == [e for e in full if e in a]  # a subset, in file order
    assert load_examples("sst2", "train", limit=1000) == full == subsample(full, None)
    with pytest.raises(ValueError, match="limit=0"):
        load_examples("sst2", "train", limit=0)


# ---------------------------------------------------------------------- the hub


def test_hub_offline_fails_fast_naming_the_local_alternative():
    start = time.monotonic()
    with pytest.raises(TaskDataUnavailableError, match=r"source='/path/to/folder'.*dev\.tsv"):
        load_examples("sst2", "dev", source="hub")
    assert time.monotonic() - start < 30
    with pytest.raises(TaskDataUnavailableError, match="rocstories"):
        load_examples("story_cloze", "test", source="hub")
    assert describe_source("mnli_mm", "dev", "hub") == (
        "hub nyu-mll/glue (config mnli, split validation_mismatched)"
    )


def test_hub_rows_map_onto_examples(monkeypatch):
    """The hub's columns, with ``datasets.load_dataset`` stubbed (the hub is not reachable)."""
    datasets = pytest.importorskip("datasets")
    tables = {
        ("nyu-mll/glue", "mnli", "validation_matched"): [
            {"premise": "p", "hypothesis": "h", "label": 2, "idx": 7}
        ],
        ("nyu-mll/glue", "mnli", "test_matched"): [
            {"premise": "p", "hypothesis": "h", "label": -1, "idx": 0}
        ],
        ("nyu-mll/glue", "stsb", "validation"): [
            {"sentence1": "a", "sentence2": "b", "label": 3.2, "idx": 0}
        ],
        ("stanfordnlp/snli", "plain_text", "test"): [
            {"premise": "p", "hypothesis": "h", "label": -1},
            {"premise": "p", "hypothesis": "h", "label": 1},
        ],
        ("allenai/scitail", "tsv_format", "test"): [
            {"premise": "p", "hypothesis": "h", "label": "entails"},
            {"premise": "p", "hypothesis": "h", "label": "neutral"},
        ],
        ("ehovy/race", "middle", "validation"): [
            {
                "example_id": "middle1.txt",
                "article": "a",
                "question": "",
                "options": list("wxyz"),
                "answer": "C",
            }
        ],  # fmt: skip
        ("community-datasets/definite_pronoun_resolution", "plain_text", "test"): [
            {"sentence": "s", "pronoun": "he", "candidates": ["A", "B"], "label": 1}
        ],
    }
    monkeypatch.setattr(
        datasets, "load_dataset", lambda repo, config, split: tables[repo, config, split]
    )
    assert load_examples("mnli_m", "dev", "hub") == [Example(("p", "h"), label=2, uid="7")]
    assert load_examples("mnli_m", "test", "hub")[0].label is None
    assert load_examples("stsb", "dev", "hub")[0].label == pytest.approx(3.2)
    assert [e.label for e in load_examples("snli", "test", "hub")] == [1]  # no gold: dropped
    assert [e.label for e in load_examples("scitail", "test", "hub")] == [0, 1]
    race = load_examples("race_m", "dev", "hub")[0]
    assert race.texts == ("a", "") and race.answers == tuple("wxyz") and race.label == 2
    dprd = load_examples("dprd", "test", "hub")[0]
    assert dprd.texts == ("s", "he") and dprd.answers == ("A", "B") and dprd.label == 1


# ---------------------------------------------------------------------- bad input


def _glue_copy(tmp_path, task_folder, split, edit):
    folder = tmp_path / task_folder
    folder.mkdir()
    lines = (FIXTURES / "glue" / task_folder / f"{split}.tsv").read_text().splitlines()
    (folder / f"{split}.tsv").write_text("\n".join(edit(lines)) + "\n")
    return folder


def test_missing_folder_or_file_says_what_the_layout_needs(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nowhere does not exist.*'train\.tsv'"):
        load_examples("rte", "train", tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match=r"no QNLI train file.*train_subset_\*\.json"):
        load_examples("qnli", "train", tmp_path)
    with pytest.raises(FileNotFoundError, match="rocstories"):
        load_examples("story_cloze", "test", tmp_path)


def test_label_outside_the_label_set_names_file_row_and_labels(tmp_path):
    folder = _glue_copy(
        tmp_path, "SST-2", "dev", lambda ls: [ls[0], ls[1].rsplit("\t", 1)[0] + "\tmaybe"]
    )
    with pytest.raises(
        ValueError, match=r"dev\.tsv, line 2: label 'maybe'.*'negative', 'positive'"
    ):
        load_examples("sst2", "dev", folder)
    bad = tmp_path / "bad.tsv"
    bad.write_text("index\tquestion\tsentence\tlabel\n0\tq?\ts.\tneutral\n")
    with pytest.raises(ValueError, match="not a QNLI label.*not_entailment"):
        load_examples("qnli", "dev", bad)


def test_missing_column_names_file_and_column(tmp_path):
    folder = _glue_copy(
        tmp_path, "RTE", "dev", lambda ls: [ls[0].replace("label", "gold")] + ls[1:]
    )
    with pytest.raises(ValueError, match=r"dev\.tsv, line 2: no label column 'label'"):
        load_examples("rte", "dev", folder)
    bad = tmp_path / "x.jsonl"
    bad.write_text(json.dumps({"sentence1": "a", "gold_label": "neutral"}) + "\n")
    with pytest.raises(ValueError, match=r"x\.jsonl, line 1: no column 'sentence2'"):
        load_examples("snli", "dev", bad)


def test_empty_text_and_ragged_rows_name_the_row(tmp_path):
    folder = _glue_copy(tmp_path, "SST-2", "train", lambda ls: [*ls[:3], " \t1", *ls[3:]])
    with pytest.raises(ValueError, match=r"train\.tsv, line 4: empty 'sentence'"):
        load_examples("sst2", "train", folder)
    folder = _glue_copy(tmp_path, "MRPC", "dev", lambda ls: [*ls[:2], "1\t2\tonly three"])
    with pytest.raises(ValueError, match=r"dev\.tsv, line 3: 3 tab-separated fields"):
        load_examples("mrpc", "dev", folder)


def test_scores_and_answer_indices_are_checked(tmp_path):
    folder = _glue_copy(
        tmp_path, "STS-B", "dev", lambda ls: [ls[0], ls[1].rsplit("\t", 1)[0] + "\t7.5"]
    )
    with pytest.raises(ValueError, match=r"score '7.5' is not a number in \[0, 5\]"):
        load_examples("stsb", "dev", folder)
    story = tmp_path / "cloze_test_val.csv"
    lines = (FIXTURES / "story_cloze" / "stories_val.csv").read_text().splitlines()
    story.write_text("\n".join([lines[0], lines[1][:-1] + "3"]) + "\n")
    with pytest.raises(ValueError, match="AnswerRightEnding '3' is not 1 or 2"):
        load_examples("story_cloze", "train", tmp_path)
    story.write_text(lines[0].replace("AnswerRightEnding", "Answer") + "\n" + lines[1] + "\n")
    with pytest.raises(ValueError, match="no column 'AnswerRightEnding'"):
        load_examples("story_cloze", "train", tmp_path)


def test_answer_lists_of_the_wrong_length(tmp_path):
    passage = json.loads((FIXTURES / "race" / "dev" / "middle" / "1.txt").read_text())
    passage["options"][1] = passage["options"][1][:3]
    (tmp_path / "dev" / "middle").mkdir(parents=True)
    (tmp_path / "dev" / "middle" / "1.txt").write_text(json.dumps(passage))
    with pytest.raises(ValueError, match=r"1\.txt, question 1: 3 candidate answers.*have 4"):
        load_examples("race_m", "dev", tmp_path)
    passage["options"][1].append("x")
    passage["answers"][0] = "E"
    (tmp_path / "dev" / "middle" / "1.txt").write_text(json.dumps(passage))
    with pytest.raises(ValueError, match="answer 'E' is not A, B, C or D"):
        load_examples("race", "dev", tmp_path)
    (tmp_path / "train.c.txt").write_text("A met B and C.\nhe\nA,B,C\nA\n")
    with pytest.raises(ValueError, match="line 1: 3 candidate answers.*have 2"):
        load_examples("dprd", "train", tmp_path)
    (tmp_path / "train.c.txt").write_text("A met B.\nhe\nA,B\nC\n\nA met B.\nhe\nA,B\n")
    with pytest.raises(ValueError, match="answer 'C' is not one of"):
        load_examples("dprd", "train", tmp_path)
    (tmp_path / "train.c.txt").write_text("A met B.\nhe\nA,B\nA\n\nA met B.\nhe\nA,B\n")
    with pytest.raises(ValueError, match="line 6: 3 lines, expected 4"):
        load_examples("dprd", "train", tmp_path)


# ---------------------------------------------------------------------- the shared data

#: Official sizes (SOURCES.md), counted after dropping pairs without a gold label.
SHARED_COUNTS = {
    ("cola", "train"): 8551, ("cola", "dev"): 1043, ("sst2", "dev"): 872, ("mrpc", "dev"): 408,
    ("mrpc", "test"): 1725, ("stsb", "dev"): 1500, ("rte", "dev"): 277, ("qnli", "dev"): 5463,
    ("mnli_m", "dev"): 9815, ("mnli_mm", "dev"): 9832, ("snli", "dev"): 9842,
    ("snli", "test"): 9824, ("scitail", "test"): 2126, ("race", "dev"): 4887,
    ("race", "test"): 4934, ("race_m", "dev"): 1436, ("race_h", "dev"): 3451,
    ("race_m", "test"): 1436, ("race_h", "test"): 3498,
    # the train subsets: the largest file of each folder
    ("qnli", "train"): 8999, ("qqp", "train"): 8999, ("snli", "train"): 8999,
    ("mnli_m", "train"): 10000,
    # QQP has no dev file there: its evaluation split is the 1,000 train pairs held apart
    ("qqp", "dev"): 1000,
}  # fmt: skip


@pytest.mark.parametrize("name,split", sorted(SHARED_COUNTS))
def test_shared_data_row_counts(shared_data, name, split):
    assert len(load_examples(name, split, shared_data)) == SHARED_COUNTS[name, split]


def test_shared_data_labels_match_sources_md(shared_data):
    def counts(name, split):
        spec = TASKS[name]
        return dict(Counter(spec.labels[e.label] for e in load_examples(name, split, shared_data)))

    assert counts("mnli_m", "dev") == {"entailment": 3479, "neutral": 3123, "contradiction": 3213}
    assert counts("snli", "dev") == {"entailment": 3329, "neutral": 3235, "contradiction": 3278}
    assert counts("scitail", "test") == {"entailment": 842, "neutral": 1284}
    assert load_examples("mnli_m", "dev", shared_data)[0].uid == "63735n"
    assert describe_source("mnli_m", "train", shared_data).endswith(
        "train_subset_10k_seed42.json.gz"
    )
    sst = load_examples("sst2", "dev", shared_data)[0]
    assert sst == Example(("it 's a charming and often affecting journey .",), label=1, uid="0")
    assert all(e.label is None for e in load_examples("sst2", "test", shared_data))


def test_qqp_evaluates_on_the_held_apart_train_subset_where_there_is_no_dev_file(tmp_path):
    import json

    qqp = tmp_path / "glue" / "QQP"
    qqp.mkdir(parents=True)

    def write(name, n, start):
        rows = {
            str(i): {"text_a": f"q{start + i}?", "text_b": "b?", "label": "1"} for i in range(n)
        }
        (qqp / name).write_text(json.dumps(rows))

    write("train_subset_1000.json", 2, 100)
    with pytest.raises(FileNotFoundError, match="no QQP train file"):
        load_examples("qqp", "train", tmp_path)  # the held-apart file is never training data
    write("train_subset_8999.json", 3, 0)
    train, dev = load_examples("qqp", "train", tmp_path), load_examples("qqp", "dev", tmp_path)
    assert describe_source("qqp", "dev", tmp_path).endswith("train_subset_1000.json")
    assert len(train) == 3 and len(dev) == 2
    assert not {e.texts for e in train} & {e.texts for e in dev}
    assert "held apart" in get_task("qqp").split_note


def test_unavailable_names_the_missing_split(tmp_path):
    from gpt1lib.tasks import unavailable

    assert unavailable("sst2", "fixture") is None
    assert unavailable(get_task("sst2"), "fixture") is None
    (tmp_path / "SST-2").mkdir()
    (tmp_path / "SST-2" / "train.tsv").write_text("sentence\tlabel\na fine film\t1\n")
    assert "dev" in unavailable("sst2", tmp_path)
