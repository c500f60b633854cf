"""The tasks' metrics, scored as the paper reports them."""

from __future__ import annotations

import numpy as np

from .registry import TaskSpec


def compute_metrics(
    task: TaskSpec, predictions: np.ndarray, labels: np.ndarray
) -> dict[str, float]:
    """The task's metrics (scikit-learn and scipy), as percentages like the paper's."""
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

    fns = {
        "accuracy": lambda: accuracy_score(labels, predictions),
        "matthews": lambda: matthews_corrcoef(labels, predictions),
        "f1": lambda: f1_score(labels, predictions),
        "pearson": lambda: pearsonr(predictions, labels)[0],
        "spearman": lambda: spearmanr(predictions, labels)[0],
    }
    return {m: 100.0 * float(fns[m]()) for m in task.metrics}
