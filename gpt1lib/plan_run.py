"""Running a plan (``gpt1lib.plan``) in one process, every record written as it is made.

    python -m gpt1lib.reproduce --scale small --source bundle --corpus bundle --budget 17

loads the data once, times a few steps of each kind of work, prints the plan and runs its units
in order with the library's own functions (``pretrain``, ``runs.pretrained_model``,
``finetune.run_task``, ``zeroshot.evaluate_checkpoints``, ``bench.run_benchmark``). After each
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
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from . import bundle, plan
from .checkpoint import file_sha256, latest_checkpoint, write_json
from .corpus import build_corpus, load_documents
from .finetune import run_task
from .paper import ABLATIONS
from .pretrain import pretrain
from .records import append_records, git_commit, keep_records
from .runs import load_tokenizer, new_model, pretrained_model
from .runtime import pick_device, seed_everything
from .scales import SCALES
from .zeroshot import evaluate_checkpoints, load_zero_shot

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
    _data: object = None
    _models: dict = field(default_factory=dict)

    def data(self):
        if self._data is None:
            n_ctx, cfg = self.S.model_config().n_ctx, self.S.pretrain
            cache = self.out_dir / "cache"
            self._data = build_corpus(
                self.tok,
                n_ctx,
                self.corpus,
                seed=cfg.seed,
                cache_dir=cache,
                limit=self.S.corpus_limit,
            )
        return self._data

    def model(self, arch: str):
        if arch not in self._models:
            if latest_checkpoint(self.run_dir(arch)) is None:  # e.g. a new machine
                raise FileNotFoundError(
                    f"{self.run_dir(arch)} holds no pre-trained model (a new machine, or it was "
                    "removed): the units that start from it cannot run; their records so far "
                    "are kept. Start the plan over with --force all (FORCE=all)"
                )
            self._models[arch] = pretrained_model(
                self.S.name, self.out_dir, "pretrain", self.corpus, arch, self.device, False
            )[0]
        return self._models[arch]

    def run_dir(self, arch: str) -> Path:
        return self.out_dir / self.S.name / ("pretrain" if arch == "gpt" else f"pretrain_{arch}")


def _tokenizer(S, corpus):
    """The tokenizer of a run on ``corpus``: a bundle's own, else the scale's."""
    if bundle.is_bundle(corpus):
        return bundle.tokenizer(corpus)
    texts = None
    if S.tokenizer.startswith("train:"):
        texts = load_documents(corpus, "train", limit=S.corpus_limit).texts
    return load_tokenizer(S.tokenizer, texts)


def _identity(path) -> str:
    """What identifies a data source in a plan: a bundle's manifest sha256, else its name."""
    if bundle.is_bundle(path):
        return "bundle " + file_sha256(Path(path) / bundle.MANIFEST)[:16]
    return str(path)


# ---------------------------------------------------------------- the units


def _pretrain(run: Run, u: dict, stop_after: int | None = None) -> list[dict]:
    S, arch, folder = run.S, u["arch"], run.run_dir(u["arch"])
    cfg = replace(S.pretrain, experiment=f"pretrain:{arch}", **{k: u[k] for k in PRETRAIN_KEYS})
    data = run.data()
    seed_everything(cfg.seed)
    model = new_model(S, run.tok.vocab_size, arch)
    kw = {"scale": S.name, "device": run.device, "progress": False, "stop_after": stop_after}
    pretrain(model, run.tok, data, cfg, folder, resume=latest_checkpoint(folder) is not None, **kw)
    lines = (folder / "records.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(x) for x in lines if x.strip()]


def _finetune(run: Run, u: dict) -> list[dict]:
    S, kind = run.S, u["kind"]
    cfg, kw = replace(S.finetune), {"scale": S.name, "device": run.device, "progress": False}
    model, where = run.model("gpt"), run.out_dir / S.name
    if kind == "finetune":
        kw |= {"also": u["also"], "out_dir": where / "finetune"}
    elif kind == "objective":
        coef = u["lm_coef"]
        cfg = replace(cfg, lm_coef=coef, experiment=f"objective lambda={coef}")
        kw["out_dir"] = where / "objective" / f"lambda{coef}"
    elif kind == "transfer":
        cfg = replace(cfg, experiment="layer_transfer", n_transfer=u["n_transfer"])
        cfg = replace(cfg, eval_train_examples=S.transfer_train_examples)
        kw |= {"eval_split": "dev", "eval_limit": u["eval_limit"]}
        kw["out_dir"] = where / "layer_transfer" / f"n_transfer_{u['n_transfer']}"
    else:  # an ablation arm
        experiment = ABLATIONS[u["method"]]
        arm = experiment.split(":")[1]
        cfg = replace(cfg, experiment=experiment)
        cfg = replace(cfg, n_transfer=-1) if arm == "no_pretraining" else cfg
        cfg = replace(cfg, lm_coef=0.0) if arm == "no_aux_lm" else cfg
        model = run.model("lstm") if arm == "lstm" else model
        kw["out_dir"] = where / "ablations" / arm
    kw.setdefault("eval_limit", S.limits_for(u["task"])["eval_limit"])
    result = run_task(model, run.tok, u["task"], run.source, cfg, limit=u["limit"], **kw)
    return result.records


def _zeroshot(run: Run, u: dict) -> list[dict]:
    S = run.S
    data, skipped = load_zero_shot(run.source, S.zero_shot_examples, S.finetune.seed)
    for task, why in skipped.items():
        run.log(f"  zero-shot {task}: skipped, {why}")
    folders = sorted((run.run_dir(u["arch"]) / "log_checkpoints").glob("step_*"))
    return evaluate_checkpoints(
        folders, data, device=run.device, scale=S.name, progress=False, seed=S.finetune.seed
    )


def _bench(run: Run, u: dict) -> list[dict]:
    from .bench import BenchConfig, run_benchmark, to_records

    cuda = run.device.type == "cuda"
    name = "paper" if cuda else run.S.name
    impl = ("gpt1lib", "gpt1lib:matrix", "transformers")
    try:
        import transformers  # noqa: F401
    except ImportError:
        impl = impl[:2]
    # the scale's batch, seq and steps for the device: at the paper preset on CUDA, 64 x 512
    cfg = BenchConfig(scale=name, implementations=impl, mode="both", memory=cuda)
    cfg = replace(cfg, device=str(run.device))
    records, runs = [], [cfg]
    if cuda:  # compiled: pre-training only (fine-tuning's many shapes would each recompile)
        runs.append(replace(cfg, compile=True, mode="pretrain", implementations=impl[1:]))
    for c in runs:
        results = run_benchmark(c)
        records += to_records(results)
        compiled = c.compile
        for r in results:
            run.log(
                f"  bench {r['variant']:18s} compile={compiled}: {r['tokens_per_s']:,.0f} tok/s"
            )
    return records


RUNNERS = {
    "pretrain": _pretrain,
    "finetune": _finetune,
    "objective": _finetune,
    "transfer": _finetune,
    "ablation": _finetune,
    "zeroshot": _zeroshot,
    "bench": _bench,
}


# ---------------------------------------------------------------- the run


def _fresh(run: Run, plan_path: Path, force: bool) -> None:
    """Before a new plan: nothing of an older run may mix into it (``force`` clears it)."""
    chapters = {c for c in plan.CHAPTER.values()} | set(plan.CHAPTER_TASKS)
    old = [p for p in (run.kept / f"{c}.jsonl" for c in chapters) if p.is_file()]
    runs = [run.run_dir(a) for a in ("gpt", "lstm") if run.run_dir(a).exists()]
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
    stats = plan.task_stats(run.S, run.source, run.tok)
    ladders = plan.ladders(run.S, run.source, stats)
    if estimate_on:
        tp = plan.estimate(run.S, run.tok.vocab_size, estimate_on)
    else:
        run.log(f"timing a few steps on {run.device} ...")
        tp = plan.measure(run.S, run.tok.vocab_size, run.device, t0)
    made = plan.make_plan(run.S, tp, stats, ladders, budget_min)
    return {**made, "key": key, "commit": git_commit(), "stats": stats}


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
    tok = _tokenizer(S, corpus)
    run_ = Run(S, source, corpus, Path(out_dir), Path(results) / scale, dev, tok, log)
    path = run_.kept / "plan.json"
    key = {"budget": budget_min, "source": _identity(source), "corpus": _identity(corpus)}
    made = json.loads(path.read_text()) if path.is_file() else None
    if estimate_on:  # a plan for another machine: printed, nothing here touched
        made = _plan(run_, budget_min, key, t0, estimate_on)
        log(plan.format_plan(made))
        return made
    if made is None or made.get("key") != key or force:
        _fresh(run_, path, force)
        made = _plan(run_, budget_min, key, t0, None)
        write_json(path, made)  # a rerun (or the run after --plan-only) resumes it
    else:
        log(f"resuming the plan in {path} ({len(made['done'])} of {len(made['units'])} units done)")
    log(plan.format_plan(made))
    if plan_only:
        return made
    return _execute(run_, made, path, t0, stop_after_min)


def _execute(run: Run, made: dict, path: Path, t0: float, stop_after_min) -> dict:
    deadline = t0 + stop_after_min * 60 if stop_after_min else None
    todo = [u for u in made["units"] if u["id"] not in made["done"]]
    for i, u in enumerate(todo, start=1):
        stop_after = None
        if deadline is not None and time.perf_counter() + u["seconds"] > deadline:
            left = deadline - time.perf_counter()
            step_s = made["throughput"][
                "pretrain_step_s" if u.get("arch") == "gpt" else "lstm_step_s"
            ]
            if u["kind"] != "pretrain" or left < 30 * step_s:
                run.log(f"stopped before {u['id']}: {len(todo) - i + 1} units left; rerun to go on")
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
    return made
