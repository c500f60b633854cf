"""The shape of gpt1lib, measured: ``python tools/architecture.py`` prints each target and
exits 1 if one is missed (CI runs it, ``make lint``).

* **Layers** (``../shared/DESIGN.md``): every import of the package, those inside functions
  too, points down or sideways in ``LAYERS``, never up; no import cycle among the modules; the
  results pages' modules (``REPORTING``) import no loop and no experiment.
* **Size**, measured on the code as ``ruff format`` writes it: the package, the paper core
  (``CORE``) and the harness within ``CEILINGS`` non-blank lines, each printed beside issue 44's
  goal (``GOALS``); no module over ``MODULE_LINES`` lines, no function over
  ``FUNCTION_LINES``. What ruff leaves as written (``# fmt: skip``, ``# fmt: off``) may hold a
  table of values and nothing else.
* **Scheduling**: the recorded run's scheduling code (``SCHEDULING``) within
  ``SCHEDULING_LINES`` non-blank lines.
* **Notebooks**: at most ``SHARED_NOTEBOOK_CODE`` of the chapters' code lines appear in more
  than one notebook (``notebook_lines``: what a chapter does, not what it declares).
"""

from __future__ import annotations

import ast
import functools
import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gpt1lib"

#: Each module's layer; a module imports only from its own layer or those below it.
LAYERS: dict[int, tuple[str, ...]] = {
    0: ("runtime", "paths", "files", "hub", "records", "stats", "facts", "settings"),
    1: ("tasks", "tasks.registry", "tasks.layout", "tasks.readers", "tasks.sources",
        "tasks.bundle"),  # data
    2: ("front_end", "tokenizer", "released_encoder", "transforms", "corpus"),  # text -> ids
    3: ("model", "fast", "lstm", "loss", "optim", "checkpoint", "weights", "flops", "checks",
        "heads", "scoring", "steps", "scales", "choice"),
    4: ("pretrain", "pretrain.logger", "finetune", "zeroshot"),  # the loops
    5: ("experiments", "selection", "runs", "chapter"),
    6: (  # on top, beside each other: the reporting and the harness
        "labels", "paper", "findings", "plots", "figures_layout", "baselines", "verdict",
        "harness", "harness.recipe", "harness.runner", "harness.reproduce", "harness.bench",
        "harness.bundle", "harness.memory", "harness.contenders", "harness.pretrain",
        "evaluations",
    ),
    7: ("",),  # the package itself (gpt1lib/__init__.py)
}  # fmt: skip
#: The results pages' modules: they stand beside training, importing nothing of layers 4 and 5.
REPORTING = (
    "labels", "evaluations", "baselines", "paper", "findings", "plots", "figures_layout",
    "verdict",
)  # fmt: skip
#: The paper core: what a reader of the method reads.
CORE = (
    "model", "fast", "loss", "optim", "checkpoint", "files", "hub", "tokenizer", "front_end",
    "corpus", "tasks", "tasks.registry", "tasks.layout", "tasks.readers", "tasks.sources",
    "transforms", "pretrain", "pretrain.logger", "finetune", "heads", "scoring", "zeroshot",
    "lstm", "weights", "scales", "settings",
)  # fmt: skip
#: The ceilings, enforced, in non-blank lines: the package, the paper core and the harness.
#: Ceilings describe the design and go down, never up to fit a change.
CEILINGS = {"gpt1lib": 9800, "paper core": 4550, "the harness": 1525}
#: Issue 44's goals for a slim library, printed beside the ceilings with how far each is.
GOALS = {"gpt1lib": 8000, "paper core": 4300, "the harness": 1200}
MODULE_LINES, FUNCTION_LINES, SHARED_NOTEBOOK_CODE = 400, 60, 0.15
#: The recorded run's scheduling code (the units, their predictions, the runner).
SCHEDULING, SCHEDULING_LINES = ("harness.recipe", "harness.runner"), 400


def modules() -> dict[str, Path]:
    """Each module of the package by its dotted name below ``gpt1lib`` ("" for the package)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(name: str, path: Path, known: dict) -> set[str]:
    """The package's modules ``name`` imports, anywhere in it (inside functions too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".") if package else []
            base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
            target = ".".join([*base, *([node.module] if node.module else [])])
            names = [f"{target}.{a.name}".lstrip(".") for a in node.names]
            found |= {n for n in names if n in known} or {target}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gpt1lib"):
            found.add(node.module.removeprefix("gpt1lib").lstrip("."))
        elif isinstance(node, ast.Import):
            found |= {
                a.name.removeprefix("gpt1lib").lstrip(".")
                for a in node.names
                if a.name.startswith("gpt1lib")
            }
    return {t for t in found if t in known and t != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


@functools.cache
def formatted(path: Path) -> str:
    """The module as ``ruff format`` writes it: every size is measured on this."""
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(path), "-"],
        input=path.read_text(),
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if done.returncode:
        raise SystemExit(f"ruff format failed on {path}: {done.stderr.strip()}")
    return done.stdout


def nonblank(path: Path) -> int:
    return sum(1 for line in formatted(path).splitlines() if line.strip())


def unformatted_blocks(path: Path) -> list[int]:
    """The lines of ``# fmt: skip`` and ``# fmt: off`` that leave more than a table of values
    as written: a skip must close a table's bracket, an off...on block must hold one
    assignment of a literal table. Both are counted alike; ruff does not format either."""
    lines, tree = path.read_text().splitlines(), ast.parse(path.read_text())
    tables = {
        (n.lineno, n.end_lineno)
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign | ast.AnnAssign)
        and isinstance(n.value, ast.Dict | ast.Tuple | ast.List | ast.Set)
    }
    bad = [
        i
        for i, line in enumerate(lines, 1)
        if "# fmt: skip" in line and not re.match(r"[})\]]  # fmt: skip$", line)
    ]
    for i, line in enumerate(lines, 1):
        if line.strip() == "# fmt: off":
            end = next((j for j in range(i, len(lines)) if lines[j].strip() == "# fmt: on"), None)
            inside = [(a, b) for a, b in tables if i < a and (end is None or b <= end)]
            if end is None or len(inside) != 1:
                bad.append(i)
    return bad


def long_functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(formatted(path))
    return [
        (n.name, n.end_lineno - n.lineno + 1)
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        and n.end_lineno - n.lineno + 1 > FUNCTION_LINES
    ]


#: A line that only closes or opens brackets, or holds a comment.
_TRIVIAL = re.compile(r"[\)\]\}\(\[\{,:]+|#.*")
#: An import, which the duplicates tool passes over too.
_IMPORT = re.compile(r"(import |from \S+ import )")


def notebook_lines(book: Path = ROOT / "book", code_only: bool = True) -> tuple[int, int]:
    """(code lines of the chapters, those that appear in more than one chapter). A line is
    stripped, not blank and not only brackets or a comment. With ``code_only`` (the target),
    what a chapter declares rather than does is not counted: its imports (the duplicates tool
    passes over them), the cell tagged ``parameters`` (the chapter's interface: the same name
    means the same in every chapter, and a test checks it against ``settings.PARAMETERS``) and
    the Colab install cell (the same three lines in each, which a test requires)."""
    per = {}
    for nb in sorted(book.glob("*.ipynb")):
        cells = [c for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code"]
        if code_only:
            cells = [c for c in cells if "parameters" not in c["metadata"].get("tags", [])]
            cells = [c for c in cells if "google.colab" not in "".join(c["source"])]
        lines = [x.strip() for c in cells for x in "".join(c["source"]).splitlines()]
        lines = [x for x in lines if x and not _TRIVIAL.fullmatch(x)]
        per[nb.name] = [x for x in lines if not (code_only and _IMPORT.match(x))]
    where = defaultdict(set)
    for name, lines in per.items():
        for line in lines:
            where[line].add(name)
    total = sum(map(len, per.values()))
    return total, sum(1 for lines in per.values() for x in lines if len(where[x]) > 1)


def main() -> int:
    mods = modules()
    layer = {m: k for k, names in LAYERS.items() for m in names}
    graph = {m: imports(m, p, mods) for m, p in mods.items()}
    failures = []
    unplaced = sorted(m for m in mods if m not in layer)
    up = sorted(
        f"{a} ({layer.get(a)}) imports {b} ({layer.get(b)})"
        for a, targets in graph.items()
        for b in targets
        if layer.get(a, 9) < layer.get(b, 9)
    )
    on_training = sorted(
        f"{a} imports {b}" for a in REPORTING for b in graph.get(a, ()) if layer.get(b) in (4, 5)
    )
    print(
        f"results pages on training: {len(on_training)}" + "".join(f"\n  {x}" for x in on_training)
    )
    failures += ["reporting"] * bool(on_training)
    loops = cycles(graph)
    inner = sum(len(imports(m, p, mods)) for m, p in mods.items())  # all, for the count below
    print(f"modules: {len(mods)}, package imports counted (inside functions too): {inner}")
    print(f"import cycles: {len(loops)}" + "".join(f"\n  {' -> '.join(c)}" for c in loops))
    print(f"imports against the layers: {len(up)}" + "".join(f"\n  {x}" for x in up))
    print(f"modules in no layer: {unplaced or 'none'}")
    failures += ["cycles"] * bool(loops) + ["layers"] * bool(up) + ["unplaced"] * bool(unplaced)
    sizes = (
        sum(nonblank(p) for p in mods.values()),
        sum(nonblank(mods[m]) for m in CORE if m in mods),
        sum(nonblank(p) for m, p in mods.items() if m.split(".")[0] == "harness"),
    )
    for (name, ceiling), goal, lines in zip(CEILINGS.items(), GOALS.values(), sizes, strict=True):
        gap = f"{goal:,}, {lines - goal:,} lines to go" if lines > goal else f"{goal:,}, met"
        print(f"{name}: {lines:,} non-blank lines (at most {ceiling:,}; issue 44's goal: {gap})")
        failures += [name] * (lines > ceiling)
    sched = sum(nonblank(mods[m]) for m in SCHEDULING)
    print(
        f"scheduling ({', '.join(SCHEDULING)}): {sched:,} non-blank lines (at most "
        f"{SCHEDULING_LINES})"
    )
    failures += ["scheduling"] * (sched > SCHEDULING_LINES)
    big = sorted(
        (n, m) for m, p in mods.items() if (n := len(formatted(p).splitlines())) > MODULE_LINES
    )
    print(
        f"modules over {MODULE_LINES} lines: " + (", ".join(f"{m} ({n})" for n, m in big) or "none")
    )
    pragmas = sum(
        line.strip() == "# fmt: off" or "# fmt: skip" in line
        for p in mods.values()
        for line in p.read_text().splitlines()
    )
    by_hand = [f"{m}:{i}" for m, p in mods.items() for i in unformatted_blocks(p)]
    print(
        f"`# fmt: skip` and `# fmt: off` blocks: {pragmas}, each a table of values"
        if not by_hand
        else f"left unformatted beyond a table: {', '.join(by_hand)}"
    )
    failures += ["formatting"] * bool(by_hand)
    longs = [f"{m}.{f} ({n})" for m, p in mods.items() for f, n in long_functions(p)]
    print(f"functions over {FUNCTION_LINES} lines: {', '.join(longs) or 'none'}")
    failures += ["module size"] * bool(big) + ["function size"] * bool(longs)
    code, shared = notebook_lines()
    share = shared / code if code else 0.0
    every, every_shared = notebook_lines(code_only=False)
    print(
        f"notebook code lines in more than one notebook: {shared} of {code} ({share:.1%}, "
        f"at most {SHARED_NOTEBOOK_CODE:.0%}); counting every line, the declarations too: "
        f"{every_shared} of {every} ({every_shared / max(every, 1):.1%})"
    )
    failures += ["notebooks"] * (share > SHARED_NOTEBOOK_CODE)
    print("targets: " + ("all met" if not failures else "MISSED: " + ", ".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
