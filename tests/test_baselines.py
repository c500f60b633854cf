"""A score's baselines (issue 46), against hand derivations: chance (answering at random with
even odds) and the best score of one answer given to every example, on an evaluation's own
labels; a model that answers one thing to 90% of the examples reads as giving one answer; and
a score whose interval reaches the one answer's shows nothing learned."""

import pytest

from gpt1lib.baselines import shows_nothing
from gpt1lib.evaluations import chance, one_answer, one_answer_score

#: MRPC's dev set: 279 of its 408 pairs are paraphrases (label 1).
MRPC = [1] * 279 + [0] * 129


def test_answering_paraphrase_to_every_pair_scores_81_2_f1():
    # precision 279/408, recall 1: F1 = 2pr / (p + r) = 2 * 279 / (279 + 408)
    assert one_answer_score("mrpc", MRPC) == pytest.approx(100 * 2 * 279 / 687)
    assert round(one_answer_score("mrpc", MRPC), 1) == 81.2


def test_chance_is_the_score_of_answering_at_random_with_even_odds():
    p = 279 / 408  # F1 of class 1: precision p, recall 1/2
    assert chance("mrpc", MRPC) == pytest.approx(100 * 2 * p * 0.5 / (p + 0.5))
    assert chance("sst2") == 50 and chance("mnli_m") == pytest.approx(100 / 3)
    assert chance("race") == 25 and chance("cola") == 0 and chance("stsb") == 0
    assert chance("mrpc") is None  # F1's chance needs the labels


def test_one_answer_is_the_commonest_labels_share_or_zero_for_a_correlation():
    sst2 = [1] * 444 + [0] * 428
    assert one_answer_score("sst2", sst2) == pytest.approx(100 * 444 / 872)
    assert one_answer_score("cola", [0, 1, 1]) == 0  # MCC of a constant: 0
    assert one_answer_score("race", [0, 1, 2, 3, 3]) == pytest.approx(40.0)


def test_nine_in_ten_the_same_answer_is_one_answer():
    def outcome(ones):
        return {"predictions": [1] * ones + [0] * (408 - ones), "labels": MRPC}

    assert one_answer("mrpc", outcome(408)) == "'paraphrase'"
    assert one_answer("mrpc", outcome(368)) == "'paraphrase'"  # 90.2%
    assert one_answer("mrpc", outcome(366)) is None  # 89.7%


def test_a_score_whose_interval_reaches_the_one_answers_shows_nothing():
    varied = {"predictions": [i % 2 for i in range(408)], "labels": MRPC}
    row = {"outcome": varied, "value": 79.1, "lo": 75.2, "hi": 82.7}
    assert shows_nothing("mrpc", row)  # 75.2 <= 81.2
    assert not shows_nothing("mrpc", {**row, "value": 86.0, "lo": 82.0})
    assert not shows_nothing("mrpc", {**row, "outcome": None})  # no labels kept: unknown


def test_the_verdict_box_says_what_the_findings_and_the_records_say():
    """The box at the top of the intro: each run's count of findings that hold is the findings
    table's, its compute share is the issue's estimate from outside the code (the small run:
    "about 1/4,000 of GPT-1's pre-training compute"), and a run with findings but no
    fine-tuning (zero-shot only) still gets its line."""
    import re

    from gpt1lib.findings import findings
    from gpt1lib.harness.reproduce import ROOT
    from gpt1lib.records import read_records
    from gpt1lib.verdict import verdict_box

    records = read_records(ROOT / "results")
    box = verdict_box(records)
    for run, f in findings(records).groupby("run"):
        held = int((f.verdict == "yes").sum())
        assert f"<b>{run}</b>: {held} of the paper's {len(f)} findings hold" in box
    share = int(
        re.search(r"small run[^<]*</b>.*?about 1/([\d,]+) of GPT-1", box)[1].replace(",", "")
    )
    assert 3_000 < share < 5_000
    zero_shot = records[records.experiment == "zero_shot"]
    assert "findings hold" in verdict_box(zero_shot) and "task scores" not in verdict_box(zero_shot)
