"""Parameterized reruns, the book's third use: chapters executed with papermill at smoke scale.

A default run and a rerun of a fine-tuning chapter (tasks given as one name and as a list, the
rerun as a sweep through ``gpt1lib.harness.reproduce``), the results chapter showing both as
columns of their own, and the layer-transfer chapter on a list of tasks. They share one run
folder, so the tiny model is pre-trained once.
"""

import json
import os
import re
import shutil

import pytest

from gpt1lib.evaluations import layer_transfer_points
from gpt1lib.findings import layer_transfer_gains
from gpt1lib.harness import reproduce
from gpt1lib.harness.reproduce import ROOT
from gpt1lib.records import read_records
from gpt1lib.scales import SCALES

pm = pytest.importorskip("papermill")
BOOK = ROOT / "book"


def _run(chapter: str, out: str, cwd=BOOK, **params) -> dict:
    """Execute ``chapter`` at smoke scale from ``cwd``; returns the executed notebook."""
    pm.execute_notebook(
        str(BOOK / f"{chapter}.ipynb"),
        out,
        parameters={"scale": "smoke", **params},
        cwd=str(cwd),
        progress_bar=False,
    )
    return json.loads(open(out).read())


def _text(nb: dict) -> str:
    """Everything the executed cells printed or displayed, as one string."""
    parts = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            parts += out.get("text", [])
            for value in out.get("data", {}).values():
                parts += value if isinstance(value, list) else [str(value)]
    return "".join(parts)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One default run of chapter 05 on SST-2 (``tasks`` a plain string), then a sweep of
    ``lm_coef`` over [0] with ``seed`` 1 and ``tasks`` a list."""
    folder = tmp_path_factory.mktemp("papermill")
    _run("05_classification", str(folder / "default.ipynb"), tasks="sst2", out_dir=str(folder))
    params = {"tasks": ["sst2"], "seed": 1}
    done = reproduce.sweep(
        "05_classification", "lm_coef", [0.0], "smoke", params, folder, log=lambda *a: None
    )
    return folder, done


def _finetune_records(folder):
    rec = read_records(folder / "smoke" / "finetune")
    return rec[rec.experiment == "finetune"]


def test_papermill_reruns_record_exactly_their_parameters(runs):
    folder, done = runs
    assert [p.name for p in done] == ["05_classification-lm_coef-0.0.ipynb"]
    rec = _finetune_records(folder)
    assert set(rec.task) == {"sst2"}  # one name or a list of one: no CoLA
    settings = {(r["seed"], r["config"]["lm_coef"]) for r in rec.to_dict("records")}
    assert settings == {(0, 0.5), (1, 0.0)}  # the default run and the rerun, nothing else


def test_papermill_results_chapter_shows_the_rerun_as_its_own_column(runs):
    folder, _ = runs
    empty = folder / "no_recorded_runs"
    empty.mkdir(exist_ok=True)
    text = _text(
        _run("09_results", str(folder / "09.ipynb"), out_dir=str(folder), results_dir=str(empty))
    )
    assert "smoke run, " in text and ", seed 0" in text
    assert ", seed 1, λ 0" in text  # the rerun: its own column, named by what it changed
    # this build's runs in their own section, each number with its 95% interval
    assert "this build's run (smoke scale, fixtures): a check that the code runs" in text
    assert re.search(r"\d+\.\d \[-?\d+\.\d, -?\d+\.\d\]", text)


def test_papermill_reruns_keep_per_example_outcomes(runs):
    folder, _ = runs
    rec = read_records(folder / "smoke" / "finetune")
    outcomes = rec[rec.metric == "per_example"]
    assert {(r["seed"], r["split"]) for r in outcomes.to_dict("records")} >= {
        (0, "dev"),
        (1, "dev"),
    }
    for r in outcomes.to_dict("records"):
        kept = r["per_example"]
        assert len(kept["predictions"]) == len(kept["labels"]) == r["value"] > 0
        assert len(kept["examples"]) == 16  # the examples' fingerprint
    # the two seeds scored the same dev examples: their difference has a paired interval
    dev = outcomes[outcomes.split == "dev"]
    assert dev.per_example.map(lambda k: k["examples"]).nunique() == 1


def test_papermill_layer_transfer_takes_a_list_of_tasks(tmp_path, runs):
    folder, _ = runs
    _run("10_layer_transfer", str(tmp_path / "10.ipynb"), tasks=["rte"], out_dir=str(folder))
    rec = read_records(folder / "smoke" / "layer_transfer")
    assert set(rec.task) == {"rte"}
    assert sorted({c["n_transfer"] for c in rec.config}) == [-1, 0, 1, 2]  # none .. all blocks
    gains = layer_transfer_gains(rec)  # all blocks minus embeddings only, paired
    assert list(gains.task) == ["RTE"] and gains["95% interval"].iloc[0].startswith("[")
    points = layer_transfer_points(rec)
    assert points[points.split == "dev"].lo.notna().all()  # every point has its interval


def test_papermill_sweep_refuses_an_unknown_parameter(tmp_path):
    with pytest.raises(ValueError, match="no parameter 'lambda'"):
        reproduce.sweep("05_classification", "lambda", [0], "smoke", {}, tmp_path)


def test_papermill_intro_command_runs_from_the_repository_root(tmp_path):
    """The intro's ``papermill book/02_model.ipynb out.ipynb -p seed 1``, from the root."""
    text = _text(_run("02_model", str(tmp_path / "02.ipynb"), cwd=ROOT, seed=1))
    assert "scale=smoke" in text


def test_papermill_from_the_root_and_from_book_write_the_same_runs(tmp_path):
    """A relative ``out_dir`` is the repository's, wherever papermill runs: the rerun from
    book/ finds the model the run from the root pre-trained, and nothing lands beside the
    checkout (the old ``../runs`` from the root)."""
    rel = f"runs/_papermill_{os.getpid()}"
    outside = ROOT.parent / rel
    try:
        first = _text(
            _run("05_classification", str(tmp_path / "a.ipynb"), ROOT, tasks="sst2", out_dir=rel)
        )
        again = _text(
            _run("05_classification", str(tmp_path / "b.ipynb"), BOOK, tasks="sst2", out_dir=rel)
        )
        assert f"pre-training the smoke scale's gpt model first in {rel}/smoke/pretrain" in first
        assert f"starting from this book's pre-training run {rel}/smoke/pretrain (done)" in again
        rec = _finetune_records(ROOT / rel)
        dev = rec[(rec.split == "dev") & (rec.metric == "accuracy")]
        assert len(dev) == 2 * SCALES["smoke"].finetune.epochs  # both runs, one folder
        assert not outside.exists()
    finally:
        shutil.rmtree(ROOT / rel, ignore_errors=True)
