"""A fine-tuning rate chosen by measurement, on examples held out from *train*, never dev.

The paper's protocol (a rate of 6.25e-5, 3 epochs, 0.2% warm-up) was made for a 117 M-parameter
model pre-trained for a month; a smaller model, or one trained from scratch, may want another
rate. So the recorded run (``harness.recipe``) searches the same way for every row of Table 5
it runs (the pre-trained transformer, from scratch, the LSTM, and without the auxiliary LM):

* the data: ``Scale.selection_examples`` training examples of each of ``Scale.selection_tasks``
  (CoLA and STS-B at ``small``), of which ``HELD_OUT`` (15%) are set aside (``carve``); a trial
  fine-tunes on the rest and is scored by the mean of the tasks' metrics on the part set aside;
* the search: each rate of ``RATES`` at the paper's warm-up and epochs (``PAPER``, ``select``);
* the choice (``choose``): the best-scoring rate, unless the paired 95% interval of its lead
  over another rate includes 0; such rates are tied with it, and the tie is broken by
  ``TIE_RULE``, fixed before any run: the rate nearest the paper's.

Each trial is one record (experiment ``selection:<arm>``, metric ``selection_score``, its
settings, each task's metric and each held-out example's prediction in ``config``), which
chapter 12 shows; ``chosen`` reads each arm's choice back from them (``choose``) and
``with_chosen`` makes it the scale's.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace

import numpy as np

from .experiments import ARM_SETTINGS
from .finetune import FinetuneRun, finetune
from .records import PER_EXAMPLE, make_record
from .runtime import gathered_warnings
from .scales import ARMS, Scale
from .stats import mean_difference_interval
from .tasks import DataWarning, get_task, load_examples

HELD_OUT = 0.15
RATES = (6.25e-5, 2.5e-4, 1e-3)  # the paper's rate, four times it, sixteen times it
PAPER = {"warmup": 0.002, "epochs": 3}  # each trial's schedule: the paper's
PAPER_LR = RATES[0]
METRIC = "selection_score"
#: How a tie is broken, fixed before the run (issue 43) and stated on chapter 12's page.
TIE_RULE = (
    "the rate that scores best on the held-out examples is chosen, unless the paired 95% "
    "interval of its lead over another rate includes 0: those rates tie with it, and of the "
    "tied rates the one nearest the paper's 6.25e-5 (on a log scale; the lower where two are "
    "as near) is chosen, so that the paper's protocol stands unless the examples say otherwise"
)


def carve(task: str, source, limit: int | None, seed: int = 0) -> tuple[list, list]:
    """``limit`` training examples of ``task`` (seeded), split into the part fine-tuned on and
    the ``HELD_OUT`` part a trial is scored on."""
    examples = load_examples(task, "train", source, limit, seed)
    order = list(range(len(examples)))
    random.Random(seed + 1).shuffle(order)
    n = max(1, int(len(examples) * HELD_OUT))
    return [examples[i] for i in order[n:]], [examples[i] for i in order[:n]]


def selection_data(source, limits: dict, seed: int = 0) -> dict[str, tuple[list, list]]:
    """Each task of ``limits`` (task -> training examples read) ``carve``d."""
    return {task: carve(task, source, limit, seed) for task, limit in limits.items()}


def _settings(row: dict) -> dict:
    return {k: row["config"][k] for k in ("lr", "warmup", "epochs")}


def best(rows: list[dict]) -> dict:
    """The settings of the best-scoring record of ``rows`` (the first of equal scores)."""
    if not rows:
        raise ValueError("no selection records to choose from: run the search first")
    return _settings(max(rows, key=lambda r: r["value"]))


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


def select(S: Scale, arm: str, model, tok, data: dict, base: FinetuneRun) -> list[dict]:
    """The search for ``arm``: each rate of ``RATES`` fine-tunes ``model`` (the arm's
    pre-trained model) on ``data`` (task -> ``carve``'s parts) with the arm's protocol at the
    paper's schedule and ``base``'s device and seed, scored on the held-out part. Returns one
    record a trial."""
    if arm not in ARMS:
        raise ValueError(f"arm={arm!r}: use one of {ARMS}")
    out: list[dict] = []
    protocol = S.finetune_for(arm, seed=base.cfg.seed, **ARM_SETTINGS[arm])
    for lr in RATES:
        cfg = replace(protocol, lr=lr, **PAPER, experiment=f"selection:{arm}")
        metrics, examples, outcomes = {}, {}, {}
        with gathered_warnings(DataWarning):
            for task, (fit, held) in data.items():
                run = replace(base, task=task, cfg=cfg, examples=(fit, {"held_out": held}))
                res = finetune(model, tok, replace(run, scale=S.name, out_dir=None))
                metrics[task] = res.final[get_task(task).metrics[0]]
                examples[task] = [len(fit), len(held)]
                kept = next(r for r in res.records if r["metric"] == PER_EXAMPLE)
                outcomes[task] = kept[PER_EXAMPLE]
        config = {"arm": arm, "stage": "rate", "lr": lr, "warmup": cfg.warmup}
        config |= {"epochs": cfg.epochs, "batch_size": cfg.batch_size}
        config |= {"metrics": metrics, "examples": examples, "outcomes": outcomes}
        where = {k: res.records[0][k] for k in ("commit", "device", "date")}
        score = sum(metrics.values()) / len(metrics)
        out.append(
            make_record(
                METRIC,
                score,
                experiment=f"selection:{arm}",
                scale=S.name,
                task="+".join(data),
                split="held_out",
                seed=cfg.seed,
                config=config,
                **where,
            )
        )
    return out


def chosen(records) -> dict[str, dict]:
    """Arm -> the settings its selection records choose (``choose``; arms with none left out)."""
    rows = [r for r in records if r.get("metric") == METRIC]
    arms = dict.fromkeys(r["config"]["arm"] for r in rows)
    return {arm: choose([r for r in rows if r["config"]["arm"] == arm])["settings"] for arm in arms}


def with_chosen(S: Scale, picked: dict[str, dict]) -> Scale:
    """``S`` with each arm's protocol as ``picked``: the full arm's is every chapter's."""
    arms = {arm: {**S.arms.get(arm, {}), **v} for arm, v in picked.items() if arm != "full"}
    full = replace(S.finetune, **picked["full"]) if "full" in picked else S.finetune
    return replace(S, finetune=full, arms={**S.arms, **arms})
