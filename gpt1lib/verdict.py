"""The verdict first, from the records alone, for the top of a page: which of the paper's
findings each recorded run shows, how far its scores sit from the paper's and how many show
nothing learned, its pre-training compute against GPT-1's, and where a reader reruns it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .baselines import with_baselines
from .evaluations import frame
from .facts import PAPER_COMPUTE_FLOPS, PAPER_RESULTS
from .findings import findings
from .flops import model_flops_per_token
from .labels import PRETRAIN_EXPERIMENTS, pretrained, run_label
from .model import GPTConfig


def _compute(records: pd.DataFrame, run: str) -> float | None:
    """A run's GPT pre-training FLOPs (``flops.model_flops_per_token`` times its tokens)."""
    gpt = records[records.experiment == PRETRAIN_EXPERIMENTS["gpt"]]
    gpt = [r for r in gpt.to_dict("records") if run_label(r) == run]
    if not gpt or "gpt" not in (ups := pretrained(records).get(run, {})):
        return None
    cfg = GPTConfig(**gpt[-1]["config"]["model"]["config"])
    return model_flops_per_token(cfg, cfg.n_ctx) * ups["gpt"][1]


#: Where a reader reruns what the box reports.
RERUN = (
    "every chapter at smoke scale on any CPU in minutes (<code>make book</code>); the cpu run "
    "in about 1 h 45 min on two CPU cores (<code>make record SCALE=cpu</code>); the small run "
    "within one 15-minute lease of an H100 (<code>make record SCALE=small</code>); any "
    "chapter on a Colab GPU from the badge at its top"
)


def verdict_box(records) -> str:
    """What each recorded run reproduces, as the HTML of a box."""
    df = frame(records)
    table, scores = findings(df), with_baselines(df, "finetune")
    lines = []
    for run, f in table.groupby("run", sort=False):
        held = list(f.finding[f.verdict == "yes"])
        said = f"{len(held)} of the paper's {len(f)} findings hold" + (
            f" ({', '.join(held)})" if held else ""
        )
        if len(s := scores[scores.run == run]):
            gaps = np.array([PAPER_RESULTS[t][1] for t in s.task]) - s.value.to_numpy()
            said += (
                f"; its {len(s)} task scores sit a median {np.median(gaps):.0f} points below "
                f"the paper's (from {gaps.min():.0f} to {gaps.max():.0f} below), "
                f"{int(s.nothing.sum())} of them no better than one answer"
            )
        if (flops := _compute(df, run)) is not None:
            share = float(f"{PAPER_COMPUTE_FLOPS / flops:.2g}")
            said += f"; its pre-training used about 1/{share:,.0f} of GPT-1's compute"
        lines.append(f"<li><b>{run}</b>: {said}.</li>")
    return (
        '<div class="admonition important"><p class="admonition-title">The verdict</p>'
        f"<ul>{''.join(lines)}</ul><p>Rerun it yourself: {RERUN}.</p></div>"
    )
