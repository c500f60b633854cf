"""The layouts the results figures share (``plots``): bars by metric kind (Tables 2-5: no two
kinds share an axis; a reproduced bar carries its interval and its floors, the paper's neither)
and rows of dots (a forest plot: each dot with its interval and the paper's value)."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np

from .baselines import floors
from .facts import PAPER_RESULTS
from .tasks import TASKS

#: Each paper metric's kind: its short name and the axis it is drawn on, one axis a kind.
KINDS = {
    "accuracy": ("acc", "accuracy (%)"),
    "f1": ("F1", "F1 (%)"),
    "matthews": ("MCC", "MCC (× 100)"),
    "pearson": ("Pearson", "Pearson correlation (× 100)"),
}
#: A reproduced bar's floors as drawn on it (``bar``), under what its legend says of them.
FLOORS = {
    "chance: answering at random": {"color": "black", "ls": ":", "lw": 1.5},
    "one answer to every example (its best score)": {"color": "black", "marker": "x", "ls": ""},
}
#: The paper's value on a row of dots, as drawn (``dot_rows``).
PAPER_MARK = {"marker": "D", "mfc": "none", "mec": "C3", "ls": "", "ms": 5}


def heading(ax_or_fig, text: str, width: int = 90, **kw) -> None:
    """A figure's title (a figure's suptitle, or an axis' title), wrapped at ``width``."""
    wrapped = "\n".join(textwrap.wrap(text, width))
    if hasattr(ax_or_fig, "suptitle"):
        ax_or_fig.suptitle(wrapped, fontsize=10, **kw)
    else:
        ax_or_fig.set_title(wrapped, fontsize=10, **kw)


def bar(row: dict) -> tuple:
    """A reproduced bar from a ``final_metrics`` row: (value, lo, hi, chance, the one answer's
    score)."""
    return row["value"], row["lo"], row["hi"], *floors(row["task"], row.get("outcome"))


def paper_bars(values: dict) -> dict:
    """The paper's bars (task -> value): no interval, no floors."""
    return {t: (v, *[np.nan] * 4) for t, v in values.items()}


def grouped_bars(ax, tasks: list[str], series: dict) -> bool:
    """Bars of each series (name -> task -> ``bar``'s tuple) over ``tasks`` side by side, with
    intervals and floors. Returns whether any interval was drawn."""
    width = 0.8 / max(len(series), 1)
    x = np.arange(len(tasks))
    drew = False
    dotted, cross = FLOORS.values()
    for i, (name, cells) in enumerate(series.items()):
        got = np.array([cells.get(t, (np.nan,) * 5) for t in tasks], dtype=float).reshape(-1, 5)
        values, lo, hi, floor, one = got.T
        pos = x - 0.4 + width * (i + 0.5)
        ax.bar(pos, values, width, label=name, color=f"C{i}")
        has = ~np.isnan(lo) & ~np.isnan(values)
        if has.any():
            err = np.vstack([values[has] - lo[has], hi[has] - values[has]])
            ax.errorbar(pos[has], values[has], yerr=err, fmt="none", ecolor="black", capsize=2)
            drew = True
        for p, f in zip(pos, floor, strict=True):
            ax.plot([p - width / 2, p + width / 2], [f, f], **dotted)
        ax.plot(pos, one, ms=5, mew=1.2, **cross)
    for i, t in enumerate(tasks):  # a task no series has: said on the axis
        if all(t not in cells or np.isnan(cells[t][0]) for cells in series.values()):
            ax.text(x[i], 1, "not run", ha="center", va="bottom", fontsize=8, color="grey")
    ax.set_xticks(x, [TASKS[t].title for t in tasks], rotation=30 * (len(tasks) > 2), ha="right")
    return drew


def kind_panels(panels: dict, tasks: list[str], width: float, height: float):
    """``grouped_bars`` for each of ``panels`` (a name -> its series) in a row, a column per
    metric kind. Returns the figure and whether any interval was drawn."""
    kinds = {k: [t for t in tasks if PAPER_RESULTS[t][0] == k] for k in KINDS}
    kinds = {k: ts for k, ts in kinds.items() if ts}
    ratios = [len(ts) + 1 for ts in kinds.values()]  # each column as wide as its tasks
    grid = {"squeeze": False, "sharey": "col", "width_ratios": ratios}
    size = (width, height * len(panels) + 1.6)
    fig, axes = plt.subplots(len(panels), len(kinds), figsize=size, **grid)
    drew = False
    for row, (name, series) in zip(axes, panels.items(), strict=True):
        for ax, (kind, ts) in zip(row, kinds.items(), strict=True):
            drew |= grouped_bars(ax, ts, series)
            ax.set_ylabel(KINDS[kind][1], fontsize=9)
            ax.axhline(0, color="grey", lw=0.8)
        row[0].set_title(name, loc="left", fontsize=9)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    handles += [plt.Line2D([], [], **style) for style in FLOORS.values()]
    fig.legend(handles, labels + list(FLOORS), loc="lower left", ncol=2, fontsize=8, frameon=False)
    return fig, drew


def dot_rows(panels: dict, xlabel: str | dict, legend: dict, width: float = 9.5):
    """Panels stacked (a name -> its groups: a group's name -> its rows, each (label, value,
    lo, hi, paper, colour), NaN for none), on one x axis (``xlabel`` a string) or each on its
    own (``xlabel``: a panel's name -> its label); ``legend``: a label -> its marker's style."""
    sizes = [sum(len(rows) + 1 for rows in groups.values()) for groups in panels.values()]
    grid = {"squeeze": False, "sharex": isinstance(xlabel, str), "height_ratios": sizes}
    size = (width, 0.24 * sum(sizes) + 1.5 * len(panels) + 0.8)
    fig, axes = plt.subplots(len(panels), 1, figsize=size, **grid)
    for ax, (name, groups) in zip(axes[:, 0], panels.items(), strict=True):
        labels, bold = [], []
        for group, rows in groups.items():
            bold.append(len(labels))
            labels.append(group)
            for label, value, lo, hi, paper, colour in rows:
                y, err = len(labels), [[value - lo], [hi - value]] if lo == lo else None
                ax.errorbar(value, y, xerr=err, fmt="o", color=colour, ms=4, capsize=2)
                ax.plot(paper, y, **PAPER_MARK)
                labels.append(label)
        ax.set_yticks(range(len(labels)), labels, fontsize=8)
        for k in bold:
            ax.get_yticklabels()[k].set_fontweight("bold")
        ax.set_ylim(len(labels) - 0.5, -0.7)
        ax.axvline(0, color="grey", lw=0.8)
        ax.margins(x=0.06)  # a dot at the edge whole
        ax.set_title(name, loc="left", fontsize=9)
        if isinstance(xlabel, dict):
            ax.set_xlabel(xlabel[name], fontsize=9)
    if isinstance(xlabel, str):
        axes[-1, 0].set_xlabel(xlabel, fontsize=9)
    handles = [plt.Line2D([], [], **{"ls": "", **style}) for style in legend.values()]
    fig.legend(handles, list(legend), loc="lower left", ncol=2, fontsize=8, frameon=False)
    return fig
