"""The paper's numbers (§4, §5) and its tables beside the reproduced runs.

Tables 2-4 hold the test-set results of §4 (Table 4 the GLUE server's), Table 5 the ablations of
§5. ``paper_table`` and ``ablation_table`` put a results table's tasks, exactly the paper's,
beside one column (Table 5: one row) per reproduced run, drawn from records
(``records.read_records``). An average is only ever set against the paper's average over the
same tasks: Table 4's GLUE score is the GLUE server's over nine test sets and is not
reproduced here; Table 5's Avg is the mean of its eight columns, and a reproduced row has one
only with all eight; ``ablation_deltas`` compares the §5 findings over the tasks a run has, with
the paper's deltas over those same tasks.

Every reproduced number comes with its 95% bootstrap interval over the evaluation examples
(``stats``) where its run recorded per-example outcomes (``records.per_example_record``), and
every difference between two arms (``ablation_deltas``, ``ablation_differences``,
``findings.layer_transfer_gains``) with the interval of the paired difference. Records made before
those outcomes were kept have none: their numbers stand without an interval (``NO_INTERVAL``).
``results_records`` splits the recorded runs from this build's (Figure 2's data and the figures
are in ``plots``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import stats
from .evaluations import (
    NO_INTERVAL,
    arrays,
    difference_interval,
    examples_cell,
    final_metrics,
    format_value,
    paired,
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
from .tasks import TASKS

GLUE_ROW = "GLUE score (GLUE server, 9 test sets)"
#: Where the split compared on here is not simply the registry's name for it.
EVAL_SPLIT_NOTES = {"qqp": "dev (no dev file: 1,000 held-apart train pairs)"}


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

    Rows are the table's tasks, exactly the paper's (its columns, here rows); a task no run has
    measured shows NaN in that run's column (never dropped). Table 4 ends with the paper's GLUE
    score, the GLUE server's over nine test sets, which no run here reproduces (NaN). With
    ``intervals``, a run's cells are text: the value and its 95% bootstrap interval
    (``format_value``: "81.3 [79.1, 83.2]", "56.5 †" where the run kept no outcomes, "missing").
    With ``examples``, each run's column is followed by its data, "<run> · train / eval
    examples" (``examples_cell``): what a run trained on is its data, never its name.
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
    got = final_metrics(records, experiment)
    for run, g in got.groupby("run", sort=False):
        cells = {t: (v, lo, hi) for t, v, lo, hi in zip(g.task, g.value, g.lo, g.hi, strict=True)}
        nan = (float("nan"),) * 3
        rows = [cells.get(t, nan) for t in tasks] + [nan] * (table == "4")
        out[run] = [format_value(*c) if intervals else c[0] for c in rows]
        if examples:
            data = {r["task"]: examples_cell(r) for r in g.to_dict("records")}
            out[f"{run} · train / eval examples"] = [data.get(t, "") for t in tasks] + [""] * (
                table == "4"
            )
    return out


def runs_table(records, experiments: str | tuple[str, ...] = "finetune") -> pd.DataFrame:
    """Every task the runs of ``records`` measured (rows, by title) against the runs
    (columns), each cell the value with its 95% interval (``format_value``): a build's own runs
    in one table, whichever tasks they are."""
    got = final_metrics(records, experiments)
    if got.empty:
        return pd.DataFrame()
    got["cell"] = [format_value(*v) for v in zip(got.value, got.lo, got.hi, strict=True)]
    order = [TASKS[t].title for t in TASKS if t in set(got.task)]
    got["task"] = [TASKS[t].title for t in got.task]
    table = got.pivot_table(index="task", columns="run", values="cell", aggfunc="last")
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
    """Table 5: the paper's rows (its columns, in its order: Avg, then the eight tasks under
    its headings) and below them one row per reproduced run and method.

    Missing cells are NaN. "Avg" is the paper's for its rows; a reproduced row has one only when
    it has all eight tasks, the mean the paper's Avg is (else NaN: ``ablation_deltas`` compares
    a run with fewer tasks over the tasks it has). With ``intervals``, a reproduced row's cells
    are text with their 95% bootstrap interval (the Avg's: of the mean over the eight tasks,
    each resampled on its own), as ``paper_table``'s.
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
            row += [format_value(c["value"], c["lo"], c["hi"]) if c else "missing" for c in cells]
            rows[f"{run}: {method}"] = row
    return pd.DataFrame.from_dict(rows, orient="index", columns=cols)


def full_row_averages(records) -> pd.DataFrame:
    """Table 5's Avg of each run's full row (where it has all eight tasks), beside the paper's
    full row (74.7) and its row without pre-training (59.9)."""
    avg = ablation_table(records, intervals=True)["Avg"]
    rows = [f"paper: {m}" for m in list(PAPER_TABLE5)[:2]]
    rows += [r for r, v in avg.items() if r.endswith("(full)") and "[" in str(v)]
    return avg[rows].to_frame("Table 5's average over its eight tasks [95% interval]")


def ablation_examples(records) -> pd.DataFrame:
    """What each run's Table 5 rows trained and were scored on, per task (its rows share
    their data): "train / eval examples" (``examples_cell``), a row per run."""
    got = final_metrics(records, tuple(ABLATIONS.values()))
    rows = {}
    for run, g in got.groupby("run", sort=False):
        cells = {r["task"]: examples_cell(r) for r in g.to_dict("records")}
        rows[run] = [cells.get(t, "") for t in TABLE5_TASKS]
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(TABLE5_COLUMNS))


#: The findings of §5 as differences of Table 5 rows over a set of its tasks: (row, minus row,
#: tasks). The paper states the first two from its rounded Avgs (+14.8, +5.6); over its columns
#: they are +14.7 and +5.5.
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
    the finding's tasks that the run has in both, with the 95% interval of that paired mean
    difference (each task's examples resampled on their own, the same indices for both rows),
    beside the paper's over the same tasks, which are named in the row. A finding the run has
    no common task for is a row of its own that says so ("n/a")."""
    paper = {m: dict(zip(TABLE5_TASKS, v, strict=True)) for m, v in PAPER_TABLE5.items()}
    cols = ["run", "finding", "over the tasks", "run's", "95% interval", "paper's", "note"]
    rows = []
    for run, methods in ablation_runs(records).items():
        for finding, (a, b, tasks) in FINDINGS.items():
            va, vb = methods.get(a, {}), methods.get(b, {})
            common = [t for t in tasks if t in va and t in vb]
            if not common:
                missing = ", ".join(TASKS[t].title for t in tasks)
                why = f"n/a: no task of {missing} has both rows in this run"
                rows.append((run, finding, "", np.nan, "n/a", np.nan, why))
                continue
            names = ", ".join(TASKS[t].title for t in common)
            ours = sum(va[t]["value"] - vb[t]["value"] for t in common) / len(common)
            theirs = sum(paper[a][t] - paper[b][t] for t in common) / len(common)
            pairs = [(va[t], vb[t]) for t in common]
            if all(paired(x["outcome"], y["outcome"]) for x, y in pairs):
                arms = [
                    (x["metric"], *arrays(x["outcome"])[:1], *arrays(y["outcome"]))
                    for x, y in pairs
                ]
                lo, hi = stats.mean_difference_interval(arms)
                interval, note = f"[{lo:.1f}, {hi:.1f}]", ""  # the verdict: findings.findings
            else:
                interval, note = "†", NO_INTERVAL
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


def ablation_differences(records) -> pd.DataFrame:
    """Each §5 comparison task by task for each run: the full model's value minus the other
    row's, its paired 95% interval, and the paper's difference on that task."""
    paper = {m: dict(zip(TABLE5_TASKS, v, strict=True)) for m, v in PAPER_TABLE5.items()}
    comparisons = {f: (a, b) for f, (a, b, _) in FINDINGS.items() if "smaller" not in f}
    comparisons["aux LM"] = comparisons.pop("aux LM, larger sets")
    rows = []
    for run, methods in ablation_runs(records).items():
        for finding, (a, b) in comparisons.items():
            va, vb = methods.get(a, {}), methods.get(b, {})
            for t in [t for t in TABLE5_TASKS if t in va and t in vb]:
                x, y = va[t], vb[t]
                iv = difference_interval(x["metric"], x["outcome"], y["outcome"])
                rows.append(
                    (
                        run,
                        finding,
                        TASKS[t].title,
                        x["value"] - y["value"],
                        "†" if iv is None else f"[{iv[0]:.1f}, {iv[1]:.1f}]",
                        paper[a][t] - paper[b][t],
                        NO_INTERVAL
                        if iv is None
                        else excludes_zero(*iv, paper[a][t] - paper[b][t]),
                    )
                )
    cols = ["run", "comparison", "task", "run's", "95% interval", "paper's", "note"]
    return pd.DataFrame(rows, columns=cols)
