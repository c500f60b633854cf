"""The recorded reproduction, and sweeps of a chapter's parameter.

    python -m gpt1lib.harness.reproduce --scale small --source bundle --corpus bundle

runs the scale's units (``harness.runner``), records kept under ``results/<scale>/``; the same
command again goes on with the units not done. A sweep reruns one chapter with papermill over
the values of one parameter, its records under ``<out_dir>/<scale>/`` like any run's:

    python -m gpt1lib.harness.reproduce --scale cpu --only 05_classification \
        -p tasks '["sst2"]' --sweep lm_coef 0 0.5 1
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from ..scales import SCALES
from ..settings import PARAMETERS
from . import command_line
from .runner import run

ROOT = Path(__file__).resolve().parents[2]
#: What every run of the chapters passes to each chapter that declares it.
ROUTINE = ("scale", "out_dir", "results_dir", "source", "corpus")


def check_known(params: dict, chapter: str) -> None:
    """An error for a parameter ``chapter`` does not declare: papermill would pass it and the
    chapter run without it."""
    has = PARAMETERS.get(chapter, ())
    for key in params:
        if key not in ROUTINE and key not in has:
            raise ValueError(f"{chapter} has no parameter {key!r}: it has {', '.join(has)}")


def sweep(
    chapter: str, name: str, values: list, scale: str, params: dict, out_dir: Path, log=print
) -> list[Path]:
    """Run ``chapter`` once per value of its parameter ``name``; returns the executed notebooks."""
    import papermill as pm

    nb = ROOT / "book" / f"{chapter}.ipynb"
    if not nb.is_file() or chapter not in PARAMETERS:
        raise ValueError(f"{chapter!r}: name a chapter of book/ ({', '.join(PARAMETERS)})")
    check_known({name: None, **params}, chapter)
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


def _parser() -> argparse.ArgumentParser:
    p = command_line("gpt1lib.harness.reproduce", __doc__)
    p.add_argument("--scale", default="small", choices=tuple(SCALES))
    p.add_argument("--source", help="folder of the task data sets (or a bundle), or 'hub'")
    p.add_argument("--corpus", help="pre-training corpus: a folder, file, bundle or hub id")
    p.add_argument("--out-dir", default=str(ROOT / "runs"))
    p.add_argument("--results", default=str(ROOT / "results"))
    p.add_argument("--force", action="store_true", help="replace the records of another run")
    p.add_argument("--book", action="store_true", help="rebuild the HTML book afterwards")
    p.add_argument("--plan-only", action="store_true", help="print the units, run nothing")
    device = "predict for DEVICE ('NVIDIA H100 80GB HBM3'), not this one; implies --plan-only"
    p.add_argument("--estimate", metavar="DEVICE", help=device)
    cut = "end before a unit that would not finish within MINUTES"
    p.add_argument("--stop-after", type=float, metavar="MINUTES", help=cut)
    p.add_argument("--only", nargs=1, metavar="CHAPTER", help="with --sweep: the chapter")
    param = {"metavar": ("NAME", "VALUE"), "help": "with --sweep: another chapter parameter"}
    p.add_argument("-p", "--param", nargs=2, action="append", default=[], **param)
    sweep = "rerun the --only chapter once per VALUE of its parameter NAME"
    p.add_argument("--sweep", nargs="+", metavar=("NAME", "VALUE"), help=sweep)
    return p


def main(argv: list[str] | None = None) -> dict | list[Path]:
    """A sweep where ``--sweep`` (or ``--only``, ``-p``) is given, else the recorded run."""
    p = _parser()
    a = p.parse_args(argv)
    params = {k: v for k, v in (("source", a.source), ("corpus", a.corpus)) if v is not None}
    params |= {name: _value(value) for name, value in a.param}
    if a.sweep or a.only or a.param:
        if a.only:  # a misspelt parameter is named before anything else
            check_known(params, a.only[0])
        if not a.only or not a.sweep or len(a.sweep) < 2:
            p.error("--sweep NAME VALUE [VALUE ...] needs one chapter: --only <chapter>")
        values = [_value(v) for v in a.sweep[1:]]
        return sweep(a.only[0], a.sweep[0], values, a.scale, params, Path(a.out_dir))
    if not a.source or not a.corpus:
        p.error("the reproduction needs --source and --corpus (a bundle, or the data)")
    how = {"force": a.force, "stop_after_min": a.stop_after, "plan_only": a.plan_only}
    made = run(
        a.scale, a.source, a.corpus, Path(a.out_dir), Path(a.results), **how, estimate_on=a.estimate
    )
    if a.book and not (a.plan_only or a.estimate):
        book = "from jupyter_book.cli.main import main; main(prog_name='jupyter-book')"
        build = ["build", str(ROOT), "-W", "--keep-going"]  # through this interpreter
        subprocess.run([sys.executable, "-c", book, *build], check=True)
    return made


def _value(text: str):
    """A command-line value: JSON where it parses (numbers, lists, null), else the string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


if __name__ == "__main__":
    main()
