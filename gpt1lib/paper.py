"""The paper's numbers (§4, §5) and its tables beside the reproduced runs.

An average is only ever set against the paper's average over the same tasks: Table 4's GLUE
score is the GLUE server's over nine test sets and is not reproduced here; Table 5's Avg is the
mean of its eight columns, and a reproduced row has one only with all eight. Intervals come from
``evaluations``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import stats
from .baselines import baseline_cell, marked, marked_cell, with_baselines
from .evaluations import (
    NO_INTERVAL,
    arrays,
    difference_interval,
    examples_cell,
    final_metrics,
    format_value,
    frame,
    paired_mean,
)
from .facts import (
    ABLATIONS,
    PAPER_GLUE,
    PAPER_RESULTS,
    PAPER_TABLE5,
    PAPER_TABLE5_AVG,
    PAPER_TABLES,
    TABLE5_COLUMNS,
    TABLE5_TASKS,
)
from .labels import EVAL_SPLIT_NOTES, run_label
from .tasks import TASKS

GLUE_ROW = "GLUE score (GLUE server, 9 test sets)"


def against_paper(records) -> pd.DataFrame:
    """One row per (run, task) of ``records``: the reproduced value of the task's paper metric
    at the last epoch, its 95% bootstrap interval, beside the paper's."""
    table = final_metrics(records)
    table.insert(1, "paper", [PAPER_RESULTS[t][1] for t in table.task])
    table["95% interval"] = [
        "none kept" if lo != lo else f"[{lo:.1f}, {hi:.1f}]"
        for lo, hi in zip(table.lo, table.hi, strict=True)
    ]
    table["task"] = [TASKS[t].title for t in table.task]
    return table[["task", "metric", "split", "value", "95% interval", "paper", "run", "data"]]


def paper_table(
    table: str,
    records,
    experiment: str = "finetune",
    intervals: bool = False,
    examples: bool = False,
):
    """Table 2, 3 or 4 of the paper beside the reproduced values, one column per run.

    Rows are the paper's tasks (its columns); a task a run has not measured is NaN, never
    dropped. Table 4 ends with the GLUE score, not reproduced. With ``intervals``, a run's cells
    are ``format_value`` text; with ``examples``, each run's column is followed by its data
    (``examples_cell``): what a run trained on is its data, never its name.
    """
    if table not in PAPER_TABLES:
        raise ValueError(
            f"table {table!r}: the paper's results tables here are "
            f"{sorted(PAPER_TABLES)} (Table 5 is ablation_table)"
        )
    tasks = PAPER_TABLES[table]
    out = pd.DataFrame(
        [PAPER_RESULTS[t] for t in tasks],
        columns=["metric", "paper", "best previous"],
        index=[TASKS[t].title for t in tasks],
    )
    out["eval split here"] = [EVAL_SPLIT_NOTES.get(t, TASKS[t].eval_split) for t in tasks]
    if table == "4":
        out.loc[GLUE_ROW] = ["GLUE score", *PAPER_GLUE, "not reproduced (test server)"]
    got = with_baselines(records, experiment)
    for run, g in got.groupby("run", sort=False):
        by_task = {r["task"]: r for r in g.to_dict("records")}
        rows = [by_task.get(t) for t in tasks] + [None] * (table == "4")
        cell = marked_cell if intervals else (lambda r: r["value"])
        out[run] = [cell(r) if r else "missing" if intervals else np.nan for r in rows]
        if examples:
            cells = [f"{examples_cell(r)} · {baseline_cell(r)}" if r else "" for r in rows]
            out[f"{run} · train / eval examples · chance / one answer"] = cells
    return out


def runs_table(records, experiments: str | tuple[str, ...] = "finetune") -> pd.DataFrame:
    """Every task the runs measured (rows) against the runs (columns), each cell the value with
    its 95% interval: a build's own runs in one table, whichever tasks they are."""
    got = with_baselines(records, experiments)
    if got.empty:
        return pd.DataFrame()
    got["cell"] = [marked_cell(r) for r in got.to_dict("records")]
    got["baselines"] = [baseline_cell(r) for r in got.to_dict("records")]
    order = [TASKS[t].title for t in TASKS if t in set(got.task)]
    got["task"] = [TASKS[t].title for t in got.task]
    cells = got.pivot_table(index="task", columns="run", values="cell", aggfunc="last")
    floors = got.pivot_table(index="task", columns="run", values="baselines", aggfunc="last")
    floors.columns = [f"{run} · chance / one answer" for run in floors.columns]
    table = pd.concat([cells, floors], axis=1)[
        [c for pair in zip(cells.columns, floors.columns, strict=True) for c in pair]
    ]
    return table.reindex(order).fillna("missing").rename_axis(index=None, columns=None)


def summary_table(records) -> pd.DataFrame:
    """Every task of Tables 2-4 that a run measured: the paper's value, then each run's with its
    95% interval (``runs_table``), one column a run."""
    table = runs_table(records)
    if table.empty:
        return table
    paper = {TASKS[t].title: (metric, v) for t, (metric, v, _) in PAPER_RESULTS.items()}
    table.insert(0, "metric", [paper[t][0] for t in table.index])
    table.insert(1, "paper", [paper[t][1] for t in table.index])
    return table


def ablation_runs(records) -> dict[str, dict[str, dict[str, dict]]]:
    """run -> Table 5 method -> task -> the reproduced row (last epoch) of ``final_metrics``.
    A run with no full row of its own (a recorded run's: the full arm IS chapters 05-07's
    fine-tuning, run once) takes that row from its fine-tuning."""
    got = final_metrics(records, (*ABLATIONS.values(), "finetune"))
    runs: dict[str, dict[str, dict[str, dict]]] = {}
    for method, exp in ABLATIONS.items():
        for run, g in got[got.experiment == exp].groupby("run", sort=False):
            runs.setdefault(run, {})[method] = {r["task"]: r for r in g.to_dict("records")}
    full = next(iter(ABLATIONS))
    for run, g in got[got.experiment == "finetune"].groupby("run", sort=False):
        if run in runs and full not in runs[run]:
            mine = {r["task"]: r for r in g.to_dict("records") if r["task"] in TABLE5_TASKS}
            runs[run] = {full: mine, **runs[run]}
    return runs


def ablation_table(records, intervals: bool = False):
    """Table 5: the paper's rows, then one row per reproduced run and method.

    A reproduced row has an Avg only with all eight tasks (``ablation_deltas`` compares a run
    with fewer over the tasks it has). With ``intervals``, cells are text as ``paper_table``'s;
    the Avg's interval is of the mean over the eight tasks, each resampled on its own.
    """
    cols = ["Avg", *TABLE5_COLUMNS]
    rows = {f"paper: {m}": [PAPER_TABLE5_AVG[m], *v] for m, v in PAPER_TABLE5.items()}
    for run, methods in ablation_runs(records).items():
        for method, got in methods.items():
            cells = [got.get(t) for t in TABLE5_TASKS]
            values = [c["value"] if c else float("nan") for c in cells]
            avg = sum(values) / len(values) if all(c for c in cells) else float("nan")
            if not intervals:
                rows[f"{run}: {method}"] = [avg, *values]
                continue
            lo = hi = float("nan")
            if all(c and isinstance(c["outcome"], dict) for c in cells):
                arms = [(c["metric"], *arrays(c["outcome"])) for c in cells]
                lo, hi = stats.mean_interval(arms)
            row = [format_value(avg, lo, hi)]
            row += [
                marked(t, c) if c else "missing" for t, c in zip(TABLE5_TASKS, cells, strict=True)
            ]
            rows[f"{run}: {method}"] = row
    return pd.DataFrame.from_dict(rows, orient="index", columns=cols)


#: Table 5's headings name each column's metric so: matthews correlation, accuracy, F1, pearson.
TABLE5_METRICS = {"matthews": "mc", "accuracy": "acc", "f1": "F1", "pearson": "pc"}


def ablation_tables(records, intervals: bool = False) -> dict[str, pd.DataFrame]:
    """Table 5 once per reproduced run, turned to fit a page: its columns as rows ("CoLA (mc)"),
    and under each of the paper's four rows two columns, the paper's value and the run's."""
    long = ablation_table(records, intervals)
    kinds = [TABLE5_METRICS[PAPER_RESULTS[t][0]] for t in TABLE5_TASKS]
    index = ["Avg", *(f"{c} ({k})" for c, k in zip(TABLE5_COLUMNS, kinds, strict=True))]
    out = {}
    for name in long.index[len(PAPER_TABLE5) :]:
        run = next(name.removesuffix(f": {m}") for m in ABLATIONS if name.endswith(f": {m}"))
        if run in out:
            continue
        table = pd.DataFrame(index=index)
        for method in ABLATIONS:
            table[(method, "paper")] = long.loc[f"paper: {method}"].to_numpy()
            row = long.loc[f"{run}: {method}"] if f"{run}: {method}" in long.index else None
            gap = "missing" if intervals else np.nan
            table[(method, "run")] = [gap] * len(index) if row is None else row.to_numpy()
        table.columns = pd.MultiIndex.from_tuples(table.columns)
        out[run] = table
    return out


def full_row_averages(records) -> pd.DataFrame:
    """Table 5's Avg of each run's full row (where it has all eight tasks), beside the paper's
    full row (74.7) and its row without pre-training (59.9)."""
    avg = ablation_table(records, intervals=True)["Avg"]
    rows = [f"paper: {m}" for m in list(PAPER_TABLE5)[:2]]
    rows += [r for r, v in avg.items() if r.endswith("(full)") and "[" in str(v)]
    return avg[rows].to_frame("Table 5's average over its eight tasks [95% interval]")


def ablation_examples(records) -> pd.DataFrame:
    """What each run's Table 5 rows trained and were scored on (``examples_cell``), a row per
    task and a column per run (its rows share their data)."""
    got = with_baselines(records, tuple(ABLATIONS.values()))
    table = pd.DataFrame(index=list(TABLE5_COLUMNS))
    for run, g in got.groupby("run", sort=False):
        cells = {
            r["task"]: f"{examples_cell(r)} · {baseline_cell(r)}" for r in g.to_dict("records")
        }
        table[run] = [cells.get(t, "") for t in TABLE5_TASKS]
    return table


#: The findings of §5 as differences of Table 5 rows over a set of its tasks: (row, minus row,
#: tasks). Over all eight tasks the paper's number is the one it states, from its Avgs (+14.8,
#: +5.6; its rounded columns give +14.7 and +5.5); over fewer, its columns' mean on those.
FINDINGS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "pre-training": ("Transformer w/ aux LM (full)", "Transformer w/o pre-training", TABLE5_TASKS),
    "transformer over LSTM": ("Transformer w/ aux LM (full)", "LSTM w/ aux LM", TABLE5_TASKS),
    "aux LM, larger sets": (
        "Transformer w/ aux LM (full)",
        "Transformer w/o aux LM",
        ("mnli_m", "qnli", "qqp"),
    ),
    "aux LM, smaller sets": (
        "Transformer w/ aux LM (full)",
        "Transformer w/o aux LM",
        ("cola", "mrpc", "stsb", "rte"),
    ),
}


def ablation_deltas(records) -> pd.DataFrame:
    """Each §5 finding for each reproduced run: the mean difference of the two Table 5 rows over
    the finding's tasks the run has in both, with its paired 95% interval, beside the paper's
    over the same tasks (over all eight, the number the paper states). A finding with no common
    task is a row that says so ("n/a")."""
    paper = {m: dict(zip(TABLE5_TASKS, v, strict=True)) for m, v in PAPER_TABLE5.items()}
    cols = ["run", "finding", "over the tasks", "run's", "95% interval", "paper's", "note"]
    rows = []
    for run, methods in ablation_runs(records).items():
        for finding, (a, b, tasks) in FINDINGS.items():
            got = paired_mean(methods.get(a, {}), methods.get(b, {}), tasks)
            if got is None:
                missing = ", ".join(TASKS[t].title for t in tasks)
                why = f"n/a: no task of {missing} has both rows in this run"
                rows.append((run, finding, "", np.nan, "n/a", np.nan, why))
                continue
            common, ours, lo, hi = got
            names = ", ".join(TASKS[t].title for t in common)
            theirs = sum(paper[a][t] - paper[b][t] for t in common) / len(common)
            stated, why = PAPER_TABLE5_AVG[a] - PAPER_TABLE5_AVG[b], ""
            if len(common) == len(TABLE5_TASKS):
                theirs = stated
            elif tasks == TABLE5_TASKS:
                why = f"the paper's over the tasks named; over all 8 it is {stated:+.1f}"
            if lo is not None:
                interval, note = f"[{lo:.1f}, {hi:.1f}]", why  # the verdict: findings.findings
            else:
                interval, note = "†", "; ".join(filter(None, (why, NO_INTERVAL)))
            rows.append((run, finding, names, ours, interval, theirs, note))
    return pd.DataFrame(rows, columns=cols)


def excludes_zero(lo: float, hi: float, paper: float | None = None) -> str:
    """Where the interval lies against 0, and whether that is the paper's side."""
    if lo <= 0 <= hi:
        return "interval includes 0: no difference shown"
    side = "above" if lo > 0 else "below"
    if paper is None or paper == 0:
        return f"interval {side} 0"
    agrees = (lo > 0) == (paper > 0)
    return f"interval {side} 0, {'the paper' if agrees else 'against the paper'}'s side"


#: Table 5's rows compared task by task (``ablation_task_differences``): the full row minus each
#: other row, named by what that row lacks.
COMPARISONS = {f: (a, b) for f, (a, b, _) in FINDINGS.items() if "smaller" not in f}
COMPARISONS["aux LM"] = COMPARISONS.pop("aux LM, larger sets")


def ablation_task_differences(records) -> pd.DataFrame:
    """Each comparison of ``COMPARISONS`` task by task for each run: the full row's value minus
    the other's, its paired 95% interval (NaN without outcomes) and the paper's difference."""
    paper = {m: dict(zip(TABLE5_TASKS, v, strict=True)) for m, v in PAPER_TABLE5.items()}
    rows = []
    for run, methods in ablation_runs(records).items():
        for comparison, (a, b) in COMPARISONS.items():
            va, vb = methods.get(a, {}), methods.get(b, {})
            for t in [t for t in TABLE5_TASKS if t in va and t in vb]:
                x, y = va[t], vb[t]
                iv = difference_interval(x["metric"], x["outcome"], y["outcome"])
                lo, hi = iv or (float("nan"), float("nan"))
                gap = paper[a][t] - paper[b][t]
                rows.append((run, comparison, t, x["value"] - y["value"], lo, hi, gap))
    cols = ["run", "comparison", "task", "difference", "lo", "hi", "paper"]
    return pd.DataFrame(rows, columns=cols)


def ablation_differences(records) -> pd.DataFrame:
    """``ablation_task_differences`` as a table: each difference with its interval as text
    ("†" where it has none) beside the paper's, and where the interval lies against 0."""
    d = ablation_task_differences(records)
    bounds = list(zip(d.lo, d.hi, d.paper, strict=True))
    out = d[["run", "comparison"]].assign(task=[TASKS[t].title for t in d.task])
    out["run's"] = d.difference
    out["95% interval"] = ["†" if lo != lo else f"[{lo:.1f}, {hi:.1f}]" for lo, hi, _ in bounds]
    out["paper's"] = d.paper
    out["note"] = [NO_INTERVAL if lo != lo else excludes_zero(lo, hi, p) for lo, hi, p in bounds]
    return out


#: The aux LM's effect measured two ways: Table 5's rows, each fine-tuned at the protocol chosen
#: for it, and chapter 04's two settings of λ, both at the protocol of chapters 04-08. Each:
#: (the experiments of λ = 0.5, first found first, and the experiment of λ = 0).
AUX_LM = {
    "Table 5 (this chapter)": (("ablation:full", "finetune"), "ablation:no_aux_lm"),
    "chapter 04": (("objective lambda=0.5", "finetune"), "objective lambda=0.0"),
}


def _protocol(config) -> str:
    """A fine-tuning's protocol as its record's config says: "rate 0.001, 6 epochs, batch 16"."""
    if not isinstance(config, dict) or "lr" not in config:
        return "?"
    return f"rate {config['lr']:g}, {config['epochs']} epochs, batch {config['batch_size']}"


def aux_lm_protocols(records) -> pd.DataFrame:
    """The aux LM's effect, λ = 0.5 minus λ = 0, on each task a run measured both ways
    (``AUX_LM``), with its paired 95% interval and the protocol each fine-tuning ran with."""
    cols = ["run", "task", "measured in", "λ = 0.5 minus λ = 0", "λ = 0.5 ran at", "λ = 0 ran at"]
    exps = tuple(dict.fromkeys(e for a, b in AUX_LM.values() for e in (*a, b)))
    df = frame(records)
    if df.empty or "config" not in df.columns:
        return pd.DataFrame(columns=cols)
    df = df[df.experiment.isin(exps)]
    config = {(r["experiment"], run_label(r), r["task"]): r["config"] for _, r in df.iterrows()}
    got = {(r["experiment"], r["run"], r["task"]): r for _, r in final_metrics(df, exps).iterrows()}
    rows = []
    for run, task in dict.fromkeys((run, task) for _, run, task in got):
        pairs = {
            name: (next((e for e in a if (e, run, task) in got), None), b)
            for name, (a, b) in AUX_LM.items()
        }
        if not all(a and (b, run, task) in got for a, b in pairs.values()):
            continue
        for name, (a, b) in pairs.items():
            x, y = got[a, run, task], got[b, run, task]
            iv = difference_interval(x["metric"], x["outcome"], y["outcome"])
            gap = x["value"] - y["value"]
            said = "+" * (gap > 0) + format_value(gap, *(iv or ()))
            on = [_protocol(config.get((e, run, task))) for e in (a, b)]
            rows.append((run, TASKS[task].title, name, said, *on))
    return pd.DataFrame(rows, columns=cols)
