"""The recorded reproduction: a scale's units (``recipe.units``) run in order, in one process.

    python -m gpt1lib.harness.reproduce --scale small --source bundle --corpus bundle

prints the units and their predicted minutes, then runs each as a call of its chapter's own
experiment (``experiments``; a selection unit, ``selection.stage``), the same calls the
chapters make, with the ``Scale``'s settings. A unit's records are appended in one write to
``results/<scale>/<chapter>.jsonl`` (each record's ``config`` names its unit, ``plan_part``),
then ``run.json`` marks it done with its seconds and the manifest's chapter line is brought up
to date. A rerun skips the units done (a unit cut off is run again, its records first dropped);
``stop_after_min`` ends a call before a unit that would not finish in time. Once every arm's
protocol is chosen, the units after run with it. At the end: each part's minutes beside its
prediction. The book draws chapters 09-12 from these records (``make book``, on any CPU).
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .. import selection
from ..checkpoint import latest_checkpoint
from ..experiments import (
    ARM_MODEL,
    ablations,
    finetune_tasks,
    layer_transfer,
    objective,
    pretrain_dir,
    pretraining,
    scale_tokenizer,
    zero_shot_curves,
)
from ..files import write_json
from ..records import append_records, git_commit, keep_records
from ..runs import pretrained_model
from ..runtime import pad_multiple, pick_device
from ..scales import SCALES
from ..tasks import open_source
from . import recipe

ORIGIN = "this run's own pre-training (the plan's pretrain:gpt part)"


@dataclass
class Run:
    """What the units of one run share: the scale (with the chosen protocols once chosen), the
    data, the tokenizer, the pre-trained models, where things go."""

    S: object
    source: str
    corpus: str
    out_dir: Path  # the chapters' runs folder (checkpoints, the runs' own records)
    kept: Path  # results/<scale>
    device: torch.device
    tok: object
    _models: dict = field(default_factory=dict)

    def model(self, arch: str):
        if arch not in self._models:
            if latest_checkpoint(pretrain_dir(self.out_dir, self.S.name, arch)) is None:
                raise FileNotFoundError(
                    f"{pretrain_dir(self.out_dir, self.S.name, arch)} holds no pre-trained model "
                    "(a new machine, or it was removed): the units that start from it cannot "
                    "run; the records so far are kept. Start over with --force"
                )
            self._models[arch] = pretrained_model(
                self.S.name, self.out_dir, "pretrain", self.corpus, arch, self.device, False
            )[0]
        return self._models[arch]

    def kept_records(self, chapter: str) -> list[dict]:
        path = self.kept / f"{chapter}.jsonl"
        lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
        return [json.loads(x) for x in lines if x.strip()]


# ---------------------------------------------------------------- each unit: an experiment


def _pretrain(run: Run, u: dict) -> list[dict]:
    job = pretraining(run.S, run.corpus, run.out_dir, arch=u["arch"])
    job.run(device=run.device, progress=False)
    lines = (job.folder / "records.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(x) for x in lines if x.strip()]


def _select(run: Run, u: dict) -> list[dict]:
    S, arm = run.S, u["arm"]
    limits = dict.fromkeys(S.selection_tasks, S.selection_examples)
    data = selection.selection_data(run.source, limits, S.finetune.seed)
    return selection.stage(
        S,
        arm,
        "rate",
        run.model(ARM_MODEL[arm]),
        run.tok,
        data,
        seed=S.finetune.seed,
        device=run.device,
        progress=False,
    )


def _finetune(run: Run, u: dict) -> list[dict]:
    S, task, kind = run.S, u["task"], u["kind"]
    kw = {"out_dir": run.out_dir, "device": run.device, "progress": False, "init": ORIGIN}
    gpt = run.model("gpt")
    if kind == "finetune":
        results = finetune_tasks(S, gpt, run.tok, [task], run.source, also=u["also"], **kw)[0]
    elif kind == "objective":
        results = objective(S, gpt, run.tok, task, run.source, coefs=(u["lm_coef"],), **kw)
    elif kind == "transfer":
        results = layer_transfer(
            S, gpt, run.tok, [task], run.source, points=[u["n_transfer"]], **kw
        )
    else:  # a Table 5 arm
        models = {"gpt": gpt, "lstm": run.model("lstm") if u["arm"] == "lstm" else None}
        results = ablations(S, models, run.tok, [task], run.source, arms=[u["arm"]], **kw)
    return [rec for r in results.values() for rec in r.records]


def _zeroshot(run: Run, u: dict) -> list[dict]:
    records, skipped = zero_shot_curves(
        run.S,
        run.source,
        run.out_dir,
        archs=[u["arch"]],
        seed=run.S.finetune.seed,
        device=run.device,
        progress=False,
    )
    for task, why in skipped.items():
        print(f"  zero-shot {task}: skipped, {why}")
    return records


RUNNERS = {
    "pretrain": _pretrain,
    "selection": _select,
    "zeroshot": _zeroshot,
    "finetune": _finetune,
    "objective": _finetune,
    "transfer": _finetune,
    "ablation": _finetune,
}


# ---------------------------------------------------------------- the run


def _identity(value) -> str:
    """What identifies a data source: a bundle's manifest sha256, else its name."""
    src = open_source(value)
    return src.identity() if hasattr(src, "identity") else str(value)


def _ledger(run: Run, key: dict, force: bool) -> dict:
    """``run.json``: this run's data and the units done; a folder of another run's records or
    checkpoints is refused (``force``: cleared)."""
    path = run.kept / "run.json"
    ledger = json.loads(path.read_text()) if path.is_file() else None
    if ledger is not None and ledger["key"] == key and not force:
        return ledger
    old = [p for p in run.kept.glob("*.jsonl")] + [run.kept / "plan.json"]
    old += [pretrain_dir(run.out_dir, run.S.name, a) for a in ("gpt", "lstm")]
    old = [p for p in old if p.exists()] + ([path] if ledger is not None else [])
    if old and not force:
        why = "another run's" if ledger is not None else "records of a run without run.json"
        raise FileExistsError(
            f"{run.kept} or {run.out_dir / run.S.name} holds {why} "
            f"({', '.join(p.name for p in old[:4])}): pass --force (FORCE=1) to replace them, "
            "or another --results / --out-dir"
        )
    for p in old:
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    ledger = {"key": key, "commit": git_commit(), "done": {}}
    write_json(path, ledger)
    return ledger


def _commit(run: Run, ledger: dict, u: dict, records: list[dict], wall: float) -> None:
    """A finished unit's records to its chapter (in one write), marked done, the manifest."""
    chapter = run.kept / f"{u['chapter']}.jsonl"
    for r in records:
        r["config"] = {**(r.get("config") or {}), "plan_part": u["id"]}
    append_records(chapter, records)
    ledger["done"][u["id"]] = {
        "chapter": u["chapter"],
        "records": len(records),
        "wall_s": round(wall, 1),
    }
    write_json(run.kept / "run.json", ledger)
    path = run.kept / "manifest.json"
    manifest = json.loads(path.read_text()) if path.is_file() else {}
    mine = [d for d in ledger["done"].values() if d["chapter"] == u["chapter"]]
    manifest[u["chapter"]] = {
        "commit": git_commit(),
        "parameters": {"scale": run.S.name, "recipe": True, **ledger["key"]},
        "records": sum(d["records"] for d in mine),
        "wall_time_s": round(sum(d["wall_s"] for d in mine), 1),
    }
    write_json(path, manifest)


def run(
    scale: str,
    source: str,
    corpus: str,
    out_dir: Path,
    results: Path,
    *,
    force: bool = False,
    stop_after_min: float | None = None,
    plan_only: bool = False,
    estimate_on: str | None = None,
    device: str | None = None,
    log=print,
) -> dict:
    """Run ``scale``'s units (``recipe.units``) from ``source`` and ``corpus``; with
    ``plan_only`` print them and their predictions and stop (``estimate_on``: predicted for that
    device, else this one). Returns the units with what each took (``took``)."""
    t0 = time.perf_counter()
    S, dev = SCALES[scale], pick_device(device)
    if dev.type == "cuda":
        torch.set_float32_matmul_precision("high")  # float32 leftovers on tensor cores
    tok = scale_tokenizer(S, corpus)
    plan = recipe.units(S, recipe.available(S, source))
    name = estimate_on or (torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu")
    found = recipe.rates_for(scale, name)
    setup_s = None
    if found is not None:
        multiple = pad_multiple("cuda" if "cpu" not in name.lower() else "cpu")
        setup_s = found[0]["setup_s"]
        recipe.predict(plan, S, found[0], recipe.sizes(S, source, tok, multiple))
    how = found[1] if found else f"nothing: no rates measured on {name} at {scale}"
    log(recipe.format_units(plan, S, how, setup_s))
    if plan_only or estimate_on:
        return {"units": plan, "took": {}}
    run_ = Run(S, source, corpus, Path(out_dir), Path(results) / scale, dev, tok)
    run_.kept.mkdir(parents=True, exist_ok=True)
    ledger = _ledger(run_, {"source": _identity(source), "corpus": _identity(corpus)}, force)
    return _execute(run_, plan, ledger, t0, stop_after_min, log)


def _chosen(run: Run, plan: list[dict], ledger: dict) -> None:
    """Once every selection unit is done: the scale with each arm's chosen protocol."""
    picks = [u["id"] for u in plan if u["kind"] == "selection"]
    if picks and "chosen" not in ledger and all(p in ledger["done"] for p in picks):
        ledger["chosen"] = selection.chosen(run.kept_records(recipe.CHAPTER["selection"]))
        write_json(run.kept / "run.json", ledger)
    if ledger.get("chosen"):
        run.S = selection.with_chosen(SCALES[run.S.name], ledger["chosen"])


def _execute(run: Run, plan, ledger, t0: float, stop_after_min, log) -> dict:
    deadline = t0 + stop_after_min * 60 if stop_after_min else None
    done = ledger["done"]
    log(f"{len(done)} of {len(plan)} units done before" if done else "no unit done before")
    for i, u in enumerate(plan, 1):
        if u["id"] in done:
            continue
        _chosen(run, plan, ledger)
        if deadline is not None and time.perf_counter() + (u.get("seconds") or 0) > deadline:
            log(f"stopped before {u['id']}: {len(plan) - len(done)} units left; rerun to go on")
            break
        keep_records(
            run.kept / f"{u['chapter']}.jsonl",
            lambda r, uid=u["id"]: (r.get("config") or {}).get("plan_part") != uid,
        )
        started = time.perf_counter()
        records = RUNNERS[u["kind"]](run, u)
        wall = time.perf_counter() - started
        _commit(run, ledger, u, records, wall)
        if run.device.type == "cuda":
            torch.cuda.empty_cache()
        predicted = f"{u['seconds']:.1f}" if u.get("seconds") is not None else "-"
        log(
            f"[{i}/{len(plan)}] {u['id']}: {wall:.1f} s (predicted {predicted}), "
            f"{len(records)} records, {(time.perf_counter() - t0) / 60:.1f} min in all"
        )
    _chosen(run, plan, ledger)
    took = {uid: d["wall_s"] for uid, d in done.items()}
    if len(took) == len(plan):
        log(f"all done: {len(plan)} units, {(time.perf_counter() - t0) / 60:.1f} min this call")
    log(recipe.format_outcome(plan, took))
    if ledger.get("chosen"):
        log(
            "protocols chosen on held-out training examples: "
            + "; ".join(f"{arm} lr {c['lr']:g}" for arm, c in ledger["chosen"].items())
        )
    return {"units": plan, "took": took, "chosen": ledger.get("chosen")}
