"""What the recorded runs say about the paper's §5 findings, each held to one rule (``RULE``):
the run's numbers with their paired intervals, the verdict, every confound in the records."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from .evaluations import (
    chance,
    difference_interval,
    final_metrics,
    format_value,
    frame,
    heuristic_title,
    how_many,
    layer_transfer_points,
    one_answer,
    paired_mean,
    task_differences,
    zero_shot_points,
)
from .facts import (
    ABLATIONS,
    HEURISTICS,
    PAPER_LAYER_TRANSFER,
    PAPER_TABLE5_AVG,
    TABLE5_TASKS,
    ZERO_SHOT_TASKS,
)
from .labels import pretrained, run_label
from .paper import FINDINGS, ablation_runs
from .tasks import TASKS


def _transfer_pairs(points: pd.DataFrame):
    """Each run's and task's dev points of Figure 2 (left) with every block and with the
    embeddings only: (run, task, blocks, the one's row, the other's, their difference's paired
    interval or None)."""
    dev = points[points.split == "dev"]
    for (run, task), g in dev.groupby(["run", "task"], sort=False):
        by_k = {int(k): r for k, r in zip(g.n_transfer, g.to_dict("records"), strict=True)}
        top = max(by_k)
        if 0 in by_k and top > 0:
            a, b = by_k[top], by_k[0]
            yield run, task, top, a, b, difference_interval("accuracy", a["outcome"], b["outcome"])


def layer_transfer_gains(records) -> pd.DataFrame:
    """Each run's and task's dev accuracy with every block minus with the embeddings only, its
    paired 95% interval, the paper's, and why the all-blocks score differs from Tables 2-4's."""
    tables = {(r["run"], r["task"]): r for r in final_metrics(records).to_dict("records")}
    rows = []
    for run, task, top, a, b, iv in _transfer_pairs(layer_transfer_points(records)):
        stated = PAPER_LAYER_TRANSFER.get(task)
        cell = "†" if iv is None else f"[{iv[0]:.1f}, {iv[1]:.1f}]"
        paper = f"up to +{stated[0]:g}" if stated else "not stated"
        rows.append((run, TASKS[task].title, top, a["value"] - b["value"], cell, paper))
        rows[-1] += (_beside_tables(a, tables.get((run, task))),)
    cols = ["run", "task", "blocks", "all blocks - embeddings only", "95% interval", "paper"]
    return pd.DataFrame(rows, columns=[*cols, "all blocks beside Tables 2-4"])


def _beside_tables(point: dict, table: dict | None) -> str:
    """Why a layer-transfer point's score differs from its task's in Tables 2-4, in a line."""
    if table is None or round(point["value"], 1) == round(table["value"], 1):
        return "the same" if table else "no Tables 2-4 run"
    n = [f"{len(r['outcome']['labels']):,}" if r["outcome"] else "?" for r in (point, table)]
    return (
        f"{point['value']:.1f} here, {table['value']:.1f} in Tables 2-4: another fine-tuning "
        f"run, scored on {n[0]} dev examples against {n[1]} there"
    )


# ---------------------------------------------------------------- the four findings

#: The rule every finding is held to, on every page (``verdict``), in two parts.
RULE = (
    "a finding holds only where (1) no treatment confound is found in the records: the arms "
    "compared differ in nothing but what is compared, not in pre-training (updates or tokens), "
    "not in training examples, and each arm's fine-tuning rate chosen by the same search; and "
    "(2) over the tasks where the compared model learned something measurable (a task leaves "
    "where it gave one answer to 90% or more of the examples or scored below chance; a "
    "zero-shot heuristic leaves where the transformer's last checkpoint did the same), "
    "with at least 4 of Table 5's 8 tasks left (2 of the 4 zero-shot heuristics), each "
    "difference lies on the paper's side with its paired 95% interval excluding 0, and at "
    "least a third of the size the paper claims where it claims one"
)
#: The fewest tasks a finding is read over (``RULE``, part 2).
LEAST_LEFT = {"pre-training": 4, "zero-shot": 2, "layer transfer": 1, "transformer over LSTM": 4}
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


def verdict(checks: list[tuple], treatment: list[str], left: int = 1, least: int = 1) -> str:
    """``RULE``: "yes", or "not shown (why)". ``checks``: (what, value, lo, hi, least size or
    None), each a difference the paper says is positive; ``treatment``: the treatment confounds;
    ``left``: the tasks left where the compared model learned, of which it needs ``least``."""
    why = [f"{len(treatment)} treatment confound{'s' * (len(treatment) > 1)}"] if treatment else []
    if left < least:
        why.append(f"{left} task{'s' * (left != 1)} left where both learned, {least} needed")
    for what, value, lo, hi, size in checks if left >= least else ():
        if np.isnan(lo) or np.isnan(hi):
            why.append(f"{what}: no interval")
        elif hi < 0:
            why.append(f"{what}: against the paper, its interval below 0")
        elif lo <= 0:
            why.append(f"{what}: its interval includes 0")
        elif size is not None and value < size:
            why.append(f"{what}: {value:+.1f}, under {size:.1f}")
    return "yes" if not why else f"not shown ({'; '.join(why)})"


def _fmt(value: float, lo: float, hi: float) -> str:
    return f"{value:+.1f} [{lo:.1f}, {hi:.1f}]"


def _difference(rows_a: dict, rows_b: dict, tasks) -> tuple[float, float, float, list] | None:
    """``paired_mean``'s mean, lo, hi (None without paired outcomes), and ``task_differences``."""
    got = paired_mean(rows_a, rows_b, tasks)
    if got is None or got[2] is None:
        return None
    common, mean, lo, hi = got
    return mean, lo, hi, task_differences(rows_a, rows_b, common)


# ---------------------------------------------------------------- confounds, from the records


def learned_nothing(name: str, rows: dict, tasks, below_chance: bool = True) -> dict[str, str]:
    """Task -> why, for each of ``tasks`` on which the model ``name`` (its rows by task) learned
    nothing measurable: one answer to ``NEARLY_ONE`` of the examples, or (``below_chance``) an
    interval below chance."""
    out = {}
    for t in (t for t in tasks if t in rows):
        r, title = rows[t], TASKS[HEURISTICS.get(t, t)].title
        if (answer := one_answer(HEURISTICS.get(t, t), r["outcome"])) is not None:
            out[t] = f"{name} gives one answer, {answer}, {how_many(r['outcome'])} of {title}"
        elif (
            below_chance
            and (c := chance(t, (r["outcome"] or {}).get("labels"))) is not None
            and r["hi"] < c
        ):
            score = f"{r['value']:.1f} [{r['lo']:.1f}, {r['hi']:.1f}]"
            out[t] = f"{name} below chance on {title}: {score}, chance {c:.3g}"
    return out


def _fewer_examples(name: str, rows: dict, first: dict, tasks) -> list[str]:
    """Where the arm ``name`` (task -> row) trained on fewer examples than the ``first`` arm."""
    out = []
    for t in (t for t in tasks if t in rows):
        theirs, ours = first.get(t, {}).get("examples"), rows[t].get("examples")
        if ours and theirs and ours < theirs:
            title = TASKS[t].title
            out.append(f"{name} trained on {ours:,} {title} examples, the other {theirs:,}")
    return out


def _unequal(ups: dict) -> list[str]:
    if not {"gpt", "lstm"} <= set(ups) or ups["gpt"] == ups["lstm"]:
        return []
    (gu, gt), (lu, lt) = ups["gpt"], ups["lstm"]
    said = f"the LSTM {lu:,} updates ({lt / 1e6:.0f} M tokens), the transformer {gu:,}"
    return [f"unequal pre-training: {said} ({gt / 1e6:.0f} M)"]


def _searches(df: pd.DataFrame) -> dict[str, dict[str, tuple]]:
    """run -> arm -> its selection records' (rate, examples): "chosen by the same search"."""
    out: dict[str, dict[str, set]] = {}
    for r in df[df.metric == "selection_score"].to_dict("records"):
        c = r["config"]
        arms = out.setdefault(run_label(r), {})
        arms.setdefault(c["arm"], set()).add((c["lr"], json.dumps(c.get("examples"))))
    return {run: {arm: tuple(sorted(v)) for arm, v in arms.items()} for run, arms in out.items()}


# ---------------------------------------------------------------- each finding


def _ablation_finding(name: str, methods: dict, ups: dict, searched: dict):
    """A Table 5 finding (``paper.FINDINGS``) at one run: its text (over every task, and over
    those left where both learned), verdict, treatment confounds and tasks left out."""
    first, other, _ = FINDINGS[name]
    full, theirs = methods.get(first, {}), methods.get(other, {})
    if (every := _difference(full, theirs, TABLE5_TASKS)) is None:
        return None
    dropped = learned_nothing(other, theirs, [t for t in TABLE5_TASKS if t in full])
    kept = [t for t in TABLE5_TASKS if t not in dropped]
    text, checks = f"{_fmt(*every[:3])} over {len(every[3])} tasks", []
    if (left := _difference(full, theirs, kept) if kept else None) is not None:
        if dropped:
            text += f"; {_fmt(*left[:3])} over the {len(left[3])} where both learned"
        least = PAPER_PRETRAINING / 3 if name == "pre-training" else None
        what = "the average where both learned" if dropped else "the average"
        checks.append((what, *left[:3], least))
    treatment = _fewer_examples(other, theirs, full, TABLE5_TASKS)
    treatment += _unequal(ups) if "LSTM" in other else []
    if searched.get("full") != searched.get(ABLATIONS[other].split(":")[1]):
        said = f"the full row's and the {other} row's rates were not chosen by the same search"
        treatment.append(said)
    said = verdict(checks, treatment, len(left[3]) if left else 0, LEAST_LEFT[name])
    return text, said, treatment, list(dropped.values())


def _zero_shot_finding(points: pd.DataFrame, ups: dict):
    gpt, lstm = points[points.model == "Transformer"], points[points.model == "LSTM"]
    if gpt.empty:
        return None
    first = {t: g.iloc[0].to_dict() for t, g in gpt.groupby("heuristic")}
    last = {t: g.iloc[-1].to_dict() for t, g in gpt.groupby("heuristic")}
    lstm_last = {t: g.iloc[-1].to_dict() for t, g in lstm.groupby("heuristic")}
    order = [t for t in ZERO_SHOT_TASKS if t in last]  # the paper's heuristics
    dropped = learned_nothing("the transformer's last checkpoint", last, order, False)
    kept = [t for t in order if t not in dropped]
    checks, parts = [], []
    if (rise := _difference(last, first, kept)) is not None:
        gains = ", ".join(f"{TASKS[t].title} {_fmt(d, lo, hi)}" for t, d, lo, hi in rise[3])
        parts.append(f"last minus first checkpoint {_fmt(*rise[:3])} ({gains})")
        checks.append(("last minus first", *rise[:3], None))
    if (over := _difference(last, lstm_last, kept)) is not None:
        parts.append(f"transformer minus LSTM at the last {_fmt(*over[:3])}")
        checks.append(("transformer minus LSTM", *over[:3], None))
    treatment = _unequal(ups) if over is not None else []
    said = verdict(checks, treatment, len(kept), LEAST_LEFT["zero-shot"])
    return "; ".join(parts) or "no heuristic left", said, treatment, list(dropped.values())


def _transfer_finding(points: pd.DataFrame):
    parts, checks, dropped, treatment = [], [], [], []
    for _, task, _, a, b, iv in _transfer_pairs(points):
        if iv is None:
            return None
        gain = a["value"] - b["value"]
        parts.append(f"{TASKS[task].title} {_fmt(gain, *iv)}")
        treatment += _fewer_examples("the embeddings only", {task: b}, {task: a}, [task])
        if nothing := learned_nothing("the embeddings only", {task: b}, [task]):
            dropped += nothing.values()
        else:
            checks.append((TASKS[task].title, gain, *iv, None))
    if not parts:
        return None
    text = "all blocks minus embeddings only: " + ", ".join(parts)
    said = verdict(checks, treatment, len(checks), LEAST_LEFT["layer transfer"])
    return text, said, treatment, dropped


def findings(records) -> pd.DataFrame:
    """The four findings at each recorded run, each held to ``RULE``: the run's numbers with
    paired 95% intervals, the verdict, the treatment confounds and the tasks left out."""
    df = frame(records)
    cols = ["run", "finding", "run's", "target", "verdict", "treatment confounds", "left out"]
    if df.empty or "metric" not in df.columns:
        return pd.DataFrame(columns=cols)
    ablations, zero, transfer = ablation_runs(df), zero_shot_points(df), layer_transfer_points(df)
    pre, searched = pretrained(df), _searches(df)
    rows = []
    for run in dict.fromkeys([*ablations, *zero.run, *transfer.run]):
        methods, ups, s = ablations.get(run, {}), pre.get(run, {}), searched.get(run, {})
        found = {
            "pre-training": _ablation_finding("pre-training", methods, ups, s),
            "zero-shot": _zero_shot_finding(zero[zero.run == run], ups),
            "layer transfer": _transfer_finding(transfer[transfer.run == run]),
            "transformer over LSTM": _ablation_finding("transformer over LSTM", methods, ups, s),
        }
        for name, got in found.items():
            if got is not None:
                text, said, treatment, dropped = got
                rows.append(
                    (run, name, text, TARGETS[name], said, *map("; ".join, (treatment, dropped)))
                )
    return pd.DataFrame(rows, columns=cols)


def zero_shot_last(records) -> pd.DataFrame:
    """Each run's and model's zero-shot scores at its last checkpoint with their 95% intervals
    (or the one answer given to every example), beside random guessing."""
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
            "random guess": [chance(t) for t in last.task],
        }
    ).reset_index(drop=True)
