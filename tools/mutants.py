"""A mutation check of the modules behind the book's claims (issue 47), run by hand, not in CI.

Each mutant is one deliberate bug, a few characters of one module changed, that a reader of
the results would not want to go unnoticed. For each, the checkout's files are copied to a
fresh folder, the bug is put in, and the tests that cover the module run there (``-x``, the
first failure ends them); a mutant they let pass survives.

    python tools/mutants.py               # every mutant: killed or survived, and the score
    python tools/mutants.py collate       # those whose name holds "collate"

About 20 minutes on two CPU cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FINDINGS = ["tests/test_findings.py"]
STATS = ["tests/test_stats.py"]
FINETUNE = ["tests/test_finetune.py"]
BATCHES = ["tests/test_transforms.py", "tests/test_finetune.py"]
WRITES = ["tests/test_crash_safety.py"]
LE0, HI0 = "        elif lo <= 0:", "        elif hi <= 0:"
#: name -> (module, [(text, its replacement)], the tests that cover the module)
MUTANTS: dict[str, tuple[str, list[tuple[str, str]], list[str]]] = {
    "verdict: an interval straddling 0 shows the finding": ("findings", [(LE0, HI0)], FINDINGS),
    "verdict: an interval touching 0 shows it": (
        "findings",
        [(LE0, "        elif lo < 0:")],
        FINDINGS,
    ),
    "verdict: a NaN bound is not checked": (
        "findings",
        [("if np.isnan(lo) or np.isnan(hi):", "if False:")],
        FINDINGS,
    ),
    "verdict: the paper's size is not asked": (
        "findings",
        [("elif size is not None and value < size:", "elif False:")],
        FINDINGS,
    ),
    "verdict: too few tasks left still shows": (
        "findings",
        [("    if left < least:", "    if False:")],
        FINDINGS,
    ),
    "verdict: treatment confounds ignored": (
        "findings",
        [("] if treatment else []", "] if False else []")],
        FINDINGS,
    ),
    "findings: the full row's outcomes drop tasks": (
        "findings",
        [("learned_nothing(other, theirs,", "learned_nothing(other, full,")],
        FINDINGS,
    ),
    "findings: below chance read off the low bound": (
        "findings",
        [('r["hi"] < c:', 'r["lo"] < c:')],
        FINDINGS,
    ),
    "stats: a 90% interval": (
        "stats",
        [("tail = 100 * (1 - level) / 2", "tail = 100 * (1 - 0.90) / 2")],
        STATS,
    ),
    "stats: a paired difference not paired": (
        "stats",
        [("- fn(preds_b[i], labels[i])", "- fn(preds_b[i[::-1]], labels[i[::-1]])")],
        STATS,
    ),
    "stats: Matthews correlation's sign": (
        "stats",
        [("num = c * s - (t * q).sum(1)", "num = c * s + (t * q).sum(1)")],
        STATS,
    ),
    "collate: a batch laid out answer by answer": (
        "transforms",
        [
            (
                "seqs = [q for e in items for q in e.seqs]",
                "seqs = [e.seqs[j] for j in range(n_seq) for e in items]",
            )
        ],
        BATCHES,
    ),
    "collate: the extract one token early": (
        "transforms",
        [("(ids, real, lengths - 1)", "(ids, real, lengths - 2)")],
        BATCHES,
    ),
    "atomic_path: the file written in place": (
        "files",
        [
            ('    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")', "    tmp = path"),
            ("        tmp.unlink(missing_ok=True)", "        pass"),
        ],
        WRITES,
    ),
    "checkpoint: the folder written in place": (
        "checkpoint",
        [
            (
                '    tmp = folder.with_name(f".tmp-{folder.name}-{os.getpid()}")\n'
                "    shutil.rmtree(tmp, ignore_errors=True)",
                "    tmp = folder",
            ),
            (
                "    if folder.exists():\n        os.rename(folder, old)\n"
                "    os.rename(tmp, folder)",
                "",
            ),
        ],
        WRITES,
    ),
    "checkpoint: resumed without its sha256s": (
        "checkpoint",
        [('    verify_files(folder, state.get("files", {}))', "    pass")],
        ["tests/test_bad_checkpoints.py"],
    ),
    "heads: similarity reads one order": (
        "heads",
        [("h = h.sum(1)  # the two orders' extract vectors, added", "h = h[:, 0]")],
        FINETUNE,
    ),
    "heads: a dropout mask per answer": (
        "heads",
        [("shape = (h.size(0), 1, h.size(-1)) if h.dim() == 3 else h.shape", "shape = h.shape")],
        FINETUNE,
    ),
    "heads: the last index, not _classify_": (
        "heads",
        [("h = hidden[rows, batch.extract]", "h = hidden[rows, -1]")],
        FINETUNE,
    ),
    "heads: n_transfer None transfers nothing": (
        "heads",
        [("        n_transfer = src.config.n_layer", "        n_transfer = -1")],
        FINETUNE,
    ),
    "loss: L2 summed over the batch": (
        "loss",
        [("(scores.float(), labels)", "(scores.float(), labels, reduction='sum')")],
        FINETUNE,
    ),
    "loss: the auxiliary LM dropped": (
        "loss",
        [("    return l2 + lm_coef * l1, l2, l1", "    return l2, l2, l1")],
        FINETUNE,
    ),
    "finetune: trained on L2, L3 logged": (
        "finetune",
        [("        return parts[0]\n", "        return parts[1]\n")],
        FINETUNE,
    ),
    "finetune: no warm-up or decay": (
        "finetune",
        [("lr = cfg.lr * warmup_linear(steps.done / total, cfg.warmup)", "lr = cfg.lr")],
        FINETUNE,
    ),
}


def _copy() -> Path:
    """The checkout's files (what git tracks and does not ignore) in a fresh folder."""
    out = Path(tempfile.mkdtemp(prefix="mutant-"))
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in (f for f in files if f and (ROOT / f).is_file()):
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, out / name)
    return out


def run(name: str) -> tuple[bool, float, str]:
    """(killed, seconds, the tests' last line) for mutant ``name``."""
    module, edits, tests = MUTANTS[name]
    folder = _copy()
    try:
        path = folder / "gpt1lib" / f"{module}.py"
        text = path.read_text()
        for old, new in edits:
            if text.count(old) != 1:
                raise SystemExit(f"{name}: {old!r} is not in {module}.py once: update the mutant")
            text = text.replace(old, new)
        path.write_text(text)
        env = os.environ | {"PYTHONPATH": str(folder), "HF_HUB_OFFLINE": "1"}
        t = time.perf_counter()
        got = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
            cwd=folder, env=env, capture_output=True, text=True,
        )  # fmt: skip
        last = (got.stdout.strip().splitlines() or ["(no output)"])[-1]
        return got.returncode != 0, time.perf_counter() - t, last
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("only", nargs="?", default="", help="run the mutants whose name holds this")
    names = [n for n in MUTANTS if ap.parse_args().only in n]
    killed = 0
    for name in names:
        dead, seconds, last = run(name)
        killed += dead
        print(
            f"{'killed  ' if dead else 'SURVIVED'} {seconds:5.0f} s  {name}  ({last})", flush=True
        )
    print(f"score: {killed} of {len(names)} killed")


if __name__ == "__main__":
    main()
