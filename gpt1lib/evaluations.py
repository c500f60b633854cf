"""A run's final evaluations, read from its records, with their 95% bootstrap intervals.

Every reproduced number the results pages show comes from here, and Figure 2's points. An
interval comes from the evaluation's per-example outcomes (``records.per_example_record``); a
difference of two arms scored on the same examples gets the paired one. Records without
outcomes stand without an interval (``NO_INTERVAL``). A score's baselines (``chance``,
``one_answer_score``) are defined here and read beside each evaluation in ``baselines``.
"""

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
    """(the headline records, this build's records, whether the build's are in the headline).
    This build's join the recorded runs only at a recorded scale (``results_dir/<scale>``): a
    smoke build's run on the fixtures is a check that the code runs, not a result."""
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


def _outcomes(df: pd.DataFrame) -> dict[tuple, dict]:
    """Each evaluation's per-example outcomes, by ``_key`` (the last one where repeated)."""
    if df.empty or "metric" not in df.columns:
        return {}
    pe = df[df.metric == PER_EXAMPLE]
    return {
        _key(r): r["per_example"]
        for r in pe.to_dict("records")
        if isinstance(r.get("per_example"), dict)
    }


def arrays(outcome: dict) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(outcome["predictions"]), np.asarray(outcome["labels"])


@lru_cache(maxsize=4096)
def _interval(metric: str, preds: tuple, labels: tuple) -> tuple[float, float]:
    return stats.bootstrap_interval(metric, np.array(preds), np.array(labels))


def interval_of(metric: str, outcome: dict | None) -> tuple[float, float] | None:
    """The 95% bootstrap interval of ``metric`` on one evaluation's outcomes (None: none)."""
    if not isinstance(outcome, dict):
        return None
    return _interval(metric, tuple(outcome["predictions"]), tuple(outcome["labels"]))


def paired(a: dict | None, b: dict | None) -> bool:
    """Whether two evaluations scored the same examples in the same order (so that their
    difference has a paired interval)."""
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
    """(the common tasks, mean of a - b over them, lo, hi): the paired 95% interval of that mean
    (``stats.mean_difference_interval``); lo and hi None where a pair was not scored on the same
    examples. None where no task is common."""
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


def with_outcomes(df: pd.DataFrame) -> pd.DataFrame:
    """Metric rows of ``df`` with their evaluation's outcomes (``outcome``, None where the run
    kept none) and the interval of their value (``lo``, ``hi``, NaN where none)."""
    found = _outcomes(df)
    df = df[df.metric != PER_EXAMPLE].copy()
    df["outcome"] = [found.get(_key(r)) for r in df.to_dict("records")]
    bounds = [
        interval_of(m, o) or (np.nan, np.nan) for m, o in zip(df.metric, df.outcome, strict=True)
    ]
    df["lo"] = [b[0] for b in bounds]
    df["hi"] = [b[1] for b in bounds]
    return df


def final_metrics(records, experiments: str | tuple[str, ...] = "finetune"):
    """One row per (experiment, run, task): the task's paper metric on its eval split at the last
    epoch, with its 95% interval (``lo``, ``hi``; NaN without outcomes), the outcomes and the
    run's training examples. ``records``: a DataFrame (``read_records``) or a list."""
    df = frame(records)
    cols = ["experiment", "run", "task", "metric", "split", "value", "lo", "hi", "data"]
    cols += ["wall_time", "outcome", "examples"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    experiments = (experiments,) if isinstance(experiments, str) else experiments
    df = df[df.experiment.isin(experiments) & df.task.isin(list(TASKS))].copy()
    df["run"] = [run_label(r) for r in df.to_dict("records")]
    df["examples"] = [c.get("train_examples") if isinstance(c, dict) else None for c in df.config]
    rows = []
    for (_, _, task), g in df.groupby(["experiment", "run", "task"], sort=False):
        spec = TASKS[task]
        g = g[(g.split == spec.eval_split) & g.metric.isin([spec.metrics[0], PER_EXAMPLE])]
        g = with_outcomes(g)
        if not g.empty:
            rows.append(g[g.step == g.step.max()].iloc[-1][cols].to_dict())
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
    """What a run trained and was scored on: "2,137 / 1,043" (training / evaluation examples;
    "?" where its records do not say)."""
    n, outcome = row.get("examples"), row.get("outcome")
    train = f"{int(n):,}" if n == n and n is not None else "?"
    scored = f"{len(outcome['labels']):,}" if isinstance(outcome, dict) else "?"
    return f"{train} / {scored}"


# ---------------------------------------------------------------- Figure 2's points


def layer_transfer_points(records) -> pd.DataFrame:
    """Figure 2 (left): one row per (run, task, split, n_transfer), the accuracy after the last
    epoch with its 95% interval. Split "train" is the training examples scored each epoch
    (dashed in the figure), "dev" the evaluation split."""
    df = frame(records)
    cols = ["run", "task", "split", "n_transfer", "value", "lo", "hi", "outcome", "data"]
    cols += ["examples", "wall_time"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    df = df[(df.experiment == "layer_transfer") & df.metric.isin(["accuracy", PER_EXAMPLE])]
    if df.empty:
        return pd.DataFrame(columns=cols)
    df = with_outcomes(df)
    df["n_transfer"] = [int(c["n_transfer"]) for c in df.config]
    df["examples"] = [c.get("train_examples") for c in df.config]
    df["run"] = [run_label(r) for r in df.to_dict("records")]
    df["split"] = df.split.map(lambda s: "train" if s == "train" else "dev")
    last = df.step == df.groupby(["run", "task", "n_transfer"]).step.transform("max")
    df = df[last].drop_duplicates(["run", "task", "split", "n_transfer"], keep="last")
    return df.sort_values(["run", "task", "split", "n_transfer"])[cols].reset_index(drop=True)


def zero_shot_points(records) -> pd.DataFrame:
    """Figure 2 (right): one row per (run, model, task, checkpoint): the metric and its 95%
    interval, both also on ``facts.normalise``'s scale. A heuristic that gave ONE answer to every
    example (``answer``) has no normalised value: its accuracy is that answer's share of the
    labels, and normalising it by 50% chance would rank constant models by label balance alone."""
    df = frame(records)
    cols = ["run", "model", "task", "heuristic", "split", "step", "value", "lo", "hi"]
    cols += ["normalised", "nlo", "nhi", "examples", "answer", "outcome"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    df = df[df.experiment == "zero_shot"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    df = with_outcomes(df)
    df["model"] = [{"GPT": "Transformer", "LSTMLM": "LSTM"}[c["arch"]] for c in df.config]
    df["run"] = [run_label(r) for r in df.to_dict("records")]
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


#: A model that gave one answer to this share of an evaluation's examples or more is read as
#: giving one answer (366 of 408 the same is as telling as 408).
NEARLY_ONE = 0.9


def answer_share(outcome) -> tuple[float, int]:
    """(the commonest prediction, how many examples got it) of one evaluation's outcomes."""
    values, counts = np.unique(np.asarray(outcome["predictions"]), return_counts=True)
    return float(values[counts.argmax()]), int(counts.max())


def one_answer(task: str, outcome) -> str | None:
    """The one answer a model gave to every example of an evaluation, or to ``NEARLY_ONE`` of
    them or more (a class name, "answer k", or a score; ``how_many`` says to how many), or None
    where its answers vary or it kept no outcomes."""
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
    """To how many examples a model gave its commonest answer: "to all 408", "to 366 of the
    408"."""
    n, (_, count) = len(outcome["predictions"]), answer_share(outcome)
    return f"to all {n:,}" if count == n else f"to {count:,} of the {n:,}"


def chance(task: str, labels=None) -> float | None:
    """A task's expected score on its paper metric when answering at random with even odds:
    1 / classes or answers for accuracy, 0 for a correlation, and for F1 of class 1 the share p
    of class 1 among ``labels`` over p + 1/2 (precision p, recall 1/2; None without labels)."""
    spec = TASKS[HEURISTICS.get(task, task)]
    metric = spec.metrics[0]
    if metric == "accuracy":
        return 100 / (spec.n_answers or len(spec.labels))
    if metric != "f1":
        return 0.0
    share = np.mean(np.asarray(labels) == 1) if labels is not None else None
    return None if share is None else 100 * share / (share + 0.5)


def one_answer_score(task: str, labels) -> float:
    """The best score of giving one answer to every example (``labels``: the evaluation's):
    the commonest class's accuracy, the F1 of answering class 1, 0 for a correlation."""
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
    scale's selection rows, a file of their own (results/sweeps/cpu_finetune_select.jsonl)."""
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
        said = "no outcomes kept" if lo != lo else f"{lead:+.1f} [{lo:.1f}, {hi:.1f}]"
        tie = "yes" if got["tied"] else "no" if lo == lo else "n/a"
        rows.append([run, arm, _trial(best), _trial(second), said, tie, got["chosen"]["setting"]])
    return grid, pd.DataFrame(rows, columns=cols)
