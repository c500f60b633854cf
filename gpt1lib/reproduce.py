"""The recorded reproduction: every chapter run with papermill, its records kept under results/.

    python -m gpt1lib.reproduce --scale small --source ../shared/data \\
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
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

import yaml

from .checkpoint import write_json
from .records import git_commit
from .scales import SCALES

ROOT = Path(__file__).resolve().parents[1]


class RecordError(RuntimeError):
    """Some chapters of a recorded run failed; the records of the others were kept."""


def chapters(book: Path) -> list[Path]:
    """The notebooks of ``_toc.yml``, in its order."""
    toc = yaml.safe_load((book.parent / "_toc.yml").read_text())
    files = [c["file"] for part in toc.get("parts", []) for c in part.get("chapters", [])]
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


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(
        prog="python -m gpt1lib.reproduce", description=__doc__.split("\n")[0]
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
    a = p.parse_args(argv)
    params = {k: v for k, v in (("source", a.source), ("corpus", a.corpus)) if v is not None}
    for name, value in a.param:
        try:
            params[name] = json.loads(value)
        except json.JSONDecodeError:
            params[name] = value
    only = set(a.only) if a.only else None
    manifest = record(a.scale, params, Path(a.out_dir), Path(a.results), set(a.force), only)
    if a.book:
        subprocess.run(["jupyter-book", "build", str(ROOT), "-W", "--keep-going"], check=True)
    return manifest


if __name__ == "__main__":
    main()
