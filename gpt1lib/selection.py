"""A fine-tuning rate chosen by measurement, on examples held out from *train*, never dev.

For each row of Table 5 it runs (``harness.recipe``), each rate of ``RATES`` at the paper's
warm-up and epochs (``PAPER``) fine-tunes on ``Scale.selection_examples`` training examples of
each of ``Scale.selection_tasks`` less the ``HELD_OUT`` part (``selection_data``), and is
scored by the mean of the tasks' metrics on that part (``select``, one record a trial).
``choose`` picks a rate under ``choice.TIE_RULE``; ``with_chosen`` makes the choices the scale's.
"""

from __future__ import annotations

import random
from dataclasses import replace

from .choice import PAPER, RATES, choose
from .experiments import arm_protocol
from .finetune import FinetuneRun, finetune
from .records import PER_EXAMPLE, make_record
from .runtime import gathered_warnings
from .scales import Scale
from .tasks import DataWarning, get_task, load_examples

HELD_OUT = 0.15
METRIC = "selection_score"


def selection_data(source, limits: dict, seed: int = 0) -> dict[str, tuple[list, list]]:
    """Task -> (the part fine-tuned on, the ``HELD_OUT`` part) of ``limits[task]`` examples."""
    data = {}
    for task, limit in limits.items():
        examples = load_examples(task, "train", source, limit, seed)
        order = list(range(len(examples)))
        random.Random(seed + 1).shuffle(order)
        n = max(1, int(len(examples) * HELD_OUT))
        data[task] = [examples[i] for i in order[n:]], [examples[i] for i in order[:n]]
    return data


def select(S: Scale, arm: str, model, tok, data: dict, base: FinetuneRun) -> list[dict]:
    """The search for ``arm``: each rate of ``RATES`` fine-tunes ``model`` on ``data``
    (``selection_data``) with the arm's protocol at the paper's schedule, scored on the held-out
    part. Returns one record a trial."""
    out: list[dict] = []
    protocol = arm_protocol(S, arm, base.cfg.seed, f"selection:{arm}")
    for lr in RATES:
        cfg = replace(protocol, lr=lr, **PAPER)
        metrics, examples, outcomes = {}, {}, {}
        with gathered_warnings(DataWarning):
            for task, (fit, held) in data.items():
                run = replace(base, task=task, cfg=cfg, examples=(fit, {"held_out": held}))
                res = finetune(model, tok, replace(run, scale=S.name, out_dir=None))
                metrics[task] = res.final[get_task(task).metrics[0]]
                examples[task] = [len(fit), len(held)]
                kept = next(r for r in res.records if r["metric"] == PER_EXAMPLE)
                outcomes[task] = kept[PER_EXAMPLE]
        schedule = {k: getattr(cfg, k) for k in ("lr", "warmup", "epochs", "batch_size")}
        tried = {"metrics": metrics, "examples": examples, "outcomes": outcomes}
        config = {"arm": arm, "stage": "rate", **schedule, **tried}
        where = {k: res.records[0][k] for k in ("commit", "device", "date")}
        score = sum(metrics.values()) / len(metrics)
        fields = {"experiment": cfg.experiment, "scale": S.name, "task": "+".join(data)}
        fields.update(split="held_out", seed=cfg.seed, config=config, **where)
        out.append(make_record(METRIC, score, **fields))
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
