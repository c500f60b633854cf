"""Where a recorded run's fine-tuning time went (issue 33), and how much faster it ran than the
eager rates predict.

    python tools/finetune_times.py results/small --source bundle

Each fine-tuning unit's wall time (``run.json``) splits, from its records, into the updates
(``update_seconds``), scoring (the last epoch's ``wall_time`` less the updates) and the rest;
the rest into the set-up (the model built and moved, the examples encoded: ``setup_seconds``,
recorded since 4dcdb6d) and what came after (the tasks scored beside, the records written).
Units are summed by group: the GPT's (chapters 04-08 but RACE, Table 5 from scratch, the
objective, layer transfer), RACE's and the LSTM's. Beside each group: its prediction from the
eager rates issue 33 was filed against (``recipe.RATES`` without the replayed-step rates, a
run's cost beyond its updates and scoring at the 1.0 s assumed then), and how many times
faster it ran.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from gpt1lib import experiments as ex
from gpt1lib.harness import recipe
from gpt1lib.records import load_records
from gpt1lib.runtime import GPU_PAD_MULTIPLE
from gpt1lib.scales import SCALES

#: A run's cost beyond its updates and scoring when issue 33 was filed (ab661a0's RATES).
EAGER_RUN_S = 1.0
PARTS = ("wall", "updates", "scoring", "rest", "setup", "after")


def group(uid: str) -> str | None:
    """The group a unit is summed in, or None (pre-training, selection, zero-shot)."""
    if recipe.PART[recipe.kind({"id": uid})] not in ("finetune", "ablations", "transfer"):
        return None
    return "lstm" if ":lstm:" in uid else "race" if ":race" in uid else "gpt"


def measured(folder: Path) -> dict[str, dict[str, float | None]]:
    """Each fine-tuning unit's parts, in seconds (None: not recorded at that commit)."""
    done = json.loads((folder / "run.json").read_text())["done"]
    recs = defaultdict(list)
    for path in folder.glob("*.jsonl"):
        for r in load_records(path):
            recs[(r.get("config") or {}).get("plan_part")].append(r)
    out = {}
    for uid, d in done.items():
        if group(uid) is None:
            continue
        mine = {r["metric"]: r for r in recs[uid] if r.get("split") == "train_loss"}
        last = max(r["wall_time"] for r in recs[uid] if r["metric"] == "loss")
        updates = mine["update_seconds"]["value"]
        rest = d["wall_s"] - last
        setup = mine["setup_seconds"]["value"] if "setup_seconds" in mine else None
        after = rest - setup if setup is not None else None
        parts = (d["wall_s"], updates, last - updates, rest, setup, after)
        out[uid] = dict(zip(PARTS, parts, strict=True))
    return out


def eager(scale: str, source: str, corpus: str) -> dict[str, float]:
    """Each unit's seconds predicted from issue 33's eager rates on an H100."""
    S, (rates, _) = SCALES[scale], recipe.rates_for(scale, "H100") or ({}, "")
    if not rates:  # no H100 rates at this scale: nothing to predict
        return {}
    rates = {k: v for k, v in rates.items() if not k.startswith("ft_graph")}
    rates["ft_run_s"] = EAGER_RUN_S
    plan = recipe.units(S, recipe.available(S, source))
    sizes = recipe.sizes(S, source, ex.scale_tokenizer(S, corpus), GPU_PAD_MULTIPLE)
    recipe.predict(plan, S, rates, sizes)
    return {u["id"]: u["seconds"] for u in plan}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, help="a recorded run's folder, e.g. results/small")
    ap.add_argument("--source", default="bundle", help="the data the run read (its sizes)")
    ap.add_argument("--corpus", default=None, help="its tokenizer's corpus (default: --source)")
    args = ap.parse_args()
    got = measured(args.results)
    scale = json.loads((args.results / "manifest.json").read_text())
    scale = next(iter(scale.values()))["parameters"]["scale"]
    pred = eager(scale, args.source, args.corpus or args.source)
    print(f"{'group':6} {'units':>5} " + " ".join(f"{p:>8}" for p in PARTS) + "    eager  faster")
    for name in ("gpt", "race", "lstm", "all"):
        ids = [u for u in got if name in (group(u), "all")]
        sums = [sum(got[u][p] for u in ids) if all(got[u][p] is not None for u in ids) else None
                for p in PARTS]  # fmt: skip
        cells = " ".join(f"{s:8.1f}" if s is not None else f"{'-':>8}" for s in sums)
        guess = sum(pred[u] for u in ids) if pred else None
        faster = f"{guess:8.1f} {guess / sums[0]:6.2f}x" if guess else f"{'-':>8} {'-':>7}"
        print(f"{name:6} {len(ids):5d} {cells} {faster}")


if __name__ == "__main__":
    main()
