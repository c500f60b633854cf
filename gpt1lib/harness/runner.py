"""The recorded reproduction: a scale's units (``recipe.units``) run in order, each unit's
records in one write to ``results/<scale>/<chapter>.jsonl``, then marked done in ``run.json``.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import replace
from pathlib import Path

import torch

from .. import experiments as ex
from .. import selection
from ..checkpoint import latest_checkpoint
from ..files import write_json
from ..finetune import FinetuneRun
from ..records import append_records, git_commit, keep_records, load_records, run_lock
from ..runs import pretrained_model
from ..runtime import pad_multiple, pick_device
from ..scales import SCALES
from ..tasks import open_source
from . import recipe

ORIGIN = "this run's own pre-training (the recipe's pretrain:gpt unit)"


class Run:
    """What the units of one run share: the scale (with the rates once chosen), the data, the
    tokenizer, the pre-trained models (loaded once)."""

    def __init__(self, S, source, corpus, out_dir: Path, kept: Path, device, tok) -> None:
        self.S, self.source, self.corpus, self.out_dir, self.kept = S, source, corpus, out_dir, kept
        self.device, self.tok, self.models = device, tok, {}
        self.kw = {"device": device, "progress": False}  # every loop's

    def base(self) -> FinetuneRun:
        where = {"out_dir": self.out_dir, "init": ORIGIN, **self.kw}
        return FinetuneRun(None, self.S.finetune, self.source, **where)

    def model(self, arch: str):
        if arch not in self.models:
            folder = ex.pretrain_dir(self.out_dir, self.S.name, arch)
            if latest_checkpoint(folder) is None:
                raise FileNotFoundError(f"{folder} holds no model (a new machine?): use --force")
            args = (self.S.name, self.out_dir, "pretrain", self.corpus, arch, self.device)
            self.models[arch] = pretrained_model(*args, progress=False)[0]
        return self.models[arch]


def _pretrain(run: Run, u: dict) -> list[dict]:
    job = ex.pretraining(run.S, run.corpus, run.out_dir, arch=u["arch"])
    job.run(**run.kw)
    return load_records(job.folder / "records.jsonl")


def _select(run: Run, u: dict) -> list[dict]:
    S, arm = run.S, u["arm"]
    limits = dict.fromkeys(S.selection_tasks, S.selection_examples)
    data = selection.selection_data(run.source, limits, S.finetune.seed)
    return selection.select(S, arm, run.model(ex.ARM_MODEL[arm]), run.tok, data, run.base())


def _zeroshot(run: Run, u: dict) -> list[dict]:
    kw = {"archs": [u["arch"]], "seed": run.S.finetune.seed, **run.kw}
    got, skipped = ex.zero_shot_curves(run.S, run.source, run.out_dir, **kw)
    for task, why in skipped.items():
        print(f"  zero-shot {task}: skipped, {why}")
    return got


def _finetune(run: Run, u: dict) -> list[dict]:
    S, t, k, gpt, base = run.S, u["task"], recipe.kind(u), run.model("gpt"), run.base()
    if k == "finetune":
        results = ex.finetune_tasks(S, gpt, run.tok, [t], base)[0]
    elif k == "objective":
        results = ex.objective(S, gpt, run.tok, replace(base, task=t), coefs=(0.0,))
    elif k == "transfer":
        results = ex.layer_transfer(S, gpt, run.tok, [t], base, points=[u["n_transfer"]])
    else:  # a Table 5 row
        models = {"gpt": gpt, "lstm": run.model("lstm") if u["arm"] == "lstm" else None}
        results = ex.ablations(S, models, run.tok, [t], base, arms=[u["arm"]])
    return [rec for r in results.values() for rec in r.records]


RUNNERS = {"pretrain": _pretrain, "select": _select, "zeroshot": _zeroshot}


def _identity(value) -> str:
    src = open_source(value)  # a bundle: its manifest's sha256
    return src.identity() if hasattr(src, "identity") else str(value)


def _ledger(run: Run, key: dict, force: bool) -> dict:
    """``run.json``: the run's data and units done; another run's files refused (``force``:
    removed)."""
    path = run.kept / "run.json"
    ledger = json.loads(path.read_text()) if path.is_file() else None
    if ledger is not None and ledger["key"] == key and not force:
        return ledger
    old = [*run.kept.glob("*.jsonl"), run.kept / "plan.json", run.kept / "manifest.json", path]
    old += [ex.pretrain_dir(run.out_dir, run.S.name, a) for a in ("gpt", "lstm")]
    if (old := [p for p in old if p.exists()]) and not force:
        raise FileExistsError(
            f"{run.kept} or {run.out_dir / run.S.name} holds another run's records or "
            f"checkpoints ({', '.join(p.name for p in old[:4])}): pass --force (FORCE=1) to "
            "replace them, or another --results / --out-dir"
        )
    for p in old:
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    return {"key": key, "commit": git_commit(), "done": {}}


def _commit(run: Run, ledger: dict, u: dict, records: list[dict], wall: float) -> None:
    for r in records:
        r["config"] = {**(r.get("config") or {}), "plan_part": u["id"]}
    append_records(run.kept / f"{u['chapter']}.jsonl", records)
    done = {"chapter": u["chapter"], "records": len(records), "wall_s": round(wall, 1)}
    ledger["done"][u["id"]] = done
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
    source,
    corpus,
    out_dir: Path,
    results: Path,
    *,
    force: bool = False,
    stop_after_min: float | None = None,
    plan_only: bool = False,
    estimate_on: str | None = None,
) -> dict:
    """Run ``scale``'s units not done (``stop_after_min``: none that would not finish in time);
    with ``plan_only`` or ``estimate_on`` (a device) only print them and their minutes."""
    t0, S, dev = time.perf_counter(), SCALES[scale], pick_device()
    if dev.type == "cuda":
        torch.set_float32_matmul_precision("high")  # float32 leftovers on tensor cores
    tok = ex.scale_tokenizer(S, corpus)
    plan = recipe.units(S, recipe.available(S, source))
    name = estimate_on or (torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu")
    rates, how = recipe.rates_for(scale, name) or ({}, f"nothing measured on {name} at {scale}")
    if rates:
        multiple = pad_multiple("cpu" if name == "cpu" else "cuda")
        recipe.predict(plan, S, rates, recipe.sizes(S, source, tok, multiple))
    print(recipe.format_units(plan, S, how, rates.get("setup_s")))
    if plan_only or estimate_on:
        return {"units": plan, "took": {}}
    run_ = Run(S, source, corpus, Path(out_dir), Path(results) / scale, dev, tok)
    with run_lock(run_.kept):  # one run a results folder (it makes the folder)
        ledger = _ledger(run_, {"source": _identity(source), "corpus": _identity(corpus)}, force)
        deadline, done = (t0 + stop_after_min * 60 if stop_after_min else None), ledger["done"]
        print(f"{len(done)} of {len(plan)} units done before" if done else "no unit done before")
        for i, u in enumerate(plan, 1):
            if u["id"] in done:
                continue
            _chosen(run_, plan, ledger)
            if deadline is not None and time.perf_counter() + (u.get("seconds") or 0) > deadline:
                left = len(plan) - len(done)
                print(f"stopped before {u['id']}: {left} units left; rerun to go on")
                break
            path = run_.kept / f"{u['chapter']}.jsonl"  # a unit cut off: its records go first
            keep_records(path, lambda r, i=u["id"]: (r.get("config") or {}).get("plan_part") != i)
            started = time.perf_counter()
            records = RUNNERS.get(recipe.kind(u), _finetune)(run_, u)
            _commit(run_, ledger, u, records, wall := time.perf_counter() - started)
            torch.cuda.empty_cache()  # nothing where CUDA never started
            said = f"{wall:.1f} s (predicted {u.get('seconds', '-')}), {len(records)} records"
            minutes = (time.perf_counter() - t0) / 60
            print(f"[{i}/{len(plan)}] {u['id']}: {said}, {minutes:.1f} min in all")
        _chosen(run_, plan, ledger)
    took = {uid: d["wall_s"] for uid, d in done.items()}
    if len(took) == len(plan):
        print(f"all done: {len(plan)} units, {(time.perf_counter() - t0) / 60:.1f} min this call")
    print(recipe.format_units(plan, S, how, None, took))
    print(f"rates chosen on held-out training examples: {ledger.get('chosen')}")
    return {"units": plan, "took": took, "chosen": ledger.get("chosen")}


def _chosen(run: Run, plan: list[dict], ledger: dict) -> None:
    """Once every selection unit is done: the scale with each row's chosen rate."""
    picks = [u["id"] for u in plan if recipe.kind(u) == "select"]
    if picks and "chosen" not in ledger and all(p in ledger["done"] for p in picks):
        ledger["chosen"] = selection.chosen(load_records(run.kept / "12_ablations.jsonl"))
        write_json(run.kept / "run.json", ledger)
    if ledger.get("chosen"):
        run.S = selection.with_chosen(SCALES[run.S.name], ledger["chosen"])
