"""The recorded reproduction: every chapter run with papermill, its records kept under results/.

    python -m gpt1lib.harness.reproduce --scale small --source ../shared/data \\
        --corpus ../shared/data/corpus/gutenberg_novels

runs each chapter in ``book/`` in the table of contents' order with papermill, at ``--scale``,
passing each notebook only the parameters it declares (``scale``, ``source``, ``corpus``,
``out_dir``, ``results_dir`` and any ``-p name value`` given). The records a chapter's runs
append under ``<out_dir>/<scale>/`` are copied to ``results/<scale>/<chapter>.jsonl`` and the
executed notebook to ``<out_dir>/<scale>/notebooks/``. A manifest remembers, per chapter, the
commit and the parameters it ran with: a chapter that already has its records for the same
commit and parameters is skipped unless ``--force`` names it (or ``all``). A chapter that fails
is reported and the others still run; the command then ends with an error naming the failed
chapters (their records are not kept). ``--book`` rebuilds the HTML book afterwards.

With ``--budget MINUTES`` the chapters' training runs instead in one process, planned to fit
that much accelerator time (``harness.plan``, ``harness.plan_run``): the records land in the
same files, and ``make book`` draws the results chapters from them afterwards.

A sweep reruns one chapter over the values of one parameter, the researcher's use:

    python -m gpt1lib.harness.reproduce --scale cpu --only 05_classification \
        -p tasks '["sst2"]' --sweep lm_coef 0 0.5 1

Its runs append their records under ``<out_dir>/<scale>/`` like any run of the chapter (each
value a column of its own in the results chapters); nothing is copied to ``results/``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

import yaml

from ..chapter import PARAMETERS
from ..files import write_json
from ..records import git_commit
from ..scales import SCALES
from .plan_run import run

ROOT = Path(__file__).resolve().parents[2]


class RecordError(RuntimeError):
    """Some chapters of a recorded run failed; the records of the others were kept."""


#: Pages that only read results/ (no run of their own to record): the book renders them.
READ_ONLY_PAGES = ("book/results_at_a_glance",)


def chapters(book: Path) -> list[Path]:
    """The notebooks of ``_toc.yml`` that make or read runs, in its order."""
    toc = yaml.safe_load((book.parent / "_toc.yml").read_text())
    files = [c["file"] for part in toc.get("parts", []) for c in part.get("chapters", [])]
    files = [f for f in files if f not in READ_ONLY_PAGES]
    return [book.parent / f"{f}.ipynb" for f in files if (book.parent / f"{f}.ipynb").is_file()]


def _snapshot(folder: Path) -> dict[Path, int]:
    return {p: p.stat().st_size for p in folder.rglob("*.jsonl")} if folder.exists() else {}


def _new_lines(folder: Path, before: dict[Path, int]) -> list[str]:
    """The record lines appended under ``folder`` since ``before``."""
    lines = []
    for p, size in _snapshot(folder).items():
        start = before.get(p, 0)
        if size > start:
            with open(p, "rb") as f:
                f.seek(start)
                lines += [x for x in f.read().decode("utf-8").splitlines() if x.strip()]
    return lines


#: What every run of the chapters passes to each chapter that declares it.
ROUTINE = ("scale", "out_dir", "results_dir", "source", "corpus")


def check_known(params: dict, names: list[str]) -> None:
    """An error, before anything runs, for a parameter given with ``-p`` that none of the
    chapters ``names`` declares (``chapter.PARAMETERS``; one chapter: that it lacks), naming
    it and the chapter's parameters: papermill would pass it and the chapter run without it."""
    for key in params:
        if key in ROUTINE or any(key in PARAMETERS.get(n, ()) for n in names):
            continue
        if len(names) == 1:
            has = ", ".join(PARAMETERS.get(names[0], ()))
            raise ValueError(f"{names[0]} has no parameter {key!r}: it has {has}")
        raise ValueError(f"no chapter has a parameter {key!r} (chapter.PARAMETERS lists each's)")


def record(
    scale: str,
    params: dict,
    out_dir: Path,
    results: Path,
    force: set[str],
    only: set[str] | None = None,
    log=print,
) -> dict:
    """Run the chapters; returns the manifest (chapter -> commit, parameters, records, time)."""
    import papermill as pm

    book, runs, kept = ROOT / "book", out_dir / scale, results / scale
    kept.mkdir(parents=True, exist_ok=True)
    manifest_path = kept / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    given = {
        "scale": scale,
        "out_dir": str(out_dir.resolve()),
        "results_dir": str(results.resolve()),
        **params,
    }
    check_known(params, [nb.stem for nb in chapters(book) if not only or nb.stem in only])
    commit, failed = git_commit(), {}
    for nb in chapters(book):
        name, executed = nb.stem, runs / "notebooks" / nb.name
        if only and name not in only:
            continue
        declared = pm.inspect_notebook(str(nb))
        use = {k: v for k, v in given.items() if k in declared}
        done = manifest.get(name, {})
        fresh = done.get("commit") == commit and done.get("parameters") == use
        if fresh and {name, "all"}.isdisjoint(force):
            log(f"{name}: records for {commit} with these parameters exist, skipped")
            continue
        before, t0 = _snapshot(runs), time.perf_counter()
        log(f"{name}: running with {use}")
        executed.parent.mkdir(parents=True, exist_ok=True)
        try:
            pm.execute_notebook(
                str(nb), str(executed), parameters=use, cwd=str(book), progress_bar=False
            )
        except pm.PapermillExecutionError as e:  # the other chapters still run
            failed[name] = f"{e.ename}: {e.evalue}"
            log(f"{name}: FAILED ({failed[name]}); see {executed}")
            continue
        lines = _new_lines(runs, before)
        (kept / f"{name}.jsonl").write_text("".join(x + "\n" for x in lines))
        wall = round(time.perf_counter() - t0, 1)
        manifest[name] = {
            "commit": commit,
            "parameters": use,
            "records": len(lines),
            "wall_time_s": wall,
        }
        write_json(manifest_path, manifest)
        log(f"{name}: {len(lines)} records, {wall} s")
    if failed:
        raise RecordError(
            f"{len(failed)} chapter(s) failed, their records not kept (the others' are): "
            + "; ".join(f"{k}: {v}" for k, v in failed.items())
        )
    return manifest


def sweep(
    chapter: str, name: str, values: list, scale: str, params: dict, out_dir: Path, log=print
) -> list[Path]:
    """Run ``chapter`` once per value of the parameter ``name`` (with ``params`` and the
    scale); returns the executed notebooks, ``<out_dir>/<scale>/notebooks/<chapter>-<name>-<v>``."""
    import papermill as pm

    nb = ROOT / "book" / f"{chapter}.ipynb"
    if not nb.is_file() or chapter not in PARAMETERS:
        raise ValueError(f"{chapter!r}: name a chapter of book/ ({', '.join(PARAMETERS)})")
    check_known({name: None, **params}, [chapter])
    declared = PARAMETERS[chapter]
    given = {"scale": scale, "out_dir": str(out_dir.resolve()), **params}
    done = []
    for value in values:
        executed = out_dir / scale / "notebooks" / f"{chapter}-{name}-{value}.ipynb"
        executed.parent.mkdir(parents=True, exist_ok=True)
        use = {k: v for k, v in given.items() if k in declared} | {name: value}
        log(f"{chapter}: running with {use}")
        pm.execute_notebook(
            str(nb), str(executed), parameters=use, cwd=str(nb.parent), progress_bar=False
        )
        done.append(executed)
    return done


def main(argv: list[str] | None = None) -> dict | list[Path]:
    p = argparse.ArgumentParser(
        prog="python -m gpt1lib.harness.reproduce", description=__doc__.split("\n")[0]
    )
    p.add_argument("--scale", default="small", choices=tuple(SCALES))
    p.add_argument("--source", help="folder of the task data sets, or 'hub'")
    p.add_argument("--corpus", help="pre-training corpus: a folder, file or hub id")
    p.add_argument(
        "-p",
        "--param",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="another chapter parameter (JSON value)",
    )
    p.add_argument("--out-dir", default=str(ROOT / "runs"))
    p.add_argument("--results", default=str(ROOT / "results"))
    p.add_argument("--only", nargs="*", help="chapters to run (file names without .ipynb)")
    p.add_argument("--force", nargs="*", default=[], help="chapters to rerun anyway, or 'all'")
    p.add_argument("--book", action="store_true", help="rebuild the HTML book afterwards")
    p.add_argument(
        "--budget",
        type=float,
        metavar="MINUTES",
        help="run every chapter's training in one process, planned to fit these minutes of "
        "the accelerator (harness.plan), instead of the notebooks",
    )
    p.add_argument("--plan-only", action="store_true", help="with --budget: print the plan, stop")
    p.add_argument(
        "--estimate",
        metavar="DEVICE",
        help="with --budget: plan from this device's estimated throughput (e.g. 'NVIDIA H100 "
        "80GB HBM3') instead of timing steps here",
    )
    p.add_argument(
        "--stop-after",
        type=float,
        metavar="MINUTES",
        help="with --budget: end this call before a unit that would not finish in time",
    )
    p.add_argument(
        "--sweep",
        nargs="+",
        metavar=("NAME", "VALUE"),
        help="rerun the one chapter --only names once per VALUE of its parameter NAME",
    )
    a = p.parse_args(argv)
    params = {k: v for k, v in (("source", a.source), ("corpus", a.corpus)) if v is not None}
    params |= {name: _value(value) for name, value in a.param}
    only = set(a.only) if a.only else None
    if a.sweep:
        if not a.only or len(a.only) != 1 or len(a.sweep) < 2:
            p.error("--sweep NAME VALUE [VALUE ...] needs one chapter: --only <chapter>")
        values = [_value(v) for v in a.sweep[1:]]
        return sweep(a.only[0], a.sweep[0], values, a.scale, params, Path(a.out_dir))
    if a.budget is not None:
        return _budgeted(a, p)
    manifest = record(a.scale, params, Path(a.out_dir), Path(a.results), set(a.force), only)
    if a.book:
        subprocess.run(["jupyter-book", "build", str(ROOT), "-W", "--keep-going"], check=True)
    return manifest


def _budgeted(a, p: argparse.ArgumentParser) -> dict:
    """``--budget``: the whole scale in one process (``harness.plan_run``)."""
    if a.budget <= 0 or not a.source or not a.corpus:
        p.error("--budget MINUTES (> 0) needs --source and --corpus (a bundle, or the data)")
    if a.only or a.param or a.sweep:
        p.error("--budget runs the whole plan: --only, -p and --sweep are for the notebooks")
    kw = {"force": bool(a.force), "stop_after_min": a.stop_after, "plan_only": a.plan_only}
    kw["estimate_on"] = a.estimate
    made = run(a.scale, a.source, a.corpus, a.budget, Path(a.out_dir), Path(a.results), **kw)
    if a.book and not a.plan_only:
        subprocess.run(["jupyter-book", "build", str(ROOT), "-W", "--keep-going"], check=True)
    return made


def _value(text: str):
    """A command-line value: JSON where it parses (numbers, lists, null), else the string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


if __name__ == "__main__":
    main()
