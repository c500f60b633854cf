"""The numbers do not move (issue 44): a redesign of the library changes how the code reads,
not what it computes. Two snapshots, written by ``python tests/test_numbers_unmoved.py`` with
the code at 5eeaa53, before the redesign:

* ``numbers/smoke_reproduce.json``: every metric of a smoke ``reproduce`` (the whole recipe,
  53 units, on the fixtures' bundle, one thread): its key (chapter file, experiment, task,
  split, metric, step, seed), its value and a digest of its per-example outcomes. Timings
  (``*_seconds``, ``tokens_per_s``, the ``time`` split) are left out: they are the machine's.
* ``numbers/pages.json``: the text of every table the results pages draw from the committed
  records (``results/``): the verdict box, the findings, Tables 2-5 and their companions.
"""

import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOTS = Path(__file__).resolve().parent / "numbers"
TIMING = ("_seconds", "tokens_per_s")


def reproduce_numbers(results: Path) -> dict[str, list]:
    """Each metric of a run's records, in the order written, keyed by what it measures."""
    out = {}
    for path in sorted(results.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if r["metric"].endswith(TIMING) or r["split"] == "time":
                continue
            key = [path.name, r["experiment"], r["task"], r["split"], r["metric"], r["step"]]
            outcome = json.dumps(r.get("per_example"), sort_keys=True).encode()
            value = [r["value"], hashlib.sha256(outcome).hexdigest()[:16]]
            out.setdefault(json.dumps([*key, r["seed"]]), []).append(value)
    return out


def _same(got: list, want: list) -> bool:
    """The same values (floats to 1e-9, relative) and the same outcomes' digests."""
    if len(got) != len(want):
        return False
    for (value, digest), (wanted, wanted_digest) in zip(got, want, strict=True):
        if digest != wanted_digest:
            return False
        if isinstance(wanted, float) and isinstance(value, float):
            if not (
                math.isclose(value, wanted, rel_tol=1e-9)
                or value == wanted
                or (math.isnan(value) and math.isnan(wanted))
            ):
                return False
        elif value != wanted:
            return False
    return True


def run_smoke(tmp: Path) -> Path:
    """A smoke ``reproduce`` on the fixtures' bundle in a process of its own, on one thread."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    env |= {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    bundle = tmp / "bundle"
    commands = [
        ["-m", "gpt1lib.harness.bundle", "--scale", "smoke", "--source", "fixture"],
        ["-m", "gpt1lib.harness.reproduce", "--scale", "smoke", "--source", str(bundle)],
    ]
    commands[0] += ["--out", str(bundle)]
    commands[1] += ["--corpus", str(bundle), "--out-dir", str(tmp / "runs")]
    commands[1] += ["--results", str(tmp / "results")]
    for command in commands:
        done = subprocess.run(
            [sys.executable, *command], env=env, cwd=tmp, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return tmp / "results" / "smoke"


def page_tables() -> dict[str, str]:
    """The text of each table the intro, the glance page and chapters 09-12 draw from the
    committed records."""
    from gpt1lib import baselines, findings, labels, paper, verdict
    from gpt1lib.records import read_records

    records = read_records(ROOT / "results")
    tables = {
        "verdict box": verdict.verdict_box(records),
        "recorded runs": labels.recorded_runs(ROOT / "results"),
        "findings": findings.findings(records),
        "full row averages": paper.full_row_averages(records),
        "summary": paper.summary_table(records),
        "one answer": baselines.constant_answers(records),
        "Table 5 examples": paper.ablation_examples(records),
        "Table 5 deltas": paper.ablation_deltas(records),
        "layer transfer gains": findings.layer_transfer_gains(records),
        "zero-shot last": findings.zero_shot_last(records),
    }
    for number in "234":
        tables[f"Table {number}"] = paper.paper_table(
            number, records, intervals=True, examples=True
        )
    for run, table in paper.ablation_tables(records, intervals=True).items():
        tables[f"Table 5, {run}"] = table
    return {k: v if isinstance(v, str) else v.to_string() for k, v in tables.items()}


def test_the_results_pages_show_the_same_numbers():
    want = json.loads((SNAPSHOTS / "pages.json").read_text())
    got = page_tables()
    assert sorted(got) == sorted(want)
    for name, text in want.items():
        assert got[name] == text, name


def test_a_smoke_reproduce_gives_the_same_metrics(tmp_path):
    want = json.loads((SNAPSHOTS / "smoke_reproduce.json").read_text())
    got = reproduce_numbers(run_smoke(tmp_path))
    assert sorted(got) == sorted(want)  # the same metrics, no more, no fewer
    moved = [k for k in want if not _same(got[k], want[k])]
    assert not moved, f"{len(moved)} of {len(want)} moved, e.g. {moved[:3]}"


if __name__ == "__main__":  # write the snapshots (only before a redesign, never to pass one)
    import tempfile

    SNAPSHOTS.mkdir(exist_ok=True)
    (SNAPSHOTS / "pages.json").write_text(json.dumps(page_tables(), indent=1) + "\n")
    with tempfile.TemporaryDirectory() as tmp:
        numbers = reproduce_numbers(run_smoke(Path(tmp)))
    (SNAPSHOTS / "smoke_reproduce.json").write_text(json.dumps(numbers, indent=0) + "\n")
