"""A fine-tuning protocol chosen by measurement, on examples held out from *train*, never dev.

The paper's protocol (a rate of 6.25e-5, 3 epochs, 0.2% warm-up) was made for a 117 M-parameter
model pre-trained for a month; a smaller model, or one trained from scratch, may want another.
So the recorded run (``harness.recipe``) searches the same way for every arm of Table 5 (the
pre-trained transformer, the same without the auxiliary LM, from scratch, and the LSTM):

* the data: ``Scale.selection_examples`` training examples of each of ``Scale.selection_tasks``
  (CoLA, STS-B and SST-2 at ``small``), of which ``HELD_OUT`` (15%) are set aside (``carve``);
  a trial fine-tunes on the rest and is scored by the mean of the tasks' metrics on the part
  set aside;
* the search, coordinate by coordinate (``next_trial``): the rate (``RATES``) at the paper's
  0.2% warm-up and 3 epochs, then at the best rate the warm-up (``WARMUPS``), then at the best
  warm-up the epochs (``EPOCHS``): five trials an arm, in two stages (``stage``).

Each trial is one record (experiment ``selection:<arm>``, metric ``selection_score``, its
settings and each task's metric in ``config``), which chapter 12 shows; ``chosen`` reads the
best setting of each arm back from them and ``with_chosen`` makes it the scale's.
"""

from __future__ import annotations

import random
from dataclasses import replace

from .experiments import ARM_SETTINGS
from .finetune import finetune
from .records import make_record
from .runtime import gathered_warnings
from .scales import ARMS, Scale
from .tasks import DataWarning, get_task, load_examples

HELD_OUT = 0.15
RATES = (6.25e-5, 2.5e-4, 1e-3)  # the first stage, at the paper's warm-up and epochs
WARMUPS = (0.002, 0.1)  # then, at the best rate: the paper's 0.2% of training, or 10%
EPOCHS = (3, 6)  # then, at the best warm-up: the paper's 3, or 6
STAGES = ("rate", "schedule")
#: The epochs of each stage's trials, in order (what a plan predicts a stage's time from).
STAGE_EPOCHS = {"rate": [EPOCHS[0]] * len(RATES),
                "schedule": [EPOCHS[0]] * (len(WARMUPS) - 1) + list(EPOCHS[1:])}  # fmt: skip
METRIC = "selection_score"


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


def next_trial(stage: str, rows: list[dict]) -> dict | None:
    """The next setting ``stage`` tries after the arm's records ``rows`` (None: the stage is
    done): every rate at the paper's schedule; then at the best rate each warm-up, then at the
    best of those each number of epochs."""
    first = {"warmup": WARMUPS[0], "epochs": EPOCHS[0]}
    if stage == "rate":
        todo = [{"lr": lr, **first} for lr in RATES]
    else:
        lr = best(rows)["lr"]
        todo = [{"lr": lr, "warmup": w, "epochs": EPOCHS[0]} for w in WARMUPS]
        short = [r for r in rows if _settings(r) in todo]
        if len(short) == len(WARMUPS):
            todo += [{**best(short), "epochs": e} for e in EPOCHS]
    tried = [_settings(r) for r in rows]
    return next((t for t in todo if t not in tried), None)


def best(rows: list[dict]) -> dict:
    """The settings of the best-scoring record of ``rows`` (the first on a tie)."""
    if not rows:
        raise ValueError("no selection records to choose from: run the rate stage first")
    return _settings(max(rows, key=lambda r: r["value"]))


def stage(S: Scale, arm: str, name: str, model, tok, data: dict, *, done: list[dict] = (),
          seed: int = 0, **kw) -> list[dict]:  # fmt: skip
    """The trials of stage ``name`` for ``arm`` (``next_trial``), fine-tuning ``model`` (the
    arm's pre-trained model) on ``data`` (task -> ``carve``'s parts); ``done``: the arm's
    records so far. Returns one record a trial; ``kw``: ``finetune``'s device and progress."""
    if arm not in ARMS or name not in STAGES:
        raise ValueError(f"arm={arm!r}, stage={name!r}: use one of {ARMS} and of {STAGES}")
    out: list[dict] = []
    while (settings := next_trial(name, [*done, *out])) is not None:
        cfg = replace(S.finetune_for(arm, seed=seed, **ARM_SETTINGS[arm]), **settings)
        cfg = replace(cfg, experiment=f"selection:{arm}")
        metrics, examples = {}, {}
        with gathered_warnings(DataWarning):
            for task, (fit, held) in data.items():
                res = finetune(model, tok, task, fit, {"held_out": held}, cfg, scale=S.name, **kw)
                metrics[task] = res.final[get_task(task).metrics[0]]
                examples[task] = [len(fit), len(held)]
        config = {"arm": arm, "stage": name, **settings, "batch_size": cfg.batch_size}
        config |= {"metrics": metrics, "examples": examples}
        score = sum(metrics.values()) / len(metrics)
        where = {k: res.records[0][k] for k in ("commit", "device", "date")}
        out.append(make_record(METRIC, score, experiment=f"selection:{arm}", scale=S.name,
                               task="+".join(data), split="held_out", seed=seed,
                               config=config, **where))  # fmt: skip
    return out


def chosen(records) -> dict[str, dict]:
    """Arm -> the settings its selection records score best (arms with none left out)."""
    rows = [r for r in records if r.get("metric") == METRIC]
    arms = dict.fromkeys(r["config"]["arm"] for r in rows)
    return {arm: best([r for r in rows if r["config"]["arm"] == arm]) for arm in arms}


def with_chosen(S: Scale, picked: dict[str, dict]) -> Scale:
    """``S`` with each arm's protocol as ``picked``: the full arm's is every chapter's."""
    arms = {arm: {**S.arms.get(arm, {}), **v} for arm, v in picked.items() if arm != "full"}
    full = replace(S.finetune, **picked["full"]) if "full" in picked else S.finetune
    return replace(S, finetune=full, arms={**S.arms, **arms})
