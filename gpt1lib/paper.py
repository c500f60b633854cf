"""The paper's tables (§4, §5) beside the reproduced runs.

An average is only set against the paper's over the same tasks: Table 4's GLUE score (the
server's, nine test sets) is not reproduced; a reproduced Table 5 row has an Avg only with all
eight tasks.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import stats
from .baselines import baseline_cell, marked_cell, with_baselines
from .evaluations import (
    NO_INTERVAL,
    arrays,
    bracket,
    difference_interval,
    examples_cell,
    final_metrics,
    format_value,
    paired_mean,
    task_differences,
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
from .labels import EVAL_SPLIT_NOTES
from .tasks import TASKS

GLUE_ROW = "GLUE score (GLUE server, 9 test sets)"
#: Table 5's rows as the paper gives them: method -> task -> value.
PAPER_ROWS = {m: dict(zip(TABLE5_TASKS, v, strict=True)) for m, v in PAPER_TABLE5.items()}


def _by_task(rows: pd.DataFrame) -> dict[str, dict]:
    return {r["task"]: r for r in rows.to_dict("records")}


def _columns(got: pd.DataFrame, tasks, cells: dict) -> dict[str, list]:
    """A column per run of ``got`` and per entry of ``cells`` (its heading after the run's
    label -> (the cell of a task's row, the cell where the run has none)), a cell per task."""
    out = {}
    for run, g in got.groupby("run", sort=False):
        by_task = _by_task(g)
        for head, (cell, missing) in cells.items():
            out[run + head] = [cell(by_task[t]) if t in by_task else missing for t in tasks]
    return out


def _data_cell(row: dict) -> str:
    """What a run trained and was scored on, then its floors: "2,137 / 1,043 · 57.8 / 81.2"."""
    return f"{examples_cell(row)} · {baseline_cell(row)}"


def against_paper(records) -> pd.DataFrame:
    """One row per (run, task): the task's paper metric at the last epoch, its 95% interval,
    beside the paper's."""
    table = final_metrics(records)
    table.insert(1, "paper", [PAPER_RESULTS[t][1] for t in table.task])
    table["95% interval"] = [
        bracket(lo, hi, "none kept") for lo, hi in zip(table.lo, table.hi, strict=True)
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

    Rows are the paper's tasks; a task a run has not measured is NaN, never dropped. With
    ``intervals``, a run's cells are ``marked`` text; with ``examples``, each run's column is
    followed by its data and floors (``_data_cell``).
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
    cells = {"": (marked_cell, "missing") if intervals else (lambda r: r["value"], np.nan)}
    if examples:
        cells[" · train / eval examples · chance / one answer"] = (_data_cell, "")
    rows = (*tasks, GLUE_ROW) if table == "4" else tasks  # no run has the GLUE score
    return out.assign(**_columns(with_baselines(records, experiment), rows, cells))


def runs_table(records, experiments: str | tuple[str, ...] = "finetune") -> pd.DataFrame:
    """Every task the runs measured (rows) against the runs (columns), each cell the value with
    its 95% interval, each run's column followed by its floors."""
    got = with_baselines(records, experiments)
    if got.empty:
        return pd.DataFrame()
    tasks = [t for t in TASKS if t in set(got.task)]
    cells = {"": (marked_cell, "missing"), " · chance / one answer": (baseline_cell, "missing")}
    columns = _columns(got, tasks, cells)
    heads = [run + head for run in sorted(set(got.run)) for head in cells]
    return pd.DataFrame({h: columns[h] for h in heads}, index=[TASKS[t].title for t in tasks])


def summary_table(records) -> pd.DataFrame:
    """``runs_table`` after the paper's metric and value."""
    table = runs_table(records)
    if table.empty:
        return table
    paper = {TASKS[t].title: (metric, v) for t, (metric, v, _) in PAPER_RESULTS.items()}
    table.insert(0, "metric", [paper[t][0] for t in table.index])
    table.insert(1, "paper", [paper[t][1] for t in table.index])
    return table


def ablation_runs(records) -> dict[str, dict[str, dict[str, dict]]]:
    """run -> Table 5 method -> task -> its ``final_metrics`` row. A run with no full row of its
    own (a recorded run's full arm is its chapters 05-07 fine-tuning) takes it from that."""
    got = final_metrics(records, (*ABLATIONS.values(), "finetune"))
    runs: dict[str, dict[str, dict[str, dict]]] = {}
    for method, exp in ABLATIONS.items():
        for run, g in got[got.experiment == exp].groupby("run", sort=False):
            runs.setdefault(run, {})[method] = _by_task(g)
    full = next(iter(ABLATIONS))
    for run, g in got[got.experiment == "finetune"].groupby("run", sort=False):
        if run in runs and full not in runs[run]:
            mine = _by_task(g[g.task.isin(TABLE5_TASKS)])
            runs[run] = {full: mine, **runs[run]}
    return runs


def ablation_table(records, intervals: bool = False):
    """Table 5: the paper's rows, then one row per reproduced run and method. With
    ``intervals``, cells are text as ``paper_table``'s; the Avg's interval is of the mean over
    the eight tasks, each resampled on its own."""
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
            row += [marked_cell(c) if c else "missing" for c in cells]
            rows[f"{run}: {method}"] = row
    return pd.DataFrame.from_dict(rows, orient="index", columns=cols)


#: Table 5's headings name each column's metric so: matthews correlation, accuracy, F1, pearson.
TABLE5_METRICS = {"matthews": "mc", "accuracy": "acc", "f1": "F1", "pearson": "pc"}


def ablation_tables(records, intervals: bool = False) -> dict[str, pd.DataFrame]:
    """Table 5 once per reproduced run, turned to fit a page: its columns as rows ("CoLA (mc)"),
    and under each of the paper's four rows the paper's value and the run's."""
    long = ablation_table(records, intervals)
    kinds = [TABLE5_METRICS[PAPER_RESULTS[t][0]] for t in TABLE5_TASKS]
    index = ["Avg", *(f"{c} ({k})" for c, k in zip(TABLE5_COLUMNS, kinds, strict=True))]
    out = {}
    for run in dict.fromkeys(n.rpartition(": ")[0] for n in long.index[len(PAPER_TABLE5) :]):
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
    full row and its row without pre-training."""
    avg = ablation_table(records, intervals=True)["Avg"]
    rows = [f"paper: {m}" for m in list(PAPER_TABLE5)[:2]]
    rows += [r for r, v in avg.items() if r.endswith("(full)") and "[" in str(v)]
    return avg[rows].to_frame("Table 5's average over its eight tasks [95% interval]")


def ablation_examples(records) -> pd.DataFrame:
    """``_data_cell`` of each run's Table 5 rows, a row per task and a column per run."""
    got = with_baselines(records, tuple(ABLATIONS.values()))
    columns = _columns(got, TABLE5_TASKS, {"": (_data_cell, "")})
    return pd.DataFrame(columns, index=list(TABLE5_COLUMNS))


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


def paper_gap(a: str, b: str, tasks) -> float:
    """The mean over ``tasks`` of the paper's Table 5 row ``a`` minus its row ``b``."""
    return sum(PAPER_ROWS[a][t] - PAPER_ROWS[b][t] for t in tasks) / len(tasks)


def ablation_deltas(records) -> pd.DataFrame:
    """Each §5 finding for each reproduced run: the mean difference of the two Table 5 rows over
    the finding's tasks the run has in both, with its paired 95% interval, beside the paper's
    over the same tasks ("n/a" where no task is common)."""
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
            theirs = paper_gap(a, b, common)
            stated, why = PAPER_TABLE5_AVG[a] - PAPER_TABLE5_AVG[b], ""
            if len(common) == len(TABLE5_TASKS):
                theirs = stated
            elif tasks == TABLE5_TASKS:
                why = f"the paper's over the tasks named; over all 8 it is {stated:+.1f}"
            if lo is not None:
                interval, note = f"[{lo:.1f}, {hi:.1f}]", why
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
    rows = []
    for run, methods in ablation_runs(records).items():
        for comparison, (a, b) in COMPARISONS.items():
            got = task_differences(methods.get(a, {}), methods.get(b, {}), TABLE5_TASKS)
            rows += [(run, comparison, *d, paper_gap(a, b, [d[0]])) for d in got]
    cols = ["run", "comparison", "task", "difference", "lo", "hi", "paper"]
    return pd.DataFrame(rows, columns=cols)


def ablation_differences(records) -> pd.DataFrame:
    """``ablation_task_differences`` as text beside the paper's, and where the interval lies."""
    d = ablation_task_differences(records)
    bounds = list(zip(d.lo, d.hi, d.paper, strict=True))
    out = d[["run", "comparison"]].assign(task=[TASKS[t].title for t in d.task])
    out["run's"] = d.difference
    out["95% interval"] = [bracket(lo, hi) for lo, hi, _ in bounds]
    out["paper's"] = d.paper
    out["note"] = [NO_INTERVAL if lo != lo else excludes_zero(lo, hi, p) for lo, hi, p in bounds]
    return out


#: The aux LM's effect measured two ways: Table 5's rows (each at the protocol chosen for it)
#: and chapter 04's two settings of λ: (λ = 0.5's experiments, first found first, λ = 0's).
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
    (``AUX_LM``), with its paired 95% interval and each fine-tuning's protocol."""
    cols = ["run", "task", "measured in", "λ = 0.5 minus λ = 0", "λ = 0.5 ran at", "λ = 0 ran at"]
    exps = tuple(dict.fromkeys(e for a, b in AUX_LM.values() for e in (*a, b)))
    got = {
        (r["experiment"], r["run"], r["task"]): r
        for _, r in final_metrics(records, exps).iterrows()
    }
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
            on = [_protocol(got[e, run, task]["config"]) for e in (a, b)]
            rows.append((run, TASKS[task].title, name, said, *on))
    return pd.DataFrame(rows, columns=cols)
