"""The results pages' figures and tables: the recorded-benchmark figure (A.4: a run may lack a
variant, and CPU and GPU speeds share one axis); Table 5 split by run with the same numbers;
Tables 2-5's bars never putting two metric kinds on one axis, each run's bar with its floors;
the forest plot of Table 5's differences, one row a task; and the L2 figure."""

import matplotlib
import numpy as np
import pandas as pd

from gpt1lib import paper, plots
from gpt1lib.evaluations import chance
from gpt1lib.facts import ABLATIONS, PAPER_RESULTS, TABLE5_COLUMNS
from gpt1lib.figures_layout import KINDS
from gpt1lib.records import make_record, per_example_record
from gpt1lib.tasks import TASKS, compute_metrics

matplotlib.use("Agg")


def test_bench_figure_draws_no_bar_for_a_variant_a_run_lacks():
    rows = [
        ("cpu", "gpt1lib:matrix", "tokens_per_s", 481.0),
        ("cpu", "transformers", "tokens_per_s", 480.0),
        ("gpu compiled", "transformers", "tokens_per_s", 333_727.0),
    ]
    rows += [(run, v, "mfu", 0.5) for run, v, _, _ in rows]
    kept = pd.DataFrame(rows, columns=["run", "variant", "metric", "value"])
    fig = plots.bench_figure(kept)
    speed, mfu = fig.axes[:2]
    assert speed.get_xscale() == "log"  # 481 and 333,727 both readable
    assert sum(len(c.patches) for c in speed.containers) == 3  # none for gpt1lib:matrix on the GPU
    texts = [t.get_text() for t in speed.texts]
    assert "333,727" in texts and not any("nan" in t for t in texts)


def test_tables_show_floats_to_one_decimal_even_beside_interval_strings():
    table = pd.DataFrame({"CoLA": [45.4, "8.3 [1.9, 15.0]", float("nan")], "n": [486, 550, 1]})
    html = plots.show_table(table).to_html()
    assert "45.4<" in html and "45.400000" not in html and "8.3 [1.9, 15.0]" in html
    assert "missing" in html and ">486<" in html


# ---------------------------------------------------------------- Tables 2-5 and their figures
# Hand-built records (as tests/test_findings.py's): each arm N examples of a task, "good"
# answering 80% right, "weak" 2 in 3, so that every number below is known without a model.

N = 200
RUN = {"scale": "small", "commit": "abc", "device": "NVIDIA H100 80GB HBM3", "seed": 0}


def _arm(experiment: str, tasks, quality: str = "good", **fields) -> list[dict]:
    """A metric record and its per-example record for each of ``tasks``."""
    out = []
    for task in tasks:
        spec = TASKS[task]
        if spec.family == "similarity" and not spec.labels:  # STS-B: scores 0..5, Pearson
            y = [float(i % 6) for i in range(N)]
            noise = 0.5 if quality == "good" else 2.0
            preds = [v + noise * ((i * 7) % 10) / 10 for i, v in enumerate(y)]
        else:
            k = spec.n_answers or len(spec.labels)
            y = [i % k for i in range(N)]
            wrong = 5 if quality == "good" else 3  # one in 5 wrong, or one in 3
            preds = [(v + 1) % k if i % wrong == 0 else v for i, v in enumerate(y)]
        metric = spec.metrics[0]
        value = compute_metrics(spec, np.array(preds), np.array(y))[metric]
        where = {"task": task, "split": spec.eval_split, "step": 3, "experiment": experiment}
        where |= RUN | fields
        uids = [f"{task}-{i}" for i in range(N)]
        out += [make_record(metric, value, **where), per_example_record(preds, y, uids, **where)]
    return out


FIVE = ("cola", "sst2", "mrpc", "stsb", "rte")  # the four metric kinds
RECORDS = (
    _arm("finetune", FIVE)
    + _arm("ablation:no_pretraining", FIVE, "weak")
    + _arm("ablation:lstm", FIVE[:3], "weak")
    + _arm("ablation:no_pretraining", ("sst2", "rte"), "weak", seed=1)  # a second run
    + _arm("ablation:full", ("sst2", "rte"), seed=1)
)


def _kinds(ax) -> set[str]:
    """The metric kinds of the tasks named on ``ax``'s x axis."""
    titles = {TASKS[t].title: PAPER_RESULTS[t][0] for t in PAPER_RESULTS}
    return {titles[t.get_text()] for t in ax.get_xticklabels() if t.get_text()}


def test_table5_per_run_holds_the_long_tables_numbers():
    for intervals in (False, True):
        long = paper.ablation_table(RECORDS, intervals)
        tables = paper.ablation_tables(RECORDS, intervals)
        assert len(tables) == 2 and len(long) == 4 + 3 + 2  # the paper's rows, then the runs'
        shown = 0
        for run, table in tables.items():
            assert list(table.index[:2]) == ["Avg", "CoLA (mc)"] and table.shape == (9, 8)
            for method in ABLATIONS:
                paper_row = long.loc[f"paper: {method}"].tolist()
                assert table[(method, "paper")].tolist() == paper_row
                got = table[(method, "run")].tolist()
                if f"{run}: {method}" in long.index:
                    want = long.loc[f"{run}: {method}"].tolist()
                    assert got == want or (not intervals and np.allclose(got, want, equal_nan=True))
                    shown += 1
                else:  # a row the run lacks
                    assert all(c == "missing" for c in got) if intervals else np.isnan(got).all()
        assert shown == len(long) - 4  # every reproduced row, once
    cpu = tables["small run, NVIDIA H100 80GB HBM3, commit abc, seed 0"]
    assert cpu.loc["SST2 (acc)", ("Transformer w/ aux LM (full)", "run")].startswith("80.0 [")
    assert cpu.loc["SST2 (acc)", ("Transformer w/ aux LM (full)", "paper")] == 91.3


def test_ablation_examples_has_a_row_per_task_and_a_column_per_run():
    table = paper.ablation_examples(RECORDS)
    assert list(table.index) == list(TABLE5_COLUMNS) and table.shape[1] == 2
    # SST-2, no training count kept; 100 of each label: chance 50, one answer 50
    assert table.iloc[1].tolist() == ["? / 200 · 50.0 / 50.0"] * 2


def test_results_bars_never_put_two_metric_kinds_on_one_axis():
    fig = plots.results_bars(RECORDS)
    bars = [ax for ax in fig.axes if ax.get_xticklabels()]
    kinds = [_kinds(ax) for ax in bars]
    assert all(len(k) == 1 for k in kinds) and len(bars) == 4  # accuracy, F1, MCC, Pearson
    for ax, (kind,) in zip(bars, kinds, strict=True):
        assert ax.get_ylabel() == plots.KINDS[kind][1]
    # each run's bar carries its floors: chance dotted, the one answer's score as an x
    (sst2,) = [ax for ax in bars if "SST-2" in [t.get_text() for t in ax.get_xticklabels()]]
    crosses = [y for line in sst2.lines if line.get_marker() == "x" for y in line.get_ydata()]
    assert [y for y in crosses if y == y] == [50.0, 50.0]  # RTE, SST-2; the paper's bars none
    dotted = [line.get_ydata()[0] for line in sst2.lines if line.get_linestyle() == ":"]
    assert [y for y in dotted if y == y] == [chance("rte"), chance("sst2")]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(t.startswith("chance") for t in legend) and any("one answer" in t for t in legend)


def test_ablation_figure_never_puts_two_metric_kinds_on_one_axis():
    fig = plots.ablation_figure(RECORDS)
    kinds = [_kinds(ax) for ax in fig.axes if ax.get_xticklabels()]
    assert len(kinds) == 3 * 4 and all(len(k) == 1 for k in kinds)  # paper + 2 runs, 4 kinds


def test_forest_plot_has_one_row_per_task_difference():
    diffs = paper.ablation_task_differences(RECORDS)
    assert len(diffs) == 5 + 3 + 2  # pre-training on five tasks, LSTM on three; seed 1: two
    assert diffs.lo.notna().all() and (diffs.difference > 0).all()  # good minus weak
    fig = plots.ablation_forest(RECORDS)
    rows = []
    for ax in fig.axes:  # one axis a run and metric kind, each saying its kind
        labels = ax.get_yticklabels()
        mine = [t.get_text() for t in labels if t.get_fontweight() != "bold"]
        kinds = {PAPER_RESULTS[t][0] for t in TASKS if TASKS[t].title in mine}
        assert len(kinds) == 1 and ax.get_xlabel().endswith(KINDS[kinds.pop()][1])
        rows += mine
        assert ax.get_xlim()[0] < 0 < ax.get_xlim()[1]  # the line at 0 in view
    assert len(rows) == len(diffs) and "CoLA" in rows and "STS-B" in rows
    paper_marks = [ln for ax in fig.axes for ln in ax.lines if ln.get_marker() == "D"]
    assert sorted(float(ln.get_xdata()[0]) for ln in paper_marks) == sorted(diffs.paper)
    shown = paper.ablation_differences(RECORDS)  # the table, from the same numbers
    assert list(shown["run's"]) == list(diffs.difference) and len(shown) == len(diffs)


def test_underfitting_figure_has_a_dot_per_fine_tuning_red_where_not_below_the_prior():
    where = {"split": "train_loss", "step": 3, "experiment": "finetune"} | RUN
    config = {"lm_coef": 0.5, "batch_size": 8, "epochs": 3, "train_examples": 80}
    recs = []
    for task, loss in (("sst2", 0.5), ("rte", 0.7)):  # the prior's loss is 0.69 for both
        recs.append(make_record("task_loss", loss, task=task, config=config, **where))
        recs.append(make_record("prior_task_loss", 0.69, task=task, config=config, **where))
    fig = plots.underfitting_figure(recs)
    (ax,) = fig.axes
    rows = [t.get_text() for t in ax.get_yticklabels()[1:]]  # under the group's name
    dots = dict(zip(rows, [c.lines[0] for c in ax.containers], strict=True))
    assert list(dots) == ["SST-2", "RTE"]
    assert dots["SST-2"].get_color() == "C0" and dots["RTE"].get_color() == "C3"
    assert plots.underfitting_figure([]) is None
