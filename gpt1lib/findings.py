"""What the recorded runs say about the paper's §5 findings, and what they cannot say.

Figure 2 (left)'s gains (``layer_transfer_gains``; the figures' points are
``evaluations.layer_transfer_points`` and ``evaluations.zero_shot_points``), then what the
results pages read off each run:

* ``findings``: the paper's four findings at each run, each held to one rule (``RULE``):
  the run's numbers with their paired intervals, the verdict, every confound in the records;
* ``zero_shot_last``: each zero-shot curve's last point, its raw score against random;
* ``constant_answers``: evaluations in which a model gave ONE answer to every example, whose
  metric then says nothing about what it learned (``evaluations.one_answer``);
* ``underfitting``: fine-tuning's task loss L2 after its last epoch against the loss of the
  best constant prediction (``loss.prior_loss``): a run whose L2 is no lower learned the label
  prior and nothing more.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import stats
from .evaluations import (
    arrays,
    difference_interval,
    final_metrics,
    format_value,
    frame,
    heuristic_title,
    layer_transfer_points,
    one_answer,
    zero_shot_points,
)
from .labels import pretrained, run_label
from .loss import prior_loss
from .paper import (
    ABLATIONS,
    PAPER_LAYER_TRANSFER,
    PAPER_TABLE5_AVG,
    TABLE5_TASKS,
    ablation_runs,
)
from .tasks import TASKS
from .zeroshot import BASELINES, HEURISTICS, ZERO_SHOT_TASKS


def _transfer_pairs(points: pd.DataFrame):
    """Each run's and task's dev points of Figure 2 (left) with every block transferred and
    with the embeddings only: (run, task, blocks, the one's row, the other's, the paired 95%
    interval of their difference, None where a run kept no outcomes)."""
    dev = points[points.split == "dev"]
    for (run, task), g in dev.groupby(["run", "task"], sort=False):
        by_k = {int(k): r for k, r in zip(g.n_transfer, g.to_dict("records"), strict=True)}
        top = max(by_k)
        if 0 in by_k and top > 0:
            a, b = by_k[top], by_k[0]
            yield run, task, top, a, b, difference_interval("accuracy", a["outcome"], b["outcome"])


def layer_transfer_gains(records) -> pd.DataFrame:
    """Each run's and task's dev accuracy with every block transferred minus with the
    embeddings only (``n_transfer`` = n_layer against 0), its paired 95% interval, and what
    the paper states of it (MultiNLI: up to 9)."""
    rows = []
    for run, task, top, a, b, iv in _transfer_pairs(layer_transfer_points(records)):
        stated = PAPER_LAYER_TRANSFER.get(task)
        cell = "†" if iv is None else f"[{iv[0]:.1f}, {iv[1]:.1f}]"
        paper = f"up to +{stated[0]:g}" if stated else "not stated"
        rows.append((run, TASKS[task].title, top, a["value"] - b["value"], cell, paper))
    cols = ["run", "task", "blocks", "all blocks - embeddings only", "95% interval", "paper"]
    return pd.DataFrame(rows, columns=cols)


# ---------------------------------------------------------------- the four findings

#: The rule every finding is held to, on every page (``verdict``).
RULE = (
    "a finding holds only where each difference it compares lies on the paper's side with its "
    "paired 95% interval excluding 0 (and at least a third of the size the paper claims, where "
    "it claims one), and no confound is found in the records: unequal pre-training (updates or "
    "tokens), a compared model giving one answer to every example of a task, a compared score "
    "below chance, fewer training examples than the arm it is compared with"
)
#: The paper's Table 5 gap that the pre-training finding must reach a third of.
PAPER_PRETRAINING = (
    PAPER_TABLE5_AVG["Transformer w/ aux LM (full)"]
    - PAPER_TABLE5_AVG["Transformer w/o pre-training"]
)
#: Each finding's comparison, as the page states it.
TARGETS = {
    "pre-training": "full minus from scratch on Table 5's average, at least "
    f"+{PAPER_PRETRAINING / 3:.1f} (a third of the paper's +{PAPER_PRETRAINING:.1f})",
    "zero-shot": "the transformer's scores at its last checkpoint minus its first, and minus "
    "the LSTM's at the last, each over the paper's heuristics",
    "layer transfer": "all blocks minus the embeddings only, on each task",
    "transformer over LSTM": "full minus LSTM on Table 5's average",
}


def verdict(checks: list[tuple], confounds: list[str]) -> str:
    """``RULE``: "yes", or "not shown (why)". ``checks``: (what, value, lo, hi, least), each a
    difference the paper says is positive (``least``: the size it must reach, or None)."""
    why = []
    for what, value, lo, hi, least in checks:
        if hi < 0:
            why.append(f"{what}: against the paper, its interval below 0")
        elif lo <= 0 or np.isnan(lo):
            why.append(f"{what}: its interval includes 0")
        elif least is not None and value < least:
            why.append(f"{what}: {value:+.1f}, under {least:.1f}")
    if confounds:
        why.append(f"{len(confounds)} confound{'s' * (len(confounds) > 1)}")
    return "yes" if not why else f"not shown ({'; '.join(why)})"


def _fmt(value: float, lo: float, hi: float) -> str:
    return f"{value:+.1f} [{lo:.1f}, {hi:.1f}]"


def _difference(rows_a: dict, rows_b: dict, tasks) -> tuple[float, float, float, list] | None:
    """The mean over ``tasks`` of a - b (rows of ``final_metrics`` or Figure 2's points, by
    task), the interval of that paired mean, and each task's (task, difference, lo, hi)."""
    common = [t for t in tasks if t in rows_a and t in rows_b]
    pairs = [(rows_a[t], rows_b[t]) for t in common]
    if not common or not all(
        isinstance(a["outcome"], dict) and isinstance(b["outcome"], dict) for a, b in pairs
    ):
        return None
    metric = {t: TASKS[HEURISTICS.get(t, t)].metrics[0] for t in common}
    per_task = []
    for t, (a, b) in zip(common, pairs, strict=True):
        iv = difference_interval(metric[t], a["outcome"], b["outcome"]) or (np.nan, np.nan)
        per_task.append((t, a["value"] - b["value"], *iv))
    arms = [
        (metric[t], arrays(a["outcome"])[0], *arrays(b["outcome"]))
        for t, (a, b) in zip(common, pairs, strict=True)
    ]
    lo, hi = stats.mean_difference_interval(arms)
    return float(np.mean([d for _, d, _, _ in per_task])), lo, hi, per_task


# ---------------------------------------------------------------- confounds, from the records


def chance(task: str) -> float | None:
    """A task's score by chance on its paper metric: 1 / classes or answers for accuracy, 0 for
    a correlation; None for F1, which a constant answer can lift."""
    spec = TASKS[HEURISTICS.get(task, task)]
    metric = spec.metrics[0]
    if metric == "accuracy":
        return 100 / (spec.n_answers or len(spec.labels))
    return 0.0 if metric in ("matthews", "pearson", "spearman") else None


def _model_confounds(arms: dict[str, dict], tasks) -> list[str]:
    """Over ``arms`` (a name -> task -> row, with ``value``, ``lo``, ``hi``, ``outcome`` and
    for fine-tuning ``examples``): one answer to every example, a score below chance, and
    fewer training examples than the first arm."""
    out, first = [], next(iter(arms.values()))
    for name, rows in arms.items():
        for t in (t for t in tasks if t in rows):
            r, title = rows[t], TASKS[HEURISTICS.get(t, t)].title
            if (answer := one_answer(HEURISTICS.get(t, t), r["outcome"])) is not None:
                n = len(r["outcome"]["labels"])
                out.append(f"{name} gives one answer, {answer}, to all {n:,} of {title}")
            elif (c := chance(t)) is not None and r["hi"] < c:
                score = f"{r['value']:.1f} [{r['lo']:.1f}, {r['hi']:.1f}]"
                out.append(f"{name} below chance on {title}: {score}, chance {c:g}")
            theirs, ours = first.get(t, {}).get("examples"), r.get("examples")
            if ours and theirs and ours < theirs:
                out.append(f"{name} trained on {ours:,} {title} examples, the other {theirs:,}")
    return out


def _unequal(ups: dict) -> list[str]:
    if not {"gpt", "lstm"} <= set(ups) or ups["gpt"] == ups["lstm"]:
        return []
    (gu, gt), (lu, lt) = ups["gpt"], ups["lstm"]
    said = f"the LSTM {lu:,} updates ({lt / 1e6:.0f} M tokens), the transformer {gu:,}"
    return [f"unequal pre-training: {said} ({gt / 1e6:.0f} M)"]


# ---------------------------------------------------------------- each finding


def _ablation_finding(name: str, methods: dict, other: str, ups: dict):
    full_name = "Transformer w/ aux LM (full)"
    full, theirs = methods.get(full_name, {}), methods.get(other, {})
    found = _difference(full, theirs, TABLE5_TASKS)
    if found is None:
        return None
    mean, lo, hi, per_task = found
    above = [TASKS[t].title for t, _, tlo, _ in per_task if tlo > 0]
    text = f"{_fmt(mean, lo, hi)} over {len(per_task)} tasks; above 0 on {len(above)}"
    text += f" ({', '.join(above)})" if above else ""
    least = PAPER_PRETRAINING / 3 if name == "pre-training" else None
    confounds = _model_confounds({"full": full, other: theirs}, TABLE5_TASKS)
    confounds += _unequal(ups) if "LSTM" in other else []
    return text, verdict([("the average", mean, lo, hi, least)], confounds), confounds


def _zero_shot_finding(points: pd.DataFrame, ups: dict):
    gpt, lstm = points[points.model == "Transformer"], points[points.model == "LSTM"]
    if gpt.empty:
        return None
    first = {t: g.iloc[0].to_dict() for t, g in gpt.groupby("heuristic")}
    last = {t: g.iloc[-1].to_dict() for t, g in gpt.groupby("heuristic")}
    lstm_last = {t: g.iloc[-1].to_dict() for t, g in lstm.groupby("heuristic")}
    order = [t for t in ZERO_SHOT_TASKS if t in last]  # the paper's heuristics
    # a heuristic that gave one answer to every example is a confound, not a point of the curve
    varied = [t for t in order if not isinstance(last[t]["answer"] or first[t]["answer"], str)]
    checks, parts = [], []
    if (rise := _difference(last, first, varied)) is not None:
        gains = ", ".join(f"{TASKS[t].title} {_fmt(d, lo, hi)}" for t, d, lo, hi in rise[3])
        parts.append(f"last minus first checkpoint {_fmt(*rise[:3])} ({gains})")
        checks.append(("last minus first", *rise[:3], None))
    both = [t for t in varied if t in lstm_last and not isinstance(lstm_last[t]["answer"], str)]
    if (over := _difference(last, lstm_last, both)) is not None:
        parts.append(f"transformer minus LSTM at the last {_fmt(*over[:3])}")
        checks.append(("transformer minus LSTM", *over[:3], None))
    if not checks:
        return None
    arms = {"the transformer's first checkpoint": first, "its last": last}
    confounds = _model_confounds(arms | {"the LSTM's last": lstm_last}, order) + _unequal(ups)
    return "; ".join(parts), verdict(checks, confounds), confounds


def _transfer_finding(points: pd.DataFrame):
    parts, checks, confounds = [], [], []
    for _, task, top, a, b, iv in _transfer_pairs(points):
        if iv is None:
            return None
        gain = a["value"] - b["value"]
        parts.append(f"{TASKS[task].title} {_fmt(gain, *iv)}")
        checks.append((TASKS[task].title, gain, *iv, None))
        arms = {f"{top} blocks": {task: a}, "the embeddings only": {task: b}}
        confounds += _model_confounds(arms, [task])
    if not checks:
        return None
    text = "all blocks minus embeddings only: " + ", ".join(parts)
    return text, verdict(checks, confounds), confounds


def findings(records) -> pd.DataFrame:
    """The four findings at each recorded run, each held to ``RULE``: the run's numbers with
    the 95% intervals of their paired differences, what is compared (``TARGETS``), the verdict
    (``verdict``), and every confound found in the records. A finding the run has no data for
    is left out."""
    df = frame(records)
    cols = ["run", "finding", "run's", "target", "verdict", "confounds"]
    if df.empty or "metric" not in df.columns:
        return pd.DataFrame(columns=cols)
    ablations, zero, transfer = ablation_runs(df), zero_shot_points(df), layer_transfer_points(df)
    pre = pretrained(df)
    rows = []
    for run in dict.fromkeys([*ablations, *zero.run, *transfer.run]):
        methods, ups = ablations.get(run, {}), pre.get(run, {})
        found = {
            "pre-training": _ablation_finding(
                "pre-training", methods, "Transformer w/o pre-training", ups
            ),
            "zero-shot": _zero_shot_finding(zero[zero.run == run], ups),
            "layer transfer": _transfer_finding(transfer[transfer.run == run]),
            "transformer over LSTM": _ablation_finding("lstm", methods, "LSTM w/ aux LM", ups),
        }
        for name, got in found.items():
            if got is not None:
                text, said, confounds = got
                rows.append((run, name, text, TARGETS[name], said, "; ".join(confounds)))
    return pd.DataFrame(rows, columns=cols)


def zero_shot_last(records) -> pd.DataFrame:
    """Each run's and model's zero-shot scores at its last checkpoint: the raw score (the task's
    metric) with its 95% interval beside random guessing, or the one answer it gave to every
    example; a heuristic has learned something where the interval lies above random."""
    pts = zero_shot_points(records)
    last = pts[pts.step == pts.groupby(["run", "model"]).step.transform("max")]
    cells = [
        f"one answer, {a}, to all" if isinstance(a, str) else format_value(v, lo, hi)
        for v, lo, hi, a in zip(last.value, last.lo, last.hi, last.answer, strict=True)
    ]
    return pd.DataFrame(
        {
            "run": last.run,
            "model": last.model,
            "task": list(map(heuristic_title, last.heuristic)),
            "split": last.split,
            "update": last.step.astype(int),
            "score [95% interval]": cells,
            "random guess": [BASELINES[t][0] for t in last.task],
        }
    ).reset_index(drop=True)


#: The experiments a fine-tuning evaluation is recorded under, and how a page names them.
ROWS = {"finetune": "fine-tuning (chapters 05-08)", **{v: k for k, v in ABLATIONS.items()}}


def constant_answers(records) -> pd.DataFrame:
    """Every final fine-tuning evaluation (chapters 05-08, Table 5's rows) whose model gave
    one answer to every example: its run, row, task, that answer and the examples."""
    got = final_metrics(records, tuple(ROWS))
    rows = []
    for r in got.to_dict("records"):
        if (answer := one_answer(r["task"], r["outcome"])) is not None:
            n = len(r["outcome"]["labels"])
            rows.append((r["run"], ROWS[r["experiment"]], TASKS[r["task"]].title, answer, n))
    return pd.DataFrame(rows, columns=["run", "row", "task", "answer", "examples"])


def _last_epoch_losses(df: pd.DataFrame) -> pd.DataFrame:
    """The fine-tuning losses of ``df`` (records) after each run's last epoch: L2 where it is
    known (recorded as ``task_loss``; or the loss of a run with λ = 0, which is L2 alone)."""
    df = df[(df.split == "train_loss") & df.experiment.isin(list(ROWS))].copy()
    if df.empty:
        return df
    df["run"] = [run_label(r) for r in df.to_dict("records")]
    df = df[df.step == df.groupby(["run", "experiment", "task"]).step.transform("max")]
    lam0 = [c.get("lm_coef") == 0 for c in df.config]
    known = (df.metric == "task_loss") | ((df.metric == "loss") & np.array(lam0, dtype=bool))
    return df[known].drop_duplicates(["run", "experiment", "task"], keep="last")


def underfitting(records) -> pd.DataFrame:
    """For each fine-tuning run whose L2 is known: its training examples and updates, L2 after
    the last epoch, and the loss of predicting the label prior (``loss.prior_loss``), losses to
    three decimals: recorded with the run where it is (its training labels), else from the
    evaluation's labels, which are what older records keep ("dev labels")."""
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
