"""Rewrite recorded runs' records into the current format, so that no reader keeps a branch for
an older one. Idempotent: a second run changes nothing.

    python tools/migrate_records.py [folder ...]     (default: results/)

What it rewrites, record by record (``migrate``):

* the GPT's pre-training, once recorded as experiment "pretrain", is "pretrain:gpt";
* a zero-shot record names its heuristic (``config["heuristic"]``: the task, before SST-2 had a
  calibrated one) and the split it scored (``config["examples_split"]``: the task's eval split,
  but RACE's dev, which the chapter has always scored);
* a budgeted plan's zero-shot records (at ee22f51) kept no seed: they drew their examples with
  the scale's fine-tuning seed, which they now name;
* the cpu scale's protocol search (``results/sweeps/cpu_finetune_select.jsonl``, written by
  tools/select_finetune_cpu.py) named its arms by their rows ("pre-trained"): they are named
  as Table 5's arms (``facts.ARMS``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpt1lib.records import load_records  # noqa: E402
from gpt1lib.scales import SCALES  # noqa: E402

#: The cpu search's names of the arms.
SWEEP_ARMS = {
    "pre-trained": "full",
    "no aux LM": "no_aux_lm",
    "from scratch": "no_pretraining",
    "LSTM": "lstm",
}


def migrate(rec: dict) -> dict:
    """One record (or cpu search row) in the current format; a current one is returned as is."""
    rec = dict(rec)
    if rec.get("arm") in SWEEP_ARMS:
        rec["arm"] = SWEEP_ARMS[rec["arm"]]
    if rec.get("experiment") == "pretrain":
        rec["experiment"] = "pretrain:gpt"
    config = rec.get("config")
    if not isinstance(config, dict):
        return rec
    if rec.get("experiment") == "zero_shot":
        task = str(rec.get("task"))
        config = rec["config"] = dict(config)
        config.setdefault("heuristic", task)
        config.setdefault("examples_split", "dev" if task.startswith("race") else rec.get("split"))
    if rec.get("seed") is None and "plan_part" in config and rec.get("scale") in SCALES:
        rec["seed"] = SCALES[rec["scale"]].finetune.seed
    return rec


def migrate_file(path: Path) -> bool:
    """Rewrite one JSON-lines file in the current format; whether it changed."""
    old = path.read_text()
    lines = [json.dumps(migrate(r), default=str) + "\n" for r in load_records(path)]
    new = "".join(lines)
    if new == old:
        return False
    path.write_text(new)
    return True


def migrate_folder(folder: str | Path) -> list[Path]:
    """Migrate every ``*.jsonl`` below ``folder``; the files that changed."""
    return [p for p in sorted(Path(folder).rglob("*.jsonl")) if migrate_file(p)]


if __name__ == "__main__":
    for folder in sys.argv[1:] or [ROOT / "results"]:
        for changed in migrate_folder(folder):
            print(f"migrated {changed}")
