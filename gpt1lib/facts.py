"""The paper's numbers, as data: every result of §4 and §5 this book sets its runs against.

Tables 2-4 (the test sets), Table 5 (the ablations on dev sets), what §5 states of Figure 2, and
the values Figure 2 (right) normalises the zero-shot scores by, each said once here.
"""

from __future__ import annotations

#: Tables 2-4: task -> (metric, GPT-1's value, the best previous result), in percent.
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

#: Table 5's arms, in its row order, as runs and records name them.
ARMS = ("full", "no_pretraining", "no_aux_lm", "lstm")
#: Table 5's rows, and the experiment each is recorded under here (``ablation:<arm>``).
ABLATIONS: dict[str, str] = {
    row: f"ablation:{arm}" for row, arm in zip(PAPER_TABLE5, ARMS, strict=True)
}
#: Which tasks each of the paper's results tables holds, in its column order.
PAPER_TABLES: dict[str, tuple[str, ...]] = {
    "2": ("mnli_m", "mnli_mm", "snli", "scitail", "qnli", "rte"),
    "3": ("story_cloze", "race_m", "race_h", "race"),
    "4": ("cola", "sst2", "mrpc", "stsb", "qqp"),  # then the GLUE score
}


#: Figure 2 (left): what the paper states of it, and nothing more (§5; no curve points).
PAPER_LAYER_TRANSFER = {
    "mnli_m": (
        9.0,
        '"each transformer layer provides further benefits up to 9% for full transfer on '
        'MultiNLI" (§5)',
    ),
}
#: Figure 2 (right): what the paper states of it (§5); it gives no values.
PAPER_ZERO_SHOT = (
    "the transformer's zero-shot performance is stable and steadily increases over training; "
    "the LSTM's is lower and more variable (§5; no values stated)"
)

#: Figure 2 (right)'s scale: task -> (random guess, state of the art, where the latter comes
#: from, whether it is confirmed as the single-model state of the art Figure 2 normalises by).
#: None of the four could be confirmed as that: each is the nearest value found, said so.
UNSURE = "unconfirmed: the paper does not say whether it is a single model"
ZERO_SHOT_BASELINES: dict[str, tuple[float, float, str, str]] = {
    "cola": (0.0, PAPER_RESULTS["cola"][2], "best previous result, paper Table 4 (GLUE test "
             "server, Matthews correlation)", UNSURE),
    "sst2": (50.0, PAPER_RESULTS["sst2"][2], "best previous result, paper Table 4 (GLUE test "
             "server, accuracy)", UNSURE),
    "race": (25.0, PAPER_RESULTS["race"][2], "best previous result, paper Table 3: BiAttention "
             "MRU, a 9-model ensemble (Tay et al. 2018, arXiv:1803.09074)", "unconfirmed, "
             "stands in: Table 3 lists only ensembles, and the MRU paper's single-model RACE "
             "accuracy could not be read here"),
    "dprd": (50.0, 73.05, "Rahman & Ng 2012 (EMNLP, 'Resolving Complex Cases of Definite "
             "Pronouns'), accuracy on the DPRD test set, unchecked", "unconfirmed: the "
             "paper's page and abstract found here give no accuracy figure"),
}  # fmt: skip

#: The zero-shot heuristics of Figure 2 (right), the paper's four.
ZERO_SHOT_TASKS = tuple(ZERO_SHOT_BASELINES)
#: Each heuristic scored, by the name its records give it (``config["heuristic"]``), and its
#: task: the paper's four, and SST-2's calibrated threshold (not the paper's).
HEURISTICS = {
    "cola": "cola", "sst2": "sst2", "sst2_calibrated": "sst2", "race": "race", "dprd": "dprd",
}  # fmt: skip


def normalise(task: str, value: float) -> float:
    """``value`` rescaled so that random guessing is 0 and the state of the art is 1 (task: a
    task or a heuristic of ``HEURISTICS``), Figure 2 (right)'s scale."""
    key = "race" if task.startswith("race") else HEURISTICS.get(task, task)
    lo, hi, _, _ = ZERO_SHOT_BASELINES[key]
    return (value - lo) / (hi - lo)


#: GPT-1's pre-training compute as OpenAI stated it ("AI and Compute", 2018): about 0.96
#: petaflop/s-days (8 GPUs for about 30 days), in FLOPs.
PAPER_COMPUTE_FLOPS = 0.96e15 * 86_400
