"""The GPU run rehearsed on the CPU at smoke scale: tools/rehearse_gpu.sh builds nothing, it
takes a bundle into a fresh directory with a copy of the checkout, plans, runs the plan in one
background process, and copies the records out; a second call and a rerun find it done."""

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from gpt1lib.harness import bundle
from gpt1lib.paper import ablation_table, final_metrics
from gpt1lib.records import git_commit, read_records

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "rehearse_gpu.sh"
CHAPTERS = {
    "03_pretraining", "04_finetuning", "05_classification", "06_entailment", "07_similarity",
    "08_multiple_choice", "10_layer_transfer", "11_zero_shot", "12_ablations", "appendix_speed",
}  # fmt: skip

pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or shutil.which("bash") is None, reason="needs git and bash"
)


def _env(**kw) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GPT1_BPE_DIR")}
    return env | {"PYTHON": sys.executable, "SCALE": "smoke", "BUDGET": "1", **kw}


def test_the_rehearsal_runs_the_whole_plan_from_a_bundle(tmp_path):
    b, out, work = tmp_path / "bundle", tmp_path / "out", tmp_path / "work"
    bundle.build("smoke", "fixture", b, log=lambda *_: None)
    env = _env(FRESH="1", WORK=str(work), BUNDLE=str(b), OUT=str(out), WAIT_MIN="15")
    r = subprocess.run(
        ["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=1200
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    for step in ("1/4 wheels", "2/4 plan", "3/4 run", "4/4 copy"):
        assert step in r.stdout
    assert "no .whl folder: nothing to install" in r.stdout
    assert "plan for scale smoke" in (out / "plan.txt").read_text()
    assert "plan done" in (out / "run.log").read_text()
    with tarfile.open(out / "records.tar.gz") as t:
        t.extractall(tmp_path / "x", filter="data")
    kept = tmp_path / "x/results/smoke"
    made = json.loads((kept / "plan.json").read_text())
    assert set(made["done"]) == {u["id"] for u in made["units"]}
    assert {p.stem for p in kept.glob("*.jsonl")} == CHAPTERS
    records = read_records(kept)  # what chapters 09-12 read
    assert set(final_metrics(records).task) >= {"sst2", "mnli_m", "race", "mrpc"}
    assert ablation_table(records).shape[0] == 8  # the paper's four rows and this run's four
    assert "ablation:full" not in set(records.experiment)  # its full row: chapters 05-07's runs
    assert {"layer_transfer", "zero_shot", "bench", "pretrain:gpt"} <= set(records.experiment)
    # every arm's protocol chosen on held-out training examples, and the rest run with it
    arms = {"full", "no_pretraining", "no_aux_lm", "lstm"}
    selection = records[records.metric == "selection_score"]
    assert set(selection.experiment) == {f"selection:{a}" for a in arms}
    assert set(made["chosen"]) == arms
    sst2 = records[(records.experiment == "finetune") & (records.task == "sst2")].iloc[0]
    assert sst2.config["lr"] == made["chosen"]["full"]["lr"]
    steps = {c["pretrain"]["total_steps"] for c in records.config if "pretrain" in c}
    assert len(steps) == 1  # the LSTM pre-trained as long as the transformer
    log = (out / "run.log").read_text()
    assert "the rest planned again" in log and "took/pred." in log
    assert all(c.get("plan_part") for c in records.config)
    assert set(records.commit) == {git_commit()}  # the checkout's, though the copy has no .git
    manifest = json.loads((kept / "manifest.json").read_text())
    assert set(manifest) == CHAPTERS and manifest["05_classification"]["records"] > 0

    # a second call of the GPU sequence finds the run done; a rerun skips every unit
    checkout = work / "checkout"
    again = subprocess.run(
        ["bash", "tools/rehearse_gpu.sh", "wait"],
        cwd=checkout,
        env=_env(BUNDLE="bundle", OUT=str(tmp_path / "out2")),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0 and (tmp_path / "out2/records.tar.gz").is_file(), again.stdout
    rerun = subprocess.run(
        [sys.executable, "-m", "gpt1lib.harness.reproduce", "--scale", "smoke", "--budget", "1"]
        + ["--source", "bundle", "--corpus", "bundle", "--out-dir", "runs", "--results", "results"],
        cwd=checkout,
        env=_env(PYTHONPATH=str(checkout)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    n = len(made["units"])
    assert f"({n} of {n} units done)" in rerun.stdout and "plan done" in rerun.stdout
    assert read_records(checkout / "results/smoke").shape == records.shape  # nothing twice
