"""How a fine-tuning protocol is chosen from its trials on held-out training examples: the
rates searched, the rule that breaks a tie, and the choice. ``selection`` runs the trials."""

from __future__ import annotations

import math

import numpy as np

from .stats import mean_difference_interval
from .tasks import get_task

RATES = (6.25e-5, 2.5e-4, 1e-3)  # the paper's rate, four times it, sixteen times it
PAPER = {"warmup": 0.002, "epochs": 3}  # each trial's schedule: the paper's
PAPER_LR = RATES[0]
#: How a tie is broken, stated on chapter 12's page.
TIE_RULE = (
    "the rate that scores best on the held-out examples is chosen, unless the paired 95% "
    "interval of its lead over another rate includes 0: those rates tie with it, and of the "
    "tied rates the one nearest the paper's 6.25e-5 (on a log scale; the lower where two are "
    "as near) is chosen, so that the paper's protocol stands unless the examples say otherwise"
)


def _settings(row: dict) -> dict:
    return {k: row["config"][k] for k in ("lr", "warmup", "epochs")}


def lead(a: dict, b: dict) -> tuple[float, float]:
    """The paired 95% interval of trial ``a``'s score minus trial ``b``'s (the mean over the
    tasks of each task's metric difference, on the same held-out examples); NaN where the
    records kept no predictions."""
    ours, theirs = (r["config"].get("outcomes") or {} for r in (a, b))
    tasks = a["config"].get("metrics") or {}
    if not tasks or not all(t in ours and t in theirs for t in tasks):
        return (math.nan, math.nan)
    arms = []
    for t in tasks:  # (metric, a's predictions, b's, the labels): the same examples, in order
        pair = (ours[t]["predictions"], theirs[t]["predictions"], ours[t]["labels"])
        arms.append((get_task(t).metrics[0], *map(np.asarray, pair)))
    return mean_difference_interval(arms)


def choose(rows: list[dict]) -> dict:
    """One arm's trials (records) -> its choice under ``TIE_RULE``: ``settings`` (the rate,
    warm-up and epochs chosen) and the trial they are (``chosen``), the ``best`` and
    ``runner_up`` trials, the interval of the best's lead over the runner-up (``lead``) and the
    rates ``tied`` with the best."""
    if not rows:
        raise ValueError("no selection records to choose from: run the search first")
    ranked = sorted(rows, key=lambda r: -r["value"])
    top, others = ranked[0], ranked[1:]
    leads = [lead(top, r) for r in others]
    tied = [r for r, (lo, _) in zip(others, leads, strict=True) if lo <= 0]
    near = min(
        [top, *tied], key=lambda r: (abs(math.log(r["config"]["lr"] / PAPER_LR)), r["config"]["lr"])
    )
    return {
        "settings": _settings(near),
        "chosen": near,
        "best": top,
        "runner_up": others[0] if others else None,
        "lead": leads[0] if leads else (math.nan, math.nan),
        "tied": [r["config"]["lr"] for r in tied],
    }
