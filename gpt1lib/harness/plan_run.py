"""Running a plan (``harness.plan``) in one process, every record written as it is made.

    python -m gpt1lib.harness.reproduce --scale small --source bundle --corpus bundle --budget 22

loads the data once, times each kind of work, prints the plan and runs its units in order, each
a call of the chapter's own experiment (``experiments``: ``pretraining``, ``finetune_tasks``,
``objective``, ``layer_transfer``, ``zero_shot_curves``, ``ablations``; a stage of the protocol
selection, ``selection.stage``; ``harness.bench.speed_run``), so that a unit runs exactly what
its chapter runs. Once every arm's protocol is chosen the rest is planned again with it (the
chosen protocols are kept in the plan), and each unit's time is printed beside its prediction
(``plan_report.format_outcome`` at the end). After each
unit its records go to ``results/<scale>/<chapter>.jsonl``, in the format the chapters write
(each record's ``config`` also names its ``plan_part``), the unit is marked done in
``results/<scale>/plan.json`` and the chapter's line in ``manifest.json`` is brought up to date.
A run cut off anywhere leaves every finished unit's records; a rerun of the same command reads
the kept plan, drops the records of a unit that was cut off, and goes on with the first unit not
done (pre-training from its last checkpoint). ``stop_after_min`` ends a call before a unit that
would not finish in time (pre-training runs what fits), for machines whose commands are limited.
The chapters' executed notebooks are not made here: ``make book`` on any CPU draws chapters
09-12 from these records.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .. import selection
from ..bundle_source import Bundle
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
from ..runtime import pick_device
from ..scales import SCALES
from ..tasks import open_source
from . import plan, throughput
from .bench import speed_run, to_records
from .plan_report import format_outcome, format_plan

PRETRAIN_KEYS = ("total_steps", "warmup_steps", "ckpt_interval", "eval_interval")
PRETRAIN_KEYS += ("n_log_checkpoints",)


@dataclass
class Run:
    """What the units of one run share: the data, the tokenizer, the models, where things go."""

    S: object
    source: str
    corpus: str
    out_dir: Path  # the chapters' runs folder (checkpoints, the runs' own records)
    kept: Path  # results/<scale>
    device: torch.device
    tok: object
    log: object = print
    _models: dict = field(default_factory=dict)
    _selection: dict = field(default_factory=dict)

    def selection_data(self, limits: dict) -> dict:
        """The selection tasks' examples, carved into fitted and held-out parts (once)."""
        key = tuple(limits.items())
        if key not in self._selection:
            self._selection = {key: selection.selection_data(self.source, limits)}
        return self._selection[key]

    def model(self, arch: str):
        if arch not in self._models:
            if latest_checkpoint(pretrain_dir(self.out_dir, self.S.name, arch)) is None:
                raise FileNotFoundError(
                    f"{pretrain_dir(self.out_dir, self.S.name, arch)} holds no pre-trained model "
                    "(a new machine, or it was removed): the units that start from it cannot "
                    "run; their records so far are kept. Start the plan over with --force all "
                    "(FORCE=all)"
                )
            self._models[arch] = pretrained_model(
                self.S.name, self.out_dir, "pretrain", self.corpus, arch, self.device, False
            )[0]
        return self._models[arch]


def _identity(value) -> str:
    """What identifies a data source in a plan: a bundle's manifest sha256, else its name."""
    src = open_source(value)
    return src.identity() if isinstance(src, Bundle) else str(value)


# ---------------------------------------------------------------- the units: the experiments


def _pretrain(run: Run, u: dict, stop_after: int | None = None) -> list[dict]:
    settings = {k: u[k] for k in PRETRAIN_KEYS}
    job = pretraining(run.S, run.corpus, run.out_dir, arch=u["arch"], **settings)
    job.run(device=run.device, progress=False, stop_after=stop_after)
    lines = (job.folder / "records.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(x) for x in lines if x.strip()]


def _finetune(run: Run, u: dict) -> list[dict]:
    S, kind, task = run.S, u["kind"], u["task"]
    kw = {"out_dir": run.out_dir, "device": run.device, "progress": False, "limit": u["limit"]}
    kw["init"] = "this run's own pre-training (the plan's pretrain:gpt part)"
    gpt = run.model("gpt")
    if kind == "finetune":
        results, _ = finetune_tasks(S, gpt, run.tok, [task], run.source, also=u["also"], **kw)
    elif kind == "objective":
        results = objective(S, gpt, run.tok, task, run.source, coefs=(u["lm_coef"],), **kw)
    elif kind == "transfer":
        results = layer_transfer(S, gpt, run.tok, [task], run.source, points=[u["n_transfer"]],
                                 eval_limit={task: u["eval_limit"]}, **kw)  # fmt: skip
    else:  # an ablation arm
        models = {"gpt": gpt, "lstm": run.model("lstm") if u["arm"] == "lstm" else None}
        results = ablations(S, models, run.tok, [task], run.source, arms=[u["arm"]], **kw)
    return [rec for r in results.values() for rec in r.records]


def _zeroshot(run: Run, u: dict) -> list[dict]:
    S = run.S
    records, skipped = zero_shot_curves(
        S, run.source, run.out_dir, archs=[u["arch"]], seed=S.finetune.seed,
        device=run.device, progress=False,
    )  # fmt: skip
    for task, why in skipped.items():
        run.log(f"  zero-shot {task}: skipped, {why}")
    return records


def _select(run: Run, u: dict) -> list[dict]:
    """A stage of one arm's protocol selection; the rate stage's records are read back for the
    schedule stage."""
    arm = u["arm"]
    done = [r for r in _kept(run, plan.CHAPTER["selection"])
            if r.get("experiment") == f"selection:{arm}"]  # fmt: skip
    model = run.model(ARM_MODEL[arm])
    data = run.selection_data(u["limits"])
    return selection.stage(run.S, arm, u["stage"], model, run.tok, data, done=done,
                           seed=run.S.finetune.seed, device=run.device, progress=False)  # fmt: skip


def _kept(run: Run, chapter: str) -> list[dict]:
    path = run.kept / f"{chapter}.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    return [json.loads(x) for x in lines if x.strip()]


def _bench(run: Run, u: dict) -> list[dict]:
    return to_records(speed_run(run.S, run.device, log=run.log))


RUNNERS = {
    "pretrain": _pretrain,
    "finetune": _finetune,
    "objective": _finetune,
    "transfer": _finetune,
    "ablation": _finetune,
    "selection": _select,
    "zeroshot": _zeroshot,
    "bench": _bench,
}


# ---------------------------------------------------------------- the run


def _fresh(run: Run, plan_path: Path, force: bool) -> None:
    """Before a new plan: nothing of an older run may mix into it (``force`` clears it)."""
    chapters = {*plan.CHAPTER.values(), *plan.FAMILY_CHAPTER.values()}
    old = [p for p in (run.kept / f"{c}.jsonl" for c in chapters) if p.is_file()]
    folders = [pretrain_dir(run.out_dir, run.S.name, a) for a in ("gpt", "lstm")]
    runs = [f for f in folders if f.exists()]
    if (old or runs or plan_path.is_file()) and not force:
        raise FileExistsError(
            f"{run.kept} or {run.out_dir / run.S.name} already holds records, checkpoints or "
            f"another plan ({', '.join(p.name for p in [*old, *runs][:4])}...): pass --force all "
            "(FORCE=all) to replace them, or another --results / --out-dir"
        )
    for p in [*old, plan_path]:
        p.unlink(missing_ok=True)
    for folder in runs:
        shutil.rmtree(folder)


def _plan(run: Run, budget_min: float, key: dict, t0: float, estimate_on: str | None) -> dict:
    stats = throughput.task_stats(run.S, run.source, run.tok)
    ladders = throughput.ladders(run.S, run.source, stats)
    if estimate_on:
        tp = throughput.estimate(run.S, run.tok.vocab_size, estimate_on)
    else:
        run.log(f"timing the loops on {run.device} ...")
        job = pretraining(run.S, run.corpus, run.out_dir, arch="gpt")
        tp = throughput.measure(run.S, job, run.device, t0)
    made = plan.make_plan(run.S, tp, stats, ladders, budget_min)
    made |= {"first_predicted_s": made["predicted_s"], "stats": stats}
    made["ladders"] = [[t, s, d] for (t, s), d in ladders.items()]  # JSON keeps no tuple keys
    return {**made, "key": key, "commit": git_commit()}


def _replan(run: Run, made: dict, path: Path) -> None:
    """Once every arm's protocol is chosen: the scale's settings become the chosen ones and
    the units not yet run are planned again with them, in the time left."""
    made["chosen"] = selection.chosen(_kept(run, plan.CHAPTER["selection"]))
    run.S = selection.with_chosen(SCALES[run.S.name], made["chosen"])
    fixed = {g: made["levels"][g] for g in ("pretrain", "selection")}
    actual = {uid: d["wall_s"] for uid, d in made["done"].items()}
    ladders = {(t, s): d for t, s, d in made["ladders"]}
    tp = throughput.Throughput(**made["throughput"])
    new = plan.make_plan(run.S, tp, made["stats"], ladders, made["budget_min"], fixed=fixed,
                         actual=actual)  # fmt: skip
    old = {u["id"]: u for u in made["units"]}
    made["units"] = [old[u["id"]] if u["id"] in actual else u for u in new["units"]]
    made |= {k: new[k] for k in ("levels", "predicted_s", "fits")}
    write_json(path, made)
    run.log("the protocols are chosen; the rest planned again with them:")
    run.log(format_plan(made))


def _commit(run: Run, made: dict, path: Path, u: dict, records: list[dict], wall: float) -> None:
    """Write a finished unit's records to its chapter, mark it done, update the manifest."""
    chapter = run.kept / f"{u['chapter']}.jsonl"
    keep_records(chapter, lambda r: (r.get("config") or {}).get("plan_part") != u["id"])
    for r in records:
        r["config"] = {**(r.get("config") or {}), "plan_part": u["id"]}
    append_records(chapter, records)
    made["done"][u["id"]] = {"records": len(records), "wall_s": round(wall, 1)}
    write_json(path, made)
    manifest_path = run.kept / "manifest.json"
    man = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    mine = [v for v in made["units"] if v["chapter"] == u["chapter"] and v["id"] in made["done"]]
    man[u["chapter"]] = {
        "commit": git_commit(),
        "parameters": {"scale": run.S.name, **made["key"]},
        "records": sum(made["done"][v["id"]]["records"] for v in mine),
        "wall_time_s": round(sum(made["done"][v["id"]]["wall_s"] for v in mine), 1),
    }
    write_json(manifest_path, man)


def run(
    scale: str,
    source: str,
    corpus: str,
    budget_min: float,
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
    """Plan a run of ``scale`` on ``budget_min`` minutes, print the plan, run it (or, with
    ``plan_only``, stop there); returns the plan with the units done."""
    t0 = time.perf_counter()
    S = SCALES[scale]
    dev = pick_device(device)
    if dev.type == "cuda":
        torch.set_float32_matmul_precision("high")  # float32 leftovers on tensor cores
    tok = scale_tokenizer(S, corpus)
    run_ = Run(S, source, corpus, Path(out_dir), Path(results) / scale, dev, tok, log)
    path = run_.kept / "plan.json"
    key = {"budget": budget_min, "source": _identity(source), "corpus": _identity(corpus)}
    made = json.loads(path.read_text()) if path.is_file() else None
    if estimate_on:  # a plan for another machine: printed, nothing here touched
        made = _plan(run_, budget_min, key, t0, estimate_on)
        log(format_plan(made))
        return made
    if made is None or made.get("key") != key or force:
        _fresh(run_, path, force)
        made = _plan(run_, budget_min, key, t0, None)
        write_json(path, made)  # a rerun (or the run after --plan-only) resumes it
    else:
        log(f"resuming the plan in {path} ({len(made['done'])} of {len(made['units'])} units done)")
    if made.get("chosen"):  # the protocols its selection chose
        run_.S = selection.with_chosen(S, made["chosen"])
    log(format_plan(made))
    if plan_only:
        return made
    return _execute(run_, made, path, t0, stop_after_min)


def _next(run: Run, made: dict, path: Path) -> dict | None:
    """The first unit not done; once the last selection unit is done (in this call or one cut
    off before it planned again), the rest planned again first."""
    chosen = [u for u in made["units"] if u["kind"] == "selection"]
    if chosen and "chosen" not in made and all(u["id"] in made["done"] for u in chosen):
        _replan(run, made, path)
    return next((u for u in made["units"] if u["id"] not in made["done"]), None)


def _execute(run: Run, made: dict, path: Path, t0: float, stop_after_min) -> dict:
    deadline = t0 + stop_after_min * 60 if stop_after_min else None
    while (u := _next(run, made, path)) is not None:
        stop_after = None
        if deadline is not None and time.perf_counter() + u["seconds"] > deadline:
            left = deadline - time.perf_counter()
            step_s = made["throughput"][
                "pretrain_step_s" if u.get("arch") == "gpt" else "lstm_step_s"
            ]
            if u["kind"] != "pretrain" or left < 30 * step_s:
                n = len(made["units"]) - len(made["done"])
                run.log(f"stopped before {u['id']}: {n} units left; rerun to go on")
                made["stopped"] = u["id"]
                return made
            stop_after = int(left * 0.8 / step_s)
        started = time.perf_counter()
        if stop_after is not None:
            _pretrain(run, u, stop_after)
            run.log(
                f"stopped {u['id']} after {stop_after} more updates (time is up); rerun to go on"
            )
            made["stopped"] = u["id"]
            return made
        records = RUNNERS[u["kind"]](run, u)
        wall = time.perf_counter() - started
        _commit(run, made, path, u, records, wall)
        if run.device.type == "cuda":
            torch.cuda.empty_cache()
        run.log(
            f"[{len(made['done'])}/{len(made['units'])}] {u['id']}: {wall:.1f} s "
            f"(predicted {u['seconds']:.1f}), {len(records)} records, "
            f"{(time.perf_counter() - t0) / 60:.1f} min in all"
        )
    made.pop("stopped", None)
    run.log(f"plan done: {len(made['done'])} units in {(time.perf_counter() - t0) / 60:.1f} min")
    run.log(format_outcome(made))
    return made
