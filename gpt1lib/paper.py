"""The paper's numbers (§4, §5) and its tables beside the reproduced runs.

Tables 2-4 hold the test-set results of §4 (Table 4 the GLUE server's), Table 5 the ablations of
§5. ``paper_table`` and ``ablation_table`` put a results table's tasks, exactly the paper's,
beside one column (Table 5: one row) per reproduced run, drawn from records
(``records.read_records``). An average is only ever set against the paper's average over the
same tasks: Table 4's GLUE score is the GLUE server's over nine test sets and is not
reproduced here; Table 5's Avg is the mean of its eight columns, and a reproduced row has one
only with all eight; ``ablation_deltas`` compares the §5 findings over the tasks a run has, with
the paper's deltas over those same tasks.
"""

from __future__ import annotations

import pandas as pd

from .records import run_label
from .tasks import TASKS

#: Tables 2-4: task -> (metric, GPT-1's value, the best previous result), in percent.
#: Tables 2 and 3 report test sets; Table 4 the GLUE server's test sets.
PAPER_RESULTS: dict[str, tuple[str, float, float]] = {
    # Table 2, natural language inference (accuracy)
    "mnli_m": ("accuracy", 82.1, 80.6),
    "mnli_mm": ("accuracy", 81.4, 80.1),
    "snli": ("accuracy", 89.9, 89.3),
    "scitail": ("accuracy", 88.3, 83.3),
    "qnli": ("accuracy", 88.1, 82.3),
    "rte": ("accuracy", 56.0, 61.7),
    # Table 3, question answering and commonsense reasoning (accuracy)
    "story_cloze": ("accuracy", 86.5, 77.6),
    "race_m": ("accuracy", 62.9, 60.2),
    "race_h": ("accuracy", 57.4, 50.3),
    "race": ("accuracy", 59.0, 53.3),
    # Table 4, semantic similarity and classification (GLUE test)
    "cola": ("matthews", 45.4, 35.0),
    "sst2": ("accuracy", 91.3, 93.2),
    "mrpc": ("f1", 82.3, 86.0),
    "stsb": ("pearson", 82.0, 81.0),
    "qqp": ("f1", 70.3, 66.1),
}
#: Table 4's GLUE score (GPT-1, best previous): the GLUE server's average over its nine test
#: sets (WNLI, MNLI, QNLI, RTE among them), not the mean of Table 4's five columns.
PAPER_GLUE = (72.8, 68.9)
GLUE_ROW = "GLUE score (GLUE server, 9 test sets)"
#: Table 5, ablations: method -> values for TABLE5_TASKS (its columns, under the paper's
#: headings TABLE5_COLUMNS); "Avg" is their unweighted mean.
TABLE5_TASKS = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli_m", "qnli", "rte")
TABLE5_COLUMNS = ("CoLA", "SST2", "MRPC", "STSB", "QQP", "MNLI", "QNLI", "RTE")
PAPER_TABLE5: dict[str, tuple[float, ...]] = {
    "Transformer w/ aux LM (full)": (45.4, 91.3, 82.3, 82.0, 70.3, 81.8, 88.1, 56.0),
    "Transformer w/o pre-training": (18.9, 84.0, 79.4, 30.9, 65.5, 75.7, 71.2, 53.8),
    "Transformer w/o aux LM": (47.9, 92.0, 84.9, 83.2, 69.8, 81.1, 86.9, 54.4),
    "LSTM w/ aux LM": (30.3, 90.5, 83.2, 71.8, 68.1, 73.7, 81.1, 54.6),
}
PAPER_TABLE5_AVG = {
    "Transformer w/ aux LM (full)": 74.7,
    "Transformer w/o pre-training": 59.9,
    "Transformer w/o aux LM": 75.0,
    "LSTM w/ aux LM": 69.1,
}

#: Which tasks each of the paper's results tables holds, in its column order.
PAPER_TABLES: dict[str, tuple[str, ...]] = {
    "2": ("mnli_m", "mnli_mm", "snli", "scitail", "qnli", "rte"),
    "3": ("story_cloze", "race_m", "race_h", "race"),
    "4": ("cola", "sst2", "mrpc", "stsb", "qqp"),  # then the GLUE score
}
#: Where the split compared on here is not simply the registry's name for it.
EVAL_SPLIT_NOTES = {"qqp": "dev (no dev file: 1,000 held-apart train pairs)"}
#: The experiment names the ablation runs record under, by Table 5 row.
ABLATIONS: dict[str, str] = {
    "Transformer w/ aux LM (full)": "ablation:full",
    "Transformer w/o pre-training": "ablation:no_pretraining",
    "Transformer w/o aux LM": "ablation:no_aux_lm",
    "LSTM w/ aux LM": "ablation:lstm",
}


def final_metrics(records, experiments: str | tuple[str, ...] = "finetune"):
    """One row per (experiment, run, task): the task's paper metric on its eval split, at the
    last epoch recorded. ``records`` is a DataFrame of records (``read_records``) or a list."""
    df = pd.DataFrame(records)
    cols = ["experiment", "run", "task", "metric", "split", "value", "data", "wall_time"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    experiments = (experiments,) if isinstance(experiments, str) else experiments
    df = df[df.experiment.isin(experiments) & df.task.isin(list(TASKS))].copy()
    df["run"] = [run_label(r) for r in df.to_dict("records")]
    rows = []
    for (_, _, task), g in df.groupby(["experiment", "run", "task"], sort=False):
        spec = TASKS[task]
        g = g[(g.split == spec.eval_split) & (g.metric == spec.metrics[0])]
        if not g.empty:
            rows.append(g[g.step == g.step.max()].iloc[-1][cols].to_dict())
    return pd.DataFrame(rows, columns=cols)


def against_paper(records) -> pd.DataFrame:
    """One row per (run, task) of ``records``: the reproduced value of the task's paper metric
    at the last epoch, beside the paper's."""
    table = final_metrics(records)
    table.insert(1, "paper", [PAPER_RESULTS[t][1] for t in table.task])
    table["task"] = [TASKS[t].title for t in table.task]
    return table[["task", "metric", "split", "value", "paper", "run", "data"]]


def paper_table(table: str, records, experiment: str = "finetune"):
    """Table 2, 3 or 4 of the paper beside the reproduced values, one column per run.

    Rows are the table's tasks, exactly the paper's (its columns, here rows); a task no run has
    measured shows NaN in that run's column (never dropped). Table 4 ends with the paper's GLUE
    score, the GLUE server's over nine test sets, which no run here reproduces (NaN).
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
        values = dict(zip(g.task, g.value, strict=True))
        out[run] = [values.get(t, float("nan")) for t in tasks] + [float("nan")] * (table == "4")
    return out


def _ablation_runs(records) -> dict[str, dict[str, dict[str, float]]]:
    """run -> Table 5 method -> task -> the reproduced value (last epoch)."""
    got = final_metrics(records, tuple(ABLATIONS.values()))
    runs: dict[str, dict[str, dict[str, float]]] = {}
    for method, exp in ABLATIONS.items():
        for run, g in got[got.experiment == exp].groupby("run", sort=False):
            runs.setdefault(run, {})[method] = dict(zip(g.task, g.value, strict=True))
    return runs


def ablation_table(records):
    """Table 5: the paper's rows (its columns, in its order: Avg, then the eight tasks under
    its headings) and below them one row per reproduced run and method.

    Missing cells are NaN. "Avg" is the paper's for its rows; a reproduced row has one only when
    it has all eight tasks, the mean the paper's Avg is (else NaN: ``ablation_deltas`` compares
    a run with fewer tasks over the tasks it has).
    """
    cols = ["Avg", *TABLE5_COLUMNS]
    rows = {f"paper: {m}": [PAPER_TABLE5_AVG[m], *v] for m, v in PAPER_TABLE5.items()}
    for run, methods in _ablation_runs(records).items():
        for method, values in methods.items():
            row = [values.get(t, float("nan")) for t in TABLE5_TASKS]
            avg = sum(row) / len(row) if all(v == v for v in row) else float("nan")
            rows[f"{run}: {method}"] = [avg, *row]
    return pd.DataFrame.from_dict(rows, orient="index", columns=cols)


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
    the finding's tasks that the run has in both, beside the paper's over the same tasks,
    which are named in the row."""
    paper = {m: dict(zip(TABLE5_TASKS, v, strict=True)) for m, v in PAPER_TABLE5.items()}
    rows = []
    for run, methods in _ablation_runs(records).items():
        for finding, (a, b, tasks) in FINDINGS.items():
            va, vb = methods.get(a, {}), methods.get(b, {})
            common = [t for t in tasks if t in va and t in vb]
            if not common:
                continue
            names = ", ".join(TASKS[t].title for t in common)
            ours = sum(va[t] - vb[t] for t in common) / len(common)
            theirs = sum(paper[a][t] - paper[b][t] for t in common) / len(common)
            rows.append((run, finding, names, ours, theirs))
    return pd.DataFrame(rows, columns=["run", "finding", "over the tasks", "run's", "paper's"])
