"""The paper's numbers (§4, §5) and its tables beside the reproduced runs.

Tables 2-4 hold the test-set results of §4 (Table 4 the GLUE server's), Table 5 the ablations of
§5 on dev. ``paper_table`` and ``ablation_table`` put a results table's rows beside one column per
reproduced run, drawn from records (``records.read_records``).
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
#: Table 4's GLUE score (GPT-1, best previous).
PAPER_GLUE = (72.8, 68.9)
#: Table 5, ablations on dev: method -> values for TABLE5_TASKS; "Avg" is their mean.
TABLE5_TASKS = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli_m", "qnli", "rte")
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
    "4": TABLE5_TASKS,
}
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

    Rows are the table's tasks; a task no run has measured shows NaN in that run's column
    (never dropped). For Table 4 a "GLUE (mean of present)" row averages, per run, only the
    tasks it has, and says how many in its index.
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
    out["eval split here"] = [TASKS[t].eval_split for t in tasks]
    got = final_metrics(records, experiment)
    for run, g in got.groupby("run", sort=False):
        values = dict(zip(g.task, g.value, strict=True))
        out[run] = [values.get(t, float("nan")) for t in tasks]
    if table == "4":
        runs = out.columns[4:]  # after metric, paper, best previous, eval split here
        counts = ", ".join(f"{out[r].notna().sum()}/{len(tasks)}" for r in runs)
        means = [out[r].dropna().mean() for r in runs]  # NaN where a run has none
        label = f"GLUE (mean of present: {counts})" if len(runs) else "GLUE"
        out.loc[label] = ["mean", *PAPER_GLUE, "dev", *means]
    return out


def ablation_table(records):
    """Table 5: the paper's rows and the reproduced ones (from ``ABLATIONS`` experiments).

    Missing cells are NaN; "Avg" is the paper's for its rows and, for reproduced rows, the
    mean of the cells present, with their count in "n".
    """
    cols = [TASKS[t].title for t in TABLE5_TASKS]
    rows = {f"paper: {m}": [*v, PAPER_TABLE5_AVG[m], len(v)] for m, v in PAPER_TABLE5.items()}
    got = final_metrics(records, tuple(ABLATIONS.values()))
    for method, exp in ABLATIONS.items():
        for run, g in got[got.experiment == exp].groupby("run", sort=False):
            values = dict(zip(g.task, g.value, strict=True))
            row = [values.get(t, float("nan")) for t in TABLE5_TASKS]
            present = [v for v in row if v == v]
            avg = sum(present) / len(present) if present else float("nan")
            rows[f"{run}: {method}"] = [*row, avg, len(present)]
    return pd.DataFrame.from_dict(rows, orient="index", columns=[*cols, "Avg", "n"])
