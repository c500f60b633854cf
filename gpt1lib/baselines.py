"""What a score is read against: chance, and the best score of one answer given to every
example, both on the evaluation's own labels (MRPC's F1 is 81.2 for answering "paraphrase")."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .evaluations import (
    chance,
    final_metrics,
    format_value,
    frame,
    how_many,
    one_answer,
    one_answer_score,
)
from .facts import ABLATIONS
from .labels import run_label
from .loss import prior_loss
from .tasks import TASKS


def marked_cell(row: dict) -> str:
    """``format_value`` of a final evaluation, marked "≤ one answer" where it ``shows_nothing``."""
    said = format_value(row["value"], row["lo"], row["hi"])
    return said + " ≤ one answer" * shows_nothing(row["task"], row)


def baseline_cell(row: dict) -> str:
    """A ``with_baselines`` row's chance and one answer's score, "57.8 / 81.2"."""
    c, one = row["chance"], row["one answer"]
    return "?" if one != one else f"{c:.1f} / {one:.1f}"


#: Said under a table whose cells ``marked_cell`` made.
MARK = (
    "chance: answering at random; one answer: the best score of one answer given to every "
    "example, both on the run's evaluation labels; ≤ one answer: the score's 95% interval "
    "reaches the one answer's score, or the model gave one answer to 90% or more of the "
    "examples: it shows nothing learned"
)


#: The experiments a fine-tuning evaluation is recorded under, and how a page names them.
ROWS = {"finetune": "fine-tuning (chapters 05-08)", **{v: k for k, v in ABLATIONS.items()}}


def constant_answers(records) -> pd.DataFrame:
    """Every final fine-tuning evaluation (chapters 05-08, Table 5) whose model gave one answer
    to ``NEARLY_ONE`` of the examples or more, and to how many."""
    got = final_metrics(records, tuple(ROWS))
    rows = []
    for r in got.to_dict("records"):
        if (answer := one_answer(r["task"], r["outcome"])) is not None:
            said = how_many(r["outcome"]).removeprefix("to ")
            rows.append((r["run"], ROWS[r["experiment"]], TASKS[r["task"]].title, answer, said))
    return pd.DataFrame(rows, columns=["run", "row", "task", "answer", "examples"])


def floors(task: str, outcome) -> tuple[float, float]:
    """(chance, the one answer's score) of a task on an evaluation's labels; NaN where unknown."""
    y = outcome["labels"] if isinstance(outcome, dict) else None
    floor = chance(task, y)
    one = one_answer_score(task, y) if y is not None else np.nan
    return np.nan if floor is None else floor, one


def shows_nothing(task: str, row: dict) -> bool:
    """Whether a final evaluation shows nothing learned: its interval (or value) reaches the
    one answer's score, or it gave one answer to ``NEARLY_ONE`` of the examples or more."""
    if not isinstance(outcome := row.get("outcome"), dict):
        return False
    low = row["value"] if row["lo"] != row["lo"] else row["lo"]
    return low <= one_answer_score(task, outcome["labels"]) or one_answer(task, outcome) is not None


def with_baselines(records, experiments=tuple(ROWS)) -> pd.DataFrame:
    """``final_metrics``' rows with their ``floors`` and whether they ``shows_nothing``."""
    df = final_metrics(records, experiments)
    rows = df.to_dict("records")
    got = [floors(r["task"], r["outcome"]) for r in rows]
    df["chance"], df["one answer"] = [c for c, _ in got], [one for _, one in got]
    df["nothing"] = [shows_nothing(r["task"], r) for r in rows]
    return df


def _last_epoch_losses(df: pd.DataFrame) -> pd.DataFrame:
    """Each fine-tuning's L2 after its last epoch, where known (``task_loss``, or λ = 0's loss)."""
    df = df[(df.split == "train_loss") & df.experiment.isin(list(ROWS))].copy()
    if df.empty:
        return df
    df["run"] = [run_label(r) for r in df.to_dict("records")]
    df = df[df.step == df.groupby(["run", "experiment", "task"]).step.transform("max")]
    lam0 = [c.get("lm_coef") == 0 for c in df.config]
    known = (df.metric == "task_loss") | ((df.metric == "loss") & np.array(lam0, dtype=bool))
    return df[known].drop_duplicates(["run", "experiment", "task"], keep="last")


def underfitting(records) -> pd.DataFrame:
    """Each fine-tuning's L2 after the last epoch against the loss of predicting the label prior
    (the training labels' where recorded, else the evaluation's): no lower, it learned no more."""
    df = frame(records)
    cols = ["run", "row", "task", "examples", "updates", "L2, last epoch", "prior's loss"]
    cols += ["L2 minus prior", "prior from"]
    if df.empty or "split" not in df.columns:
        return pd.DataFrame(columns=cols)
    losses = _last_epoch_losses(df)
    priors = df[df.metric == "prior_task_loss"]
    priors = {(r["experiment"], r["task"], run_label(r)): r["value"] for _, r in priors.iterrows()}
    labels = {
        (r["experiment"], r["run"], r["task"]): r["outcome"]
        for r in final_metrics(df, tuple(ROWS)).to_dict("records")
    }
    rows = []
    for r in losses.to_dict("records"):
        c, spec = r["config"], TASKS[r["task"]]
        prior, where = priors.get((r["experiment"], r["task"], r["run"])), "train labels"
        outcome = labels.get((r["experiment"], r["run"], r["task"]))
        if prior is None and isinstance(outcome, dict):  # the records keep no training labels
            regression = (
                c.get("regression") if spec.family == "similarity" and not spec.labels else None
            )
            prior = prior_loss(outcome["labels"], regression, spec.n_answers)
            where = f"{spec.eval_split} labels"
        if prior is None:
            continue
        n = c.get("train_examples")
        updates = n // c["batch_size"] * c["epochs"] if n else None
        losses = [f"{r['value']:.3f}", f"{prior:.3f}", f"{r['value'] - prior:+.3f}"]
        rows.append((r["run"], ROWS[r["experiment"]], spec.title, n, updates, *losses, where))
    return pd.DataFrame(rows, columns=cols)
