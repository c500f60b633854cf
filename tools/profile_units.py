"""Where a recorded run's fine-tuning units spend their time beyond the updates (issue 33): some
of a plan's units run as the runner runs them, each timed, optionally under cProfile.

    python tools/profile_units.py --scale small --source bundle --fake-updates
    python tools/profile_units.py --scale small --source bundle --units finetune:mrpc --profile 40

The pre-trained models are fresh ones (their weights do not change a unit's time; nothing is
recorded but under --out, a temporary folder by default). ``--fake-updates`` replaces every
update and forward pass by nothing (scores of zeros): what is left is the CPU side a GPU waits
on, the model built, the examples encoded, the metrics and the records (results/README.md's
figures of it). Without it, the units run whole: on a GPU, the same units as the recorded run's.
Default units: the GPT's fine-tuning units of one run each (chapters 04-08 but RACE, Table 5
from scratch, the objective, layer transfer), in the plan's order. The first unit pays the
process's first-time costs (CUDA's start, imports): on a GPU, name a short one first
(``finetune:sst2``) and read the ones after it.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from finetune_times import group  # beside this file

from gpt1lib import experiments as ex
from gpt1lib import finetune, scoring
from gpt1lib.harness import recipe, runner
from gpt1lib.runtime import pick_device
from gpt1lib.scales import SCALES


def fake_updates() -> None:
    """No update and no forward pass: an update only counted, scores all zeros."""
    finetune.Updates.update = lambda self, items, lr: self._updated(None, lr)

    def predict(model, items, *args, **kwargs):
        return np.zeros((len(items), getattr(model.head, "out_features", 1)), dtype=np.float32)

    scoring.predict = predict


def gpt_units(plan: list[dict]) -> list[str]:
    """The GPT's fine-tuning units of one run each, RACE's apart."""
    return [u["id"] for u in plan if group(u["id"]) == "gpt"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", default="small")
    ap.add_argument("--source", default="bundle", help="the run's data (a bundle, or a folder)")
    ap.add_argument("--corpus", default=None, help="its tokenizer's corpus (default: --source)")
    ap.add_argument("--units", default=None, help="unit ids, comma-separated (default: above)")
    ap.add_argument("--fake-updates", action="store_true", help="time the CPU side alone")
    ap.add_argument("--profile", type=int, default=0, help="print cProfile's top N entries")
    ap.add_argument("--out", type=Path, default=None, help="where records go (default: a temp)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # the data checks of a model that learned nothing
    S, device = SCALES[args.scale], pick_device()
    tok = ex.scale_tokenizer(S, args.corpus or args.source)
    plan = recipe.units(S, recipe.available(S, args.source))
    ids = args.units.split(",") if args.units else gpt_units(plan)
    unknown = set(ids) - {u["id"] for u in plan}
    if unknown:
        raise SystemExit(f"--units: {sorted(unknown)} are not units of {S.name}'s plan")
    if args.fake_updates:
        fake_updates()
    out = args.out or Path(tempfile.mkdtemp(prefix="profile_units."))
    run = runner.Run(S, args.source, args.corpus or args.source, out, out / "kept", device, tok)
    run.models = {a: ex.new_model(S, tok.vocab_size, a).to(device) for a in ("gpt", "lstm")}
    prof = cProfile.Profile() if args.profile else None
    total = 0.0
    for u in (u for u in plan if u["id"] in ids):
        t = time.perf_counter()
        if prof:
            prof.enable()
        runner.RUNNERS.get(recipe.kind(u), runner._finetune)(run, u)
        if prof:
            prof.disable()
        total += (took := time.perf_counter() - t)
        print(f"{u['id']}: {took:.2f} s", flush=True)
    how = "updates and forward passes faked" if args.fake_updates else "whole"
    print(f"{len(ids)} units, {total:.1f} s ({how}, {device})")
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(args.profile)


if __name__ == "__main__":
    main()
