"""A run's final evaluations and Figure 2's points, read from its records, with their 95%
bootstrap intervals from the per-example outcomes (paired for two arms scored on the same
examples; none, ``NO_INTERVAL``, for records without outcomes), and a score's floors."""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from . import stats
from .choice import choose
from .facts import HEURISTICS, normalise
from .labels import run_label
from .records import PER_EXAMPLE, read_records
from .tasks import TASKS

#: Said beside a number whose run kept no per-example outcomes.
NO_INTERVAL = (
    "†: no interval: the run was recorded before per-example outcomes were kept; intervals "
    "appear for runs recorded since"
)


def results_records(
    results_dir: str | os.PathLike, build_dir: str | os.PathLike | None, scale: str | None
) -> tuple[pd.DataFrame, pd.DataFrame, bool]:
    """(the headline records, this build's records, whether the build's are in the headline:
    only at a recorded scale, ``results_dir/<scale>``)."""
    recorded = read_records(results_dir) if Path(results_dir).exists() else read_records()
    build = read_records(build_dir) if build_dir and Path(build_dir).exists() else read_records()
    joined = scale is not None and (Path(results_dir) / scale).is_dir() and not build.empty
    headline = pd.concat([recorded, build], ignore_index=True) if joined else recorded
    return headline, build, joined


def _plain(v):
    """A field as a join key: NaN as None, whole floats as ints, dicts as sorted JSON."""
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True, default=str)
    if isinstance(v, float):
        return None if v != v else int(v) if v.is_integer() else v
    return v


_KEY = ("experiment", "task", "split", "step", "scale", "seed", "commit", "device", "config")


def _key(rec: dict) -> tuple:
    """What a metric record shares with the per-example record of the same evaluation."""
    return tuple(_plain(rec.get(k)) for k in _KEY)


def frame(records) -> pd.DataFrame:
    df = pd.DataFrame(records)
    if "per_example" not in df.columns:
        df["per_example"] = None
    return df


def arrays(outcome: dict) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(outcome["predictions"]), np.asarray(outcome["labels"])


@lru_cache(maxsize=4096)
def _interval(metric: str, preds: tuple, labels: tuple) -> tuple[float, float]:
    return stats.bootstrap_interval(metric, np.array(preds), np.array(labels))


def bracket(lo: float, hi: float, none: str = "†") -> str:
    """An interval as a page shows it, "[79.1, 83.2]", or ``none`` where it is NaN."""
    return none if lo != lo else f"[{lo:.1f}, {hi:.1f}]"


def paired(a: dict | None, b: dict | None) -> bool:
    """Whether two evaluations scored the same examples in the same order."""
    return (
        isinstance(a, dict)
        and isinstance(b, dict)
        and a["examples"] == b["examples"]
        and a["labels"] == b["labels"]
    )


def difference_interval(metric: str, a: dict | None, b: dict | None):
    """The 95% interval of metric(a) - metric(b), paired over their common examples (None
    where either has no outcomes or they are not the same examples)."""
    if not paired(a, b):
        return None
    (pa, y), (pb, _) = arrays(a), arrays(b)
    return stats.paired_difference_interval(metric, pa, pb, y)


def metric_of(task: str) -> str:
    """The paper metric of a task or a zero-shot heuristic (``HEURISTICS``)."""
    return TASKS[HEURISTICS.get(task, task)].metrics[0]


def paired_mean(rows_a: dict, rows_b: dict, tasks) -> tuple[list, float, float, float] | None:
    """(the common tasks, mean of a - b over them, its paired 95% interval lo, hi), lo and hi
    None where a pair was not scored on the same examples; None where no task is common."""
    common = [t for t in tasks if t in rows_a and t in rows_b]
    if not common:
        return None
    pairs = [(rows_a[t]["outcome"], rows_b[t]["outcome"]) for t in common]
    mean = sum(rows_a[t]["value"] - rows_b[t]["value"] for t in common) / len(common)
    if not all(paired(a, b) for a, b in pairs):
        return common, mean, None, None
    arms = [
        (metric_of(t), arrays(a)[0], *arrays(b)) for t, (a, b) in zip(common, pairs, strict=True)
    ]
    return common, mean, *stats.mean_difference_interval(arms)


def task_differences(rows_a: dict, rows_b: dict, tasks) -> list[tuple]:
    """(task, a - b, its paired 95% interval's lo, hi or NaN) for each of ``tasks`` in both."""
    out = []
    for t in (t for t in tasks if t in rows_a and t in rows_b):
        a, b = rows_a[t], rows_b[t]
        iv = difference_interval(metric_of(t), a["outcome"], b["outcome"]) or (np.nan, np.nan)
        out.append((t, a["value"] - b["value"], *iv))
    return out


def _scored(records, keep) -> pd.DataFrame:
    """The metric rows ``keep`` (frame -> mask) selects, with run, outcome and interval."""
    df = frame(records)
    df = df[keep(df)] if "metric" in df.columns else df.iloc[:0]
    if df.empty:
        return df
    pe = df[df.metric == PER_EXAMPLE].to_dict("records")
    found = {_key(r): r["per_example"] for r in pe if isinstance(r.get("per_example"), dict)}
    df = df[df.metric != PER_EXAMPLE].copy()
    df["outcome"] = [found.get(_key(r)) for r in df.to_dict("records")]
    bounds = [
        _interval(m, tuple(o["predictions"]), tuple(o["labels"]))
        if isinstance(o, dict)
        else (np.nan, np.nan)
        for m, o in zip(df.metric, df.outcome, strict=True)
    ]
    df["lo"] = [b[0] for b in bounds]
    df["hi"] = [b[1] for b in bounds]
    df["run"] = [run_label(r) for r in df.to_dict("records")]
    return df


def final_metrics(records, experiments: str | tuple[str, ...] = "finetune"):
    """One row per (experiment, run, task): the task's paper metric on its eval split at the last
    epoch, with its interval, outcomes, training examples and config. ``records``: a DataFrame or a
    list."""
    cols = ["experiment", "run", "task", "metric", "split", "value", "lo", "hi", "data"]
    cols += ["wall_time", "outcome", "examples", "config"]
    experiments = (experiments,) if isinstance(experiments, str) else experiments

    def headline(d):  # the paper metric's rows (and their outcomes) on each task's eval split
        rows = zip(d.experiment, d.task, d.split, d.metric, strict=True)
        return [
            e in experiments
            and t in TASKS
            and s == TASKS[t].eval_split
            and m in (TASKS[t].metrics[0], PER_EXAMPLE)
            for e, t, s, m in rows
        ]

    df = _scored(records, headline)
    if df.empty:
        return pd.DataFrame(columns=cols)
    df["examples"] = [c.get("train_examples") if isinstance(c, dict) else None for c in df.config]
    groups = df.groupby(["experiment", "run", "task"], sort=False)
    rows = [g[g.step == g.step.max()].iloc[-1][cols].to_dict() for _, g in groups]
    return pd.DataFrame(rows, columns=cols)


def format_value(value, lo=np.nan, hi=np.nan, digits: int = 1) -> str:
    """``"81.3 [79.1, 83.2]"``; ``"56.5 †"`` without an interval (``NO_INTERVAL``);
    ``"missing"`` where there is no value."""
    if value is None or value != value:
        return "missing"
    if lo != lo or hi != hi:
        return f"{value:.{digits}f} †"
    return stats.format_interval(value, (lo, hi), digits)


def examples_cell(row: dict) -> str:
    """Training / evaluation examples, "2,137 / 1,043" ("?" where the records do not say)."""
    n, outcome = row.get("examples"), row.get("outcome")
    train = f"{int(n):,}" if n == n and n is not None else "?"
    scored = f"{len(outcome['labels']):,}" if isinstance(outcome, dict) else "?"
    return f"{train} / {scored}"


# ---------------------------------------------------------------- Figure 2's points


def layer_transfer_points(records) -> pd.DataFrame:
    """Figure 2 (left): one row per (run, task, split, n_transfer), the accuracy after the last
    epoch with its 95% interval, on the training examples ("train") or the evaluation split
    ("dev")."""
    cols = ["run", "task", "split", "n_transfer", "value", "lo", "hi", "outcome", "data"]
    cols += ["examples", "wall_time"]
    layers = (PER_EXAMPLE, "accuracy")
    df = _scored(records, lambda d: (d.experiment == "layer_transfer") & d.metric.isin(layers))
    if df.empty:
        return pd.DataFrame(columns=cols)
    df["n_transfer"] = [int(c["n_transfer"]) for c in df.config]
    df["examples"] = [c.get("train_examples") for c in df.config]
    df["split"] = df.split.map(lambda s: "train" if s == "train" else "dev")
    last = df.step == df.groupby(["run", "task", "n_transfer"]).step.transform("max")
    df = df[last].drop_duplicates(["run", "task", "split", "n_transfer"], keep="last")
    return df.sort_values(["run", "task", "split", "n_transfer"])[cols].reset_index(drop=True)


def zero_shot_points(records) -> pd.DataFrame:
    """Figure 2 (right): one row per (run, model, task, checkpoint): the metric and its 95%
    interval, also on ``facts.normalise``'s scale. A heuristic that gave one answer to every
    example (``answer``) has no normalised value: it would rank constant models by label balance."""
    cols = ["run", "model", "task", "heuristic", "split", "step", "value", "lo", "hi"]
    cols += ["normalised", "nlo", "nhi", "examples", "answer", "outcome"]
    df = _scored(records, lambda d: d.experiment == "zero_shot")
    if df.empty:
        return pd.DataFrame(columns=cols)
    df["model"] = [{"GPT": "Transformer", "LSTMLM": "LSTM"}[c["arch"]] for c in df.config]
    df["examples"] = [c.get("examples") for c in df.config]
    df["split"] = [c["examples_split"] for c in df.config]
    df["answer"] = [one_answer(t, o) for t, o in zip(df.task, df.outcome, strict=True)]
    df["heuristic"] = [c["heuristic"] for c in df.config]
    for col, src in (("normalised", "value"), ("nlo", "lo"), ("nhi", "hi")):
        df[col] = [
            np.nan if isinstance(a, str) else normalise(h, v)
            for h, v, a in zip(df.heuristic, df[src], df.answer, strict=True)
        ]
    df = df.drop_duplicates(["run", "model", "heuristic", "step"], keep="last")
    return df.sort_values(["run", "model", "heuristic", "step"])[cols].reset_index(drop=True)


def heuristic_title(heuristic: str) -> str:
    """A zero-shot heuristic as a page names it: its task, and whether it is not the paper's."""
    task = HEURISTICS.get(heuristic, heuristic)
    return TASKS[task].title + ("" if task == heuristic else " calibrated (not the paper's)")


#: A model that gave one answer to this share of the examples or more is read as giving one.
NEARLY_ONE = 0.9


def answer_share(outcome) -> tuple[float, int]:
    """(the commonest prediction, how many examples got it) of one evaluation's outcomes."""
    values, counts = np.unique(np.asarray(outcome["predictions"]), return_counts=True)
    return float(values[counts.argmax()]), int(counts.max())


def one_answer(task: str, outcome) -> str | None:
    """The one answer a model gave to ``NEARLY_ONE`` of an evaluation's examples or more (a
    class name, "answer k", or a score), or None where its answers vary or it kept no outcomes."""
    if not isinstance(outcome, dict):
        return None
    p, count = answer_share(outcome)
    if count < NEARLY_ONE * len(outcome["predictions"]):
        return None
    labels = TASKS[task].labels
    if labels and float(p).is_integer() and 0 <= p < len(labels):
        return repr(labels[int(p)])
    return f"answer {int(p) + 1}" if TASKS[task].n_answers else f"the score {p:g}"


def how_many(outcome: dict) -> str:
    """To how many examples a model gave its commonest answer: "to all 408", "to 366 of the 408"."""
    n, (_, count) = len(outcome["predictions"]), answer_share(outcome)
    return f"to all {n:,}" if count == n else f"to {count:,} of the {n:,}"


def chance(task: str, labels=None) -> float | None:
    """A task's expected score answering at random with even odds: 1 / classes for accuracy, 0
    for a correlation, for F1 p / (p + 1/2), p class 1's share of ``labels`` (None without)."""
    spec = TASKS[HEURISTICS.get(task, task)]
    metric = spec.metrics[0]
    if metric == "accuracy":
        return 100 / (spec.n_answers or len(spec.labels))
    if metric != "f1":
        return 0.0
    share = np.mean(np.asarray(labels) == 1) if labels is not None else None
    return None if share is None else 100 * share / (share + 0.5)


def one_answer_score(task: str, labels) -> float:
    """The best score of giving one answer to every example of ``labels`` (0 for a correlation)."""
    spec = TASKS[HEURISTICS.get(task, task)]
    metric, y = spec.metrics[0], np.asarray(labels)[None]
    if metric not in ("accuracy", "f1"):
        return 0.0
    answers = range(spec.n_answers or len(spec.labels))
    return max(float(stats.METRICS[metric](np.full_like(y, a), y)[0]) for a in answers)


def _trial(trial: dict | None) -> str:
    """A selection trial as its rate and its held-out score, "6.25e-05: 21.0"."""
    return f"{trial['config']['lr']:g}: {trial['value']:.1f}" if trial else "none"


def protocol_selection(records, sweep=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each run's fine-tuning protocol selection (chapter 12): (every setting tried, by run and
    arm, with its held-out score; each arm's choice, ``choice.choose``). ``sweep``: the cpu
    scale's selection rows (results/sweeps/cpu_finetune_select.jsonl)."""
    df = frame(records)
    trials = df[df.metric == "selection_score"].to_dict("records") if not df.empty else []
    if sweep is not None and Path(sweep).is_file():
        for r in pd.read_json(sweep, lines=True).to_dict("records"):
            config = {"arm": r["arm"], "lr": r["lr"], "warmup": 0.002}
            config |= {"epochs": r["epochs"], "batch_size": r["batch"]}  # no outcomes kept
            run = "cpu selection (tools/select_finetune_cpu.py)"
            trials.append({"run": run, "value": r["score"], "config": config})
    for r in trials:
        r["run"] = r.get("run") or run_label(r)
        c = r["config"]
        r["setting"] = f"lr {c['lr']:g}, warm-up {c['warmup']:.1%}, {c['epochs']} epochs, "
        r["setting"] += f"batch {c['batch_size']}"
    cols = ["run", "arm", "best", "runner-up", "lead [95% interval]", "tie", "chosen"]
    if not trials:
        return pd.DataFrame(columns=["run", "setting"]), pd.DataFrame(columns=cols)
    sel = pd.DataFrame([{**r, "arm": r["config"]["arm"]} for r in trials])
    grid = sel.pivot_table(index=["run", "setting"], columns="arm", values="value", sort=False)
    grid = grid.round(1).astype(object).where(grid.notna(), "not tried")
    rows = []
    for (run, arm), g in sel.groupby(["run", "arm"], sort=False):
        got = choose(g.to_dict("records"))
        best, second, (lo, hi) = got["best"], got["runner_up"], got["lead"]
        lead = best["value"] - second["value"] if second else np.nan
        said = "no outcomes kept" if lo != lo else f"{lead:+.1f} {bracket(lo, hi)}"
        tie = "yes" if got["tied"] else "no" if lo == lo else "n/a"
        rows.append([run, arm, _trial(best), _trial(second), said, tie, got["chosen"]["setting"]])
    return grid, pd.DataFrame(rows, columns=cols)
