"""The GPU run rehearsed on the CPU at smoke scale: tools/rehearse_gpu.sh builds nothing, it
takes a bundle into a fresh directory with a copy of the checkout, starts the run in a process
of its own and copies the records out after every unit; `wait` finds where it is and goes on
to the end; a rerun skips every unit done."""

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
    "08_multiple_choice", "10_layer_transfer", "11_zero_shot", "12_ablations",
}  # fmt: skip

pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or shutil.which("bash") is None, reason="needs git and bash"
)


def _env(**kw) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GPT1_BPE_DIR")}
    return env | {"PYTHON": sys.executable, "SCALE": "smoke", **kw}


def test_the_rehearsal_runs_the_whole_recipe_from_a_bundle_in_two_commands(tmp_path):
    b, out, work = tmp_path / "bundle", tmp_path / "out", tmp_path / "work"
    bundle.build("smoke", "fixture", b, log=lambda *_: None)
    env = _env(FRESH="1", WORK=str(work), BUNDLE=str(b), OUT=str(out), START_MIN="0.3")
    first = subprocess.run(
        ["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=600
    )
    assert first.returncode == 3, first.stdout[-4000:] + first.stderr[-4000:]  # it goes on
    assert "the smoke recipe, 53 units; predicted from cpu" in first.stdout
    assert "call 'tools/rehearse_gpu.sh wait' at once" in first.stdout
    assert (out / "records.tar.gz").is_file() or "no unit done" in (out / "run.log").read_text()
    checkout = work / "checkout"
    out2 = tmp_path / "out2"
    second = subprocess.run(
        ["bash", "tools/rehearse_gpu.sh", "wait"],
        cwd=checkout,
        env=_env(BUNDLE="bundle", OUT=str(out2), WAIT_MIN="15"),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert second.returncode == 0, second.stdout[-4000:] + second.stderr[-4000:]
    log = (out2 / "run.log").read_text()
    assert "all done: 53 units" in log and "took/pred." in log
    with tarfile.open(out2 / "records.tar.gz") as t:
        t.extractall(tmp_path / "x", filter="data")
    kept = tmp_path / "x/results/smoke"
    ledger = json.loads((kept / "run.json").read_text())
    assert len(ledger["done"]) == 53
    assert {p.stem for p in kept.glob("*.jsonl")} == CHAPTERS
    records = read_records(kept)  # what chapters 09-12 read
    assert set(final_metrics(records).task) >= {"sst2", "mnli_m", "mnli_mm", "race", "race_h"}
    assert ablation_table(records).shape[0] == 8  # the paper's four rows and this run's four
    assert "ablation:full" not in set(records.experiment)  # its full row: chapters 05-07's runs
    assert {"layer_transfer", "zero_shot", "pretrain:gpt", "pretrain:lstm"} <= set(
        records.experiment
    )
    # every arm's rate chosen on held-out training examples, and the rest run with it
    arms = {"full", "no_pretraining", "no_aux_lm", "lstm"}
    selection = records[records.metric == "selection_score"]
    assert set(selection.experiment) == {f"selection:{a}" for a in arms}
    assert set(ledger["chosen"]) == arms
    sst2 = records[(records.experiment == "finetune") & (records.task == "sst2")].iloc[0]
    assert sst2.config["lr"] == ledger["chosen"]["full"]["lr"]
    steps = {c["pretrain"]["total_steps"] for c in records.config if "pretrain" in c}
    assert len(steps) == 1  # the LSTM pre-trained as long as the transformer
    assert all(c.get("plan_part") for c in records.config)
    assert set(records.commit) == {git_commit()}  # the checkout's, though the copy has no .git
    manifest = json.loads((kept / "manifest.json").read_text())
    assert set(manifest) == CHAPTERS and manifest["05_classification"]["records"] > 0
    # each fine-tuning unit's time in parts (tools/finetune_times.py), none negative but for
    # run.json's rounding of a unit's wall time to 0.1 s
    times = [sys.executable, str(ROOT / "tools" / "finetune_times.py"), str(kept)]
    times = subprocess.run([*times, "--source", "fixture"], capture_output=True, text=True)
    assert times.returncode == 0, times.stderr[-3000:]
    rows = {line.split()[0]: line.split()[1:8] for line in times.stdout.splitlines()[1:]}
    units, wall, updates, scoring, rest, setup, after = map(float, rows["all"])
    assert units == 45 and min(updates, scoring, setup) > 0 and after >= -0.05 * units
    # each pre-training unit's time beside its updates (tools/pretrain_times.py, issue 43)
    times = [sys.executable, str(ROOT / "tools" / "pretrain_times.py"), str(kept)]
    times = subprocess.run(times, capture_output=True, text=True)
    assert times.returncode == 0, times.stderr[-3000:]
    head, *rows = (line.split() for line in times.stdout.splitlines())
    assert [r[0] for r in rows] == ["pretrain:gpt", "pretrain:lstm"] and "beyond" in head
    for r in rows:
        got = dict(zip(head, r, strict=True))
        assert float(got["updates"]) == 80 and float(got["wall"]) > float(got["beyond"]) > 0

    # a rerun skips every unit; --stop-after ends a run before a unit that would not finish
    cmd = [sys.executable, "-m", "gpt1lib.harness.reproduce", "--scale", "smoke"]
    cmd += ["--source", "bundle", "--corpus", "bundle", "--out-dir", "lease/runs"]
    cmd += ["--results", "lease/results"]
    kw = {"cwd": checkout, "capture_output": True, "text": True, "timeout": 600}
    rerun = subprocess.run(cmd, env=_env(PYTHONPATH=str(checkout)), **kw)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "53 of 53 units done before" in rerun.stdout and "all done" in rerun.stdout
    assert read_records(checkout / "lease/results/smoke").shape == records.shape  # nothing twice
    other = cmd[:9] + ["--out-dir", "x/runs", "--results", "x/results", "--stop-after", "0.001"]
    stopped = subprocess.run(other, env=_env(PYTHONPATH=str(checkout)), **kw)
    assert "stopped before pretrain:gpt: 53 units left" in stopped.stdout
    # a folder holding another run's checkpoints is refused, naming them and the fix
    refused = subprocess.run(cmd[:-1] + ["x/other"], env=_env(PYTHONPATH=str(checkout)), **kw)
    assert refused.returncode == 1 and "pass --force" in refused.stderr


def test_profile_units_times_a_plans_units_as_the_runner_runs_them(tmp_path):
    """tools/profile_units.py, the probe of a unit's time beyond its updates: each unit timed,
    cProfile's entries after; an id that is no unit of the plan, an error naming it."""
    cmd = [sys.executable, str(ROOT / "tools" / "profile_units.py"), "--scale", "smoke"]
    cmd += ["--source", "fixture", "--out", str(tmp_path)]
    kw = {"capture_output": True, "text": True, "timeout": 300, "env": _env()}
    got = subprocess.run(
        [*cmd, "--units", "finetune:sst2,transfer:mnli_m:2", "--profile", "5"], **kw
    )
    assert got.returncode == 0, got.stderr[-3000:]
    assert "finetune:sst2: " in got.stdout and "transfer:mnli_m:2: " in got.stdout
    assert "2 units" in got.stdout and "finetune.py" in got.stdout  # the profile's entries
    assert (tmp_path / "smoke/finetune/sst2/records.jsonl").is_file()  # under --out, not results/
    bad = subprocess.run([*cmd, "--units", "finetune:nope"], **kw)
    assert bad.returncode == 1 and "['finetune:nope'] are not units of smoke" in bad.stderr
