"""Records: round trip, provenance, and the paper's tables assembled from hand-made records."""

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpt1lib.facts import (
    PAPER_RESULTS,
    PAPER_TABLE5,
    TABLE5_TASKS,
)
from gpt1lib.labels import run_label, short_names
from gpt1lib.paper import (
    FINDINGS,
    GLUE_ROW,
    ablation_deltas,
    ablation_differences,
    ablation_table,
    against_paper,
    final_metrics,
    paper_table,
)
from gpt1lib.records import (
    FIELDS,
    append_records,
    load_records,
    make_record,
    per_example_record,
    provenance,
    read_records,
)
from gpt1lib.tasks import TASKS, compute_metrics

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from migrate_records import migrate, migrate_folder  # noqa: E402


def _rec(task, value, metric, split="dev", step=3, experiment="finetune", scale="small"):
    return make_record(
        metric,
        value,
        task=task,
        split=split,
        step=step,
        experiment=experiment,
        scale=scale,
        commit="abc",
        device="NVIDIA H100 80GB HBM3",
        seed=0,
    )


def test_round_trip(tmp_path):
    recs = [_rec("sst2", 90.0, "accuracy"), _rec("cola", 40.0, "matthews")]
    append_records(tmp_path / "a" / "r.jsonl", recs[:1])
    append_records(tmp_path / "a" / "r.jsonl", recs[1:])
    df = read_records(tmp_path)
    assert list(df.columns) == list(FIELDS)
    assert df.to_dict("records") == recs
    assert read_records(tmp_path / "missing").empty


def test_unknown_field_is_an_error():
    with pytest.raises(ValueError, match="unknown record fields"):
        make_record("accuracy", 1.0, tsk="sst2")


def test_provenance_names_commit_device_and_date():
    p = provenance("cpu")
    assert p["device"].startswith("cpu") and p["commit"] and "T" in p["date"]


def test_a_recorded_runs_own_results_do_not_make_the_checkout_dirty(tmp_path, monkeypatch):
    import subprocess

    from gpt1lib import records

    def git(*args):
        run = subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True)
        return run.stdout.strip()

    (tmp_path / "results").mkdir()
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "results" / "run.jsonl").write_text("{}\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    monkeypatch.delenv("GPT1_COMMIT", raising=False)
    monkeypatch.setattr(records, "_git", git)
    sha = git("rev-parse", "--short=12", "HEAD")
    (tmp_path / "results" / "run.jsonl").write_text('{"a": 1}\n')  # what a run writes
    records.git_commit.cache_clear()
    assert records.git_commit() == sha
    (tmp_path / "code.py").write_text("x = 2\n")  # a change to the code is still one
    records.git_commit.cache_clear()
    assert records.git_commit() == sha + "+dirty"
    records.git_commit.cache_clear()


def test_tables_hold_exactly_the_papers_tasks():
    assert list(paper_table("2", []).index) == [
        "MNLI-m", "MNLI-mm", "SNLI", "SciTail", "QNLI", "RTE",
    ]  # fmt: skip
    assert list(paper_table("3", []).index) == ["Story Cloze", "RACE-m", "RACE-h", "RACE"]
    t4 = paper_table("4", [])
    assert list(t4.index) == ["CoLA", "SST-2", "MRPC", "STS-B", "QQP", GLUE_ROW]
    assert list(t4.paper) == [45.4, 91.3, 82.3, 82.0, 70.3, 72.8]
    assert list(t4["best previous"]) == [35.0, 93.2, 86.0, 81.0, 66.1, 68.9]
    assert "held-apart" in t4.loc["QQP", "eval split here"]
    t5 = ablation_table([])
    assert list(t5.columns) == ["Avg", "CoLA", "SST2", "MRPC", "STSB", "QQP", "MNLI", "QNLI", "RTE"]
    assert list(t5.index) == [f"paper: {m}" for m in PAPER_TABLE5]
    for method, values in PAPER_TABLE5.items():  # Avg is the mean of the eight (to rounding)
        assert abs(sum(values) / 8 - t5.loc[f"paper: {method}", "Avg"]) < 0.1


def test_table_4_keeps_missing_cells_and_never_averages_them():
    recs = [
        _rec("sst2", 80.0, "accuracy", step=1),
        _rec("sst2", 85.0, "accuracy", step=3),  # the last epoch counts
        _rec("cola", 20.0, "matthews"),
        _rec("cola", 0.5, "accuracy"),  # not CoLA's paper metric: ignored
        _rec("mrpc", 75.0, "f1", split="test"),  # not the eval split: ignored
        _rec("rte", 60.0, "accuracy"),  # Table 2's, not Table 4's
    ]
    t = paper_table("4", pd.DataFrame(recs))
    run = "small run, NVIDIA H100 80GB HBM3, commit abc, seed 0"
    assert t.loc["SST-2", run] == 85.0 and t.loc["CoLA", run] == 20.0
    assert math.isnan(t.loc["MRPC", run]) and math.isnan(t.loc["QQP", run])
    assert t.loc["SST-2", "paper"] == PAPER_RESULTS["sst2"][1] == 91.3
    # the GLUE score is the server's over nine test sets: no dev mean stands in for it
    assert t.loc[GLUE_ROW, "paper"] == 72.8 and math.isnan(t.loc[GLUE_ROW, run])
    assert "RTE" not in t.index


def test_table_2_with_no_records_shows_the_paper_and_no_run():
    t = paper_table("2", [])
    assert list(t.columns) == ["metric", "paper", "best previous", "eval split here"]
    assert t.loc["MNLI-m", "paper"] == 82.1 and t.loc["RTE", "best previous"] == 61.7


def test_ablation_table_averages_only_all_eight_tasks():
    full = dict(zip(TABLE5_TASKS, [40, 90, 80, 80, 70, 80, 85, 60], strict=True))
    recs = [_rec(t, v, TASKS[t].metrics[0], experiment="ablation:full") for t, v in full.items()]
    recs.append(_rec("sst2", 80.0, "accuracy", experiment="ablation:no_pretraining"))
    t = ablation_table(recs)
    run = "small run, NVIDIA H100 80GB HBM3, commit abc, seed 0"
    row = t.loc[f"{run}: Transformer w/ aux LM (full)"]
    assert row["CoLA"] == 40 and row["MNLI"] == 80 and row["Avg"] == 73.125
    partial = t.loc[f"{run}: Transformer w/o pre-training"]
    assert partial["SST2"] == 80.0 and math.isnan(partial["Avg"]) and math.isnan(partial["RTE"])
    assert t.loc["paper: LSTM w/ aux LM", "CoLA"] == PAPER_TABLE5["LSTM w/ aux LM"][0]
    assert len(t) == 4 + 2


def test_ablation_deltas_compare_over_the_same_tasks():
    recs = [
        _rec("cola", 30.0, "matthews", experiment="ablation:full"),
        _rec("sst2", 90.0, "accuracy", experiment="ablation:full"),
        _rec("rte", 55.0, "accuracy", experiment="ablation:full"),
        _rec("cola", 10.0, "matthews", experiment="ablation:no_pretraining"),
        _rec("sst2", 80.0, "accuracy", experiment="ablation:no_pretraining"),
    ]
    d = ablation_deltas(recs).set_index("finding")
    row = d.loc["pre-training"]
    assert row["over the tasks"] == "CoLA, SST-2"  # RTE has no w/o pre-training run: left out
    assert row["run's"] == pytest.approx(15.0)
    assert row["paper's"] == pytest.approx(((45.4 - 18.9) + (91.3 - 84.0)) / 2)
    # no LSTM or w/o aux LM runs: those findings say so, with no number
    assert list(d.index) == list(FINDINGS)
    assert d.loc["transformer over LSTM", "note"].startswith("n/a: no task of CoLA, SST-2")
    assert math.isnan(d.loc["transformer over LSTM", "run's"])
    assert row["95% interval"] == "†"  # hand-made records without outcomes


def test_run_labels_tell_reruns_apart():
    base = {"scale": "cpu", "device": "cpu (x86_64, 2 threads)", "commit": "659788cae368"}
    base["seed"] = 0
    default = {**base, "experiment": "finetune", "config": {"lm_coef": 0.5, "n_transfer": None}}
    assert run_label(default) == "cpu run, 2 CPU cores, commit 659788c, seed 0"
    rerun = {**default, "seed": 1, "config": {"lm_coef": 0.0, "n_transfer": -1}}
    assert run_label(rerun) == "cpu run, 2 CPU cores, commit 659788c, seed 1, λ 0, n_transfer -1"
    mse = {**default, "config": {"lm_coef": 0.5, "n_transfer": None, "regression": "mse"}}
    assert run_label(mse) == "cpu run, 2 CPU cores, commit 659788c, seed 0, STS-B mse"
    # an experiment that varies a setting itself keeps one label for all its points
    sweep = {**rerun, "experiment": "layer_transfer", "config": {"lm_coef": 0.5, "n_transfer": -1}}
    assert run_label(sweep) == "cpu run, 2 CPU cores, commit 659788c, seed 1"
    ablation = {**rerun, "experiment": "ablation:no_aux_lm"}
    assert run_label(ablation) == "cpu run, 2 CPU cores, commit 659788c, seed 1"
    # a Table 5 row fine-tuned with the protocol its scale chose for it (Scale.arms) is the
    # same run as the other rows; another rate in that row is a rerun
    row = {"lm_coef": 0.0, "n_transfer": None, "lr": 2.5e-4, "epochs": 3, "batch_size": 16}
    arm = {**base, "experiment": "ablation:no_aux_lm", "config": row}
    assert run_label(arm) == "cpu run, 2 CPU cores, commit 659788c, seed 0"
    arm["config"] = {**row, "lr": 1e-3}
    assert run_label(arm) == "cpu run, 2 CPU cores, commit 659788c, seed 0, lr 0.001"


def test_run_labels_name_every_setting_a_rerun_changed():
    cfg = {"lm_coef": 0.5, "n_transfer": None, "lr": 2.5e-4, "batch_size": 16, "epochs": 6}
    cfg["limits"] = {"limit": 50, "eval_limit": None}  # the cpu scale's: 2,000 and all
    rec = {"scale": "cpu", "device": "cpu (x86_64, 4 threads, 8 cores)", "commit": "abc+dirty"}
    rec |= {
        "seed": 0.0,
        "experiment": "finetune",
        "task": "sst2",
        "config": cfg,
    }  # seed read as float
    assert run_label(rec) == (
        "cpu run, 4 threads of 8 CPU cores, commit abc+dirty, seed 0, lr 0.00025, train limit 50"
    )
    gpu = {"scale": "small", "device": "NVIDIA H100 80GB HBM3", "commit": "1234567890ab"}
    assert run_label({**gpu, "seed": None}) == "small run, NVIDIA H100 80GB HBM3, commit 1234567"
    assert run_label({**gpu, "seed": 2}).endswith("commit 1234567, seed 2")


def _arm(task, metric, preds, labels, experiment="finetune", seed=0, uids=None):
    """A metric record and the per-example record of the same evaluation."""
    spec = TASKS[task]
    fields = dict(
        task=task,
        split=spec.eval_split,
        step=3,
        experiment=experiment,
        scale="small",
        commit="abc",
        device="NVIDIA H100 80GB HBM3",
        seed=seed,
    )
    value = compute_metrics(spec, np.array(preds), np.array(labels))[metric]
    uids = uids or [f"{task}-{i}" for i in range(len(labels))]
    return [
        make_record(metric, value, **fields),
        per_example_record(preds, labels, uids, **fields),
    ]


def test_tables_give_intervals_where_outcomes_were_kept(tmp_path):
    y = [i % 2 for i in range(200)]
    good = [v if i % 5 else 1 - v for i, v in enumerate(y)]  # 80% right
    recs = _arm("sst2", "accuracy", good, y) + [_rec("cola", 20.0, "matthews")]  # CoLA: old
    append_records(tmp_path / "r.jsonl", recs)
    rec = read_records(tmp_path)  # through JSON and pandas, as the chapters read them
    run = "small run, NVIDIA H100 80GB HBM3, commit abc, seed 0"
    plain = paper_table("4", rec)
    assert plain.loc["SST-2", run] == 80.0  # numbers as before
    t = paper_table("4", rec, intervals=True)
    cell = t.loc["SST-2", run]
    lo, hi = (float(x) for x in cell.split("[")[1].rstrip("]").split(", "))
    assert cell.startswith("80.0 [") and lo < 80 < hi and hi - lo < 15
    assert t.loc["CoLA", run] == "20.0 †"  # recorded without outcomes: no interval
    assert t.loc["MRPC", run] == "missing"
    m = final_metrics(rec)
    assert set(m.task) == {"sst2", "cola"}  # the per-example record is no metric of its own
    assert "95% interval" in against_paper(rec).columns


def test_ablation_findings_get_the_paired_interval():
    y = [i % 2 for i in range(300)]
    full = [v if i % 4 else 1 - v for i, v in enumerate(y)]  # 75% right
    scratch = [v if i % 2 else 1 - v for i, v in enumerate(y)]  # 50% right
    recs = _arm("sst2", "accuracy", full, y, "ablation:full")
    recs += _arm("sst2", "accuracy", scratch, y, "ablation:no_pretraining")
    recs += _arm("sst2", "accuracy", full, y, "ablation:no_aux_lm")
    d = ablation_deltas(recs).set_index("finding")
    row = d.loc["pre-training"]
    assert row["run's"] == pytest.approx(25.0)
    lo, hi = (float(x) for x in row["95% interval"].strip("[]").split(", "))
    assert 15 < lo < 25 < hi < 35  # the verdict: findings.findings
    assert row["note"] == "the paper's over the tasks named; over all 8 it is +14.8"  # 74.7-59.9
    same = d.loc["aux LM, larger sets"]  # no such task here: said, not a NaN
    assert same["95% interval"] == "n/a" and same["note"].startswith("n/a: no task of MNLI-m")
    assert d.loc["aux LM, smaller sets", "95% interval"] == "n/a"
    per_task = ablation_differences(recs).set_index("comparison")
    assert per_task.loc["aux LM", "95% interval"] == "[0.0, 0.0]"  # identical arms
    # arms scored on other examples are not paired: no interval
    other = _arm("sst2", "accuracy", scratch, y, "ablation:lstm", uids=[str(i) for i in y])
    lstm = ablation_differences(recs + other).set_index("comparison")
    assert lstm.loc["transformer over LSTM", "95% interval"] == "†"
    t = ablation_table(recs, intervals=True)
    run = "small run, NVIDIA H100 80GB HBM3, commit abc, seed 0"
    assert t.loc[f"{run}: Transformer w/ aux LM (full)", "SST2"].startswith("75.0 [")
    assert t.loc[f"{run}: Transformer w/ aux LM (full)", "Avg"] == "missing"  # not all eight


def test_a_budgeted_plan_is_one_run_whatever_examples_it_chose():
    """A plan picks each task's training examples to fit its budget: that is the run's data,
    never a label of its own, so its tasks share one column and its findings pair up."""
    gpu = {"scale": "small", "device": "NVIDIA H100 80GB HBM3", "commit": "ee22f51", "seed": 0}
    cfg = {"lm_coef": 0.5, "n_transfer": None, "limits": {"limit": 2137, "eval_limit": None}}
    planned = {**gpu, "experiment": "finetune", "task": "cola", "config": cfg}
    planned["config"] = {**cfg, "plan_part": "finetune:cola"}
    assert run_label(planned) == "small run, NVIDIA H100 80GB HBM3, commit ee22f51, seed 0"
    chosen = {**gpu, "experiment": "finetune", "task": "cola", "config": cfg}  # a user's -p limit
    assert run_label(chosen).endswith("seed 0, train limit 2137")
    # the plan's zero-shot records kept no seed: drawn with the scale's, the same run, once
    # migrated (tools/migrate_records.py)
    zero_shot = {**gpu, "seed": None, "experiment": "zero_shot", "config": {"plan_part": "z"}}
    assert run_label(migrate(zero_shot)) == run_label(planned)


def test_the_migration_brings_old_records_to_the_current_format_once(tmp_path):
    """tools/migrate_records.py: the older layouts become the current one, and a second run
    changes nothing."""
    old = [
        {"experiment": "pretrain", "metric": "train_loss", "value": 3.0, "config": {}},
        {"experiment": "zero_shot", "task": "race", "split": "test", "config": {"arch": "GPT"}},
        {"experiment": "zero_shot", "task": "cola", "split": "dev", "config": {"arch": "GPT"}},
        {"arm": "from scratch", "lr": 0.001, "score": 20.0},
    ]
    path = append_records(tmp_path / "run" / "records.jsonl", old)
    assert migrate_folder(tmp_path) == [path]
    new = load_records(path)
    assert new[0]["experiment"] == "pretrain:gpt"
    assert new[1]["config"] == {"arch": "GPT", "heuristic": "race", "examples_split": "dev"}
    assert new[2]["config"] == {"arch": "GPT", "heuristic": "cola", "examples_split": "dev"}
    assert new[3]["arm"] == "no_pretraining"
    before = path.read_bytes()
    assert migrate_folder(tmp_path) == [] and path.read_bytes() == before
    committed = [r for f in (ROOT / "results").rglob("*.jsonl") for r in load_records(f)]
    assert all(migrate(r) == r for r in committed)  # the committed records are migrated


def test_short_names_tell_the_runs_of_a_table_apart():
    cpu = "cpu run, 2 CPU cores, commit 9f484a9, seed 0"
    small = "small run, NVIDIA H100 80GB HBM3, commit ee22f51, seed 0"
    assert short_names([cpu, small]) == {cpu: "cpu run", small: "small run"}
    rerun = "cpu run, 2 CPU cores, commit 9f484a9, seed 1, λ 0"
    names = short_names([cpu, small, rerun])
    assert names[cpu] == "cpu run, seed 0" and names[rerun] == "cpu run, seed 1, λ 0"
