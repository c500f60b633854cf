"""The results chapters' figures and table styling, drawn from records in the layouts of
``figures_layout``. A figure's title names its run; it has error bars where the run kept
outcomes, and the paper's value only where the paper states one."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from .baselines import underfitting
from .evaluations import (
    NO_INTERVAL,
    chance,
    final_metrics,
    heuristic_title,
    layer_transfer_points,
    results_records,
    zero_shot_points,
)
from .facts import (
    ABLATIONS,
    HEURISTICS,
    PAPER_LAYER_TRANSFER,
    PAPER_RESULTS,
    PAPER_ZERO_SHOT,
    TABLE5_TASKS,
)
from .figures_layout import KINDS, PAPER_MARK, bar, dot_rows, heading, kind_panels, paper_bars
from .labels import short_runs
from .paper import COMPARISONS, PAPER_ROWS, ablation_runs, ablation_task_differences, against_paper
from .runtime import say
from .tasks import TASKS

NO_BARS = "no error bars: recorded before per-example outcomes were kept"


def style() -> None:
    """The book's plotting style (seaborn's white grid)."""
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")


def show(figs) -> None:
    """Put each figure (one, a list, or None) on the page, once, then close it."""
    from IPython.display import display

    for fig in figs if isinstance(figs, list) else [figs] if figs is not None else []:
        display(fig)
        plt.close(fig)


def this_build(ch, part: str):
    """A results chapter's "this build's run" section: the records of ``ch.run_dir(part)`` and
    whether they are at a recorded scale, after ``build_note``."""
    _, build, joined = results_records(ch.results_dir, ch.run_dir(part), ch.scale)
    build_note(ch.scale, joined)
    return build, joined


def build_note(scale: str, joined: bool) -> None:
    """The line a results chapter opens its "this build's run" section with."""
    if scale == "smoke":
        say("this build's run (smoke scale, fixtures): a check that the code runs, not a result")
    elif joined:
        say(f"this build's run is at the recorded scale {scale}: it is in the tables above too")
    else:
        say(f"this build's run ({scale} scale, not a recorded scale): shown here only")


def show_table(table: pd.DataFrame, caption: str = ""):
    """A table for a page: runs under their short names, numbers to one decimal, gaps as
    "missing", no row numbers, and a caption that says which run is which and what "†" means."""
    plain = table.index.name is None and pd.api.types.is_integer_dtype(table.index)
    table, runs = short_runs(table)
    notes = [caption] if caption else []
    if table.astype(str).apply(lambda c: c.str.contains("†")).any().any():
        notes.append(NO_INTERVAL)
    notes += [f"Runs: {runs}"] if runs else []
    styled = table.style.format(_cell, na_rep="missing")
    if plain:
        styled = styled.hide(axis="index")
    return styled.set_caption(". ".join(notes)) if notes else styled


def _cell(value):
    """A table cell as a page shows it: a float to one decimal (also in a mixed column)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | np.integer):
        return f"{value:,}"
    return f"{value:.1f}" if isinstance(value, float | np.floating) else value


def results_bars(records, title: str = "Tables 2-4"):
    """Tables 2-4 as bars: the paper's value and each run's, for every task a run measured."""
    runs = final_metrics(records)
    if runs.empty:
        return None
    tasks = [t for t in PAPER_RESULTS if t in set(runs.task)]
    series = {"paper (test sets)": paper_bars({t: PAPER_RESULTS[t][1] for t in tasks})}
    for run, g in runs.groupby("run", sort=False):
        series[run] = {r["task"]: bar(r) for r in g.to_dict("records")}
    fig, drew = kind_panels({"": series}, tasks, 12, 4.2)
    names = "; ".join(runs.run.unique())
    heading(fig, f"{title}: the paper against {names}" + ("" if drew else f" ({NO_BARS})"), 110)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


def ablation_figure(records):
    """Table 5 as bars: a row of panels for the paper and one per run."""
    panels = {"paper": {m: paper_bars(v) for m, v in PAPER_ROWS.items()}}
    for run, methods in ablation_runs(records).items():
        panels[run] = {m: {t: bar(r) for t, r in methods.get(m, {}).items()} for m in ABLATIONS}
    fig, drew = kind_panels(panels, list(TABLE5_TASKS), 12, 3.0)
    note = "" if drew else f" ({NO_BARS})"
    heading(fig, f"Table 5: the ablations, the paper and each run{note}", y=1.0)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


def ablation_forest(records):
    """``paper.ablation_task_differences`` as rows of dots: a panel per run and metric kind, a
    group per comparison. None without any."""
    d = ablation_task_differences(records)
    if d.empty:
        return None
    d = d.assign(kind=[PAPER_RESULTS[t][0] for t in d.task])
    panels, axis = {}, {}
    for (run, kind, comparison), g in d.groupby(["run", "kind", "comparison"], sort=False):
        name = f"{run} · {KINDS[kind][0]}"  # one axis a run and metric kind
        other = COMPARISONS[comparison][1].removeprefix("Transformer ")
        rows = [
            (TASKS[t].title, v, lo, hi, p, "black")
            for t, v, lo, hi, p in zip(g.task, g.difference, g.lo, g.hi, g.paper, strict=True)
        ]
        panels.setdefault(name, {})[f"{comparison} (full minus {other})"] = rows
        axis[name] = f"full model minus the other row: {KINDS[kind][1]}"
    legend = {
        "the run's difference, with its paired 95% interval": {"marker": "o", "c": "k"},
        "paper (Table 5): the difference on that task": PAPER_MARK,
    }
    fig = dot_rows(panels, axis, legend)
    note = "" if d.lo.notna().any() else f" ({NO_BARS})"
    heading(fig, f"Table 5 task by task: the full model minus each other row{note}")
    fig.tight_layout(rect=(0, 0.02, 1, 0.99))
    return fig


def underfitting_figure(records):
    """``baselines.underfitting`` drawn: each task's L2 minus the label prior's loss, red where it
    is not below 0. None where no run's L2 is known."""
    table = underfitting(records)
    if table.empty:
        return None
    panels = {}
    for (run, row), g in table.groupby(["run", "row"], sort=False):
        gaps = zip(g.task, g["L2 minus prior"].astype(float), strict=True)
        rows = [(t, v, np.nan, np.nan, np.nan, "C3" if v >= 0 else "C0") for t, v in gaps]
        where = ", ".join(dict.fromkeys(g.get("prior from", [])))  # the labels the prior is of
        panels.setdefault(run, {})[f"{row} · prior of the {where}" if where else row] = rows
    legend = {
        "below the prior's loss: learned more than the label prior": {"marker": "o", "c": "C0"},
        "not below: learned the label prior and nothing more": {"marker": "o", "c": "C3"},
    }
    fig = dot_rows(panels, "L2 after the last epoch minus the loss of the label prior", legend)
    heading(fig, "What each fine-tuning learned beyond the label prior: its L2 against the prior's")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def _transfer_curves(ax, g: pd.DataFrame, colors: dict) -> bool:
    """Dev accuracy with its intervals (solid), train (dashed); whether an interval was drawn."""
    drew = False
    dodge = {t: 0.06 * (i - (len(colors) - 1) / 2) for i, t in enumerate(colors)}
    for (task, split), d in g.groupby(["task", "split"], sort=False):
        d = d.sort_values("n_transfer")
        label = f"{TASKS[task].title} ({split})"
        style = {"color": colors[task], "marker": "o", "ms": 4}
        if split == "dev":  # nudged sideways a little, so that the tasks' bars do not overlap
            has = d.lo.notna()
            err = np.vstack([d.value - d.lo, d.hi - d.value])
            err = np.where(has.to_numpy(), err, 0)
            x = d.n_transfer + dodge[task]
            ax.errorbar(x, d.value, yerr=err, capsize=3, label=label, **style)
            drew |= bool(has.any())
        else:
            ax.plot(d.n_transfer, d.value, ls="--", alpha=0.7, label=label, **style)
    return drew


def _transfer_references(ax, g: pd.DataFrame, colors: dict) -> None:
    """Each task's chance (dotted) and the paper's stated gain of full transfer, as a star above
    the run's embeddings-only point."""
    top = int(g.n_transfer.max())
    for task in g.task.unique():
        if (level := chance(task)) is not None:
            ax.axhline(level, color=colors[task], ls=":", lw=1)
        dev = g[(g.task == task) & (g.split == "dev") & (g.n_transfer == 0)]
        if task in PAPER_LAYER_TRANSFER and not dev.empty and top > 0:
            gain, base = PAPER_LAYER_TRANSFER[task][0], float(dev.value.iloc[0])
            ax.plot([top, top], [base, base + gain], color=colors[task], ls=":", lw=1.5)
            said = f"paper, {TASKS[task].title}: full transfer up to +{gain:g} over embeddings "
            said += "only (drawn from this run's embeddings-only point)"
            star = {"marker": "*", "ms": 12, "color": colors[task], "ls": "none"}
            ax.plot(top, base + gain, label=said, **star)
    ax.plot([], [], color="grey", ls=":", label="chance (dotted, each task's colour)")


def _transfer_data(g: pd.DataFrame) -> str:
    """What one run's sweep cost and trained and scored on, for its figure's title."""
    minutes = g.drop_duplicates(["task", "n_transfer"]).wall_time.sum() / 60
    dev = g[g.split == "dev"].dropna(subset=["outcome"])
    scored = {len(o["labels"]) for o in dev.outcome}
    data = ", ".join(
        f"{TASKS[t].title} trained on {int(d.examples.max()):,}"
        for t, d in g.groupby("task", sort=False)
        if d.examples.notna().any()
    ) + (f", scored on {'/'.join(f'{n:,}' for n in sorted(scored))} dev" if scored else "")
    return f"{minutes:.0f} min of fine-tuning · {data}"


def layer_transfer_figures(records) -> list:
    """Figure 2 (left), one figure per run: accuracy against the blocks transferred."""
    figs = []
    for run, g in layer_transfer_points(records).groupby("run", sort=False):
        fig, ax = plt.subplots(figsize=(8.5, 5.6))
        palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        colors = {t: palette[i % len(palette)] for i, t in enumerate(g.task.unique())}
        drew = _transfer_curves(ax, g, colors)
        _transfer_references(ax, g, colors)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set(xlabel="blocks transferred (-1: nothing, 0: embeddings only)", ylabel="accuracy (%)")
        note = "" if drew else f"; {NO_BARS}"
        heading(ax, f"Figure 2 (left): {run} · {_transfer_data(g)}{note}", 90)
        handles, labels = ax.get_legend_handles_labels()
        order = sorted(range(len(labels)), key=lambda i: ("(dev)" not in labels[i], i))
        below = {"loc": "upper left", "bbox_to_anchor": (0, -0.16), "fontsize": 8, "frameon": False}
        ax.legend([handles[i] for i in order], [labels[i] for i in order], ncol=2, **below)
        fig.tight_layout()
        figs.append(fig)
    return figs


def zero_shot_figures(records) -> list:
    """Figure 2 (right), one figure per run and one panel per heuristic: its normalised score
    against pre-training updates; a checkpoint that gave every example one answer is a cross on
    the 0 line. The paper states no value of the figure: what it finds is in the caption."""
    pts = zero_shot_points(records)
    figs = []
    styles = {"Transformer": ("-", "C0"), "LSTM": ("--", "C1")}
    for run, g in pts.groupby("run", sort=False):
        tasks = [t for t in HEURISTICS if t in set(g.heuristic)]
        cols = min(2, len(tasks))
        rows = -(-len(tasks) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.2 * rows + 1), squeeze=False)
        drew = constant = False
        for ax, task in zip(axes.flat, tasks, strict=False):
            for model, d in g[g.heuristic == task].groupby("model", sort=False):
                d = d.sort_values("step")
                ls, color = styles[model]
                ax.plot(d.step, d.normalised, ls=ls, marker="o", ms=3, color=color, label=model)
                if d.nlo.notna().any():
                    ax.fill_between(d.step, d.nlo, d.nhi, color=color, alpha=0.12, lw=0)
                    drew = True
                one = d[d.answer.map(lambda a: isinstance(a, str))]
                ax.plot(one.step, [0] * len(one), "x", color=color, ms=7, mew=1.5)
                constant |= not one.empty
            ax.axhline(0, color="grey", lw=0.8)
            ax.axhline(1, color="grey", lw=0.8, ls=":")
            ax.set(xscale="log", title=heuristic_title(task), xlabel="pre-training updates")
            ax.set_ylabel("relative performance" if ax in axes[:, 0] else "")
        for ax in axes.flat[len(tasks) :]:
            ax.remove()
        handles, labels = axes.flat[0].get_legend_handles_labels()
        if constant:
            handles.append(plt.Line2D([], [], ls="none", marker="x", color="grey", mew=1.5))
            labels.append("one answer for every example: no point of the curve")
        top = {"loc": "upper center", "bbox_to_anchor": (0.5, 0.93), "ncol": 3}
        fig.legend(handles, labels, fontsize=8, frameon=False, **top)
        examples = int(g.examples.max()) if g.examples.notna().any() else "?"
        note = "" if drew else f"; {NO_BARS}"
        heading(fig, f"Figure 2 (right): {run} · up to {examples} examples a task{note}", 100)
        caption = "y: relative performance (0 = random guess, 1 = state of the art). "
        caption += f"paper: {PAPER_ZERO_SHOT}"
        fig.text(0.01, 0.005, "\n".join(textwrap.wrap(caption, 140)), fontsize=7.5)
        fig.tight_layout(rect=(0, 0.05, 1, 0.88))
        figs.append(fig)
    return figs


def show_finetuning(results: dict, scale: str):
    """A fine-tuning chapter's results: a line per task, each task's metric by epoch (its
    evaluation split's paper metric), and the table against the paper."""
    fig, ax = plt.subplots(figsize=(6.5, 3.5))
    for name, r in results.items():
        spec, m = TASKS[name], r.metrics
        metric = spec.metrics[0]
        say(
            f"{spec.title}: {spec.eval_split} {metric} {r.final[metric]:.1f} after the last "
            f"epoch ({r.train_time:.1f} s training)"
        )
        g = m[(m.split == spec.eval_split) & (m.metric == metric)]
        if not g.empty:
            ax.plot(g.epoch, g.value, marker="o", label=spec.title)
    ax.set(xlabel="epoch", ylabel="eval metric (%)", title=f"fine-tuning, {scale} scale")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend()
    show(fig)
    table = against_paper([rec for r in results.values() for rec in r.records])
    return show_table(table, "the last epoch's metric against the paper's")


def bench_figure(kept: pd.DataFrame):
    """A.1: tokens per second and MFU of each variant, a group of bars per recorded run
    (``kept``: bench records with ``run`` and ``variant`` columns)."""
    runs = list(dict.fromkeys(kept.run))
    variants = list(dict.fromkeys(kept.variant))
    height = 2.2 + 0.9 * len(runs) * max(len(variants), 1) / 2
    fig, axes = plt.subplots(1, 2, figsize=(12, height), sharey=True)
    y = np.arange(len(runs))
    bar = 0.8 / max(len(variants), 1)
    shown = {"tokens_per_s": ("tokens / s", "{x:,.0f}"), "mfu": ("MFU", "{x:.0%}")}
    for ax, (metric, (label, fmt)) in zip(axes, shown.items(), strict=True):
        for i, variant in enumerate(variants):
            d = kept[(kept.metric == metric) & (kept.variant == variant)]
            values = d.groupby("run").value.median().reindex(runs)
            has = values.notna().to_numpy()
            pos = y - 0.4 + bar * (i + 0.5)
            bars = ax.barh(pos[has], values[has], bar, label=variant, color=f"C{i}")
            ax.bar_label(bars, [fmt.format(x=v) for v in values[has]], padding=3, fontsize=8)
        ax.set(xlabel=label)
        if metric == "mfu":
            ax.margins(x=0.15)  # room for the labels
        else:  # a CPU's hundreds and a GPU's hundreds of thousands on one axis
            ax.set_xscale("log")
            ax.set_xlim(right=ax.get_xlim()[1] * 8)  # room for the labels
        ax.xaxis.set_major_formatter(fmt)  # after the scale, which sets its own
    axes[0].set_yticks(y, ["\n".join(textwrap.wrap(r, 34)) for r in runs], fontsize=8)
    axes[0].invert_yaxis()
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    heading(fig, "A.1: recorded benchmarks (each row: preset · batch × sequence · device · commit)")
    fig.tight_layout()
    return fig
