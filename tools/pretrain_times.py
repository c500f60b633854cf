"""Where a recorded run's pre-training units spent their time (issue 43): each unit's wall time
(``run.json``) against its updates at their steady rate, and the rest in parts, from the
seconds each run records at its end (``pretrain.Logger.finish``, split "time").

    python tools/pretrain_times.py results/small

"steady" is an update's seconds after the first (which compiles): (update_seconds -
first_update_seconds) / (updates - 1). "beyond" is the unit's wall time less its updates at
that rate, as a share of the unit: issue 43 asks at most 10%. The rest splits into the set-up
before the first update, the first update's compiling (its time less one steady update), the
validations, the checkpoints, and what the unit did outside ``pretrain`` (the data, the model
built; ``outside``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpt1lib.records import load_records  # noqa: E402

UNITS = {"pretrain:gpt": "03_pretraining", "pretrain:lstm": "11_zero_shot"}


def times(folder: Path) -> list[dict]:
    """One row a pre-training unit of the run in ``folder``."""
    done = json.loads((folder / "run.json").read_text())["done"]
    rows = []
    for unit, chapter in UNITS.items():
        if unit not in done:
            continue
        mine = [
            r
            for r in load_records(folder / f"{chapter}.jsonl")
            if r.get("experiment") == unit and r.get("split") == "time"
        ]
        if not mine:
            rows.append({"unit": unit, "wall": done[unit]["wall_s"], "note": "no time records"})
            continue
        s = {r["metric"].removesuffix("_seconds"): r["value"] for r in mine}
        n = max(r["step"] for r in mine)
        steady = (s["update"] - s["first_update"]) / (n - 1)
        wall = done[unit]["wall_s"]
        inside = s["setup"] + s["update"] + s["eval"] + s["save"]
        rows.append(
            {
                "unit": unit, "wall": wall, "updates": n, "ms/update": 1000 * steady,
                "beyond": wall - n * steady, "beyond%": 100 * (wall - n * steady) / wall,
                "setup": s["setup"], "compiling": s["first_update"] - steady,
                "eval": s["eval"], "save": s["save"], "outside": wall - inside,
            }
        )  # fmt: skip
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, help="a recorded run's folder, e.g. results/small")
    rows = times(ap.parse_args().results)
    cols = list(dict.fromkeys(k for r in rows for k in r))
    print("  ".join(f"{c:>10s}" for c in cols))
    for r in rows:
        cells = (r.get(c, "") for c in cols)
        print("  ".join(f"{v:>10.1f}" if isinstance(v, float) else f"{v!s:>10s}" for v in cells))


if __name__ == "__main__":
    main()
