"""Uncertainty: 95% bootstrap intervals over the evaluation examples.

A reproduced number is one draw: evaluated on other examples of the same kind it would differ.
The percentile bootstrap (Efron & Tibshirani 1993, ch. 13) measures by how much: resample the
evaluation set's examples with replacement ``n`` times, score each resample, and take the 2.5th
and 97.5th percentiles of those scores. For the difference between two arms scored on the same
examples (pre-trained against from scratch, transformer against LSTM, ...) the interval is the
**paired** one: each resample takes the same example indices for both arms, so what the two
share (an example both find easy) cancels, and the interval is of the difference itself.

The metrics are those of ``tasks.compute_metrics`` (in percent), written here for a whole
batch of resamples at once: ``METRICS[name](predictions, labels)`` takes arrays of shape
``(resamples, examples)`` and returns one value per resample. Everything is seeded: the same
inputs give the same interval.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.stats import rankdata

BatchMetric = Callable[[np.ndarray, np.ndarray], np.ndarray]
#: Resamples scored at once (bounds the memory of the index matrix: 250 x examples).
CHUNK = 250


def _accuracy(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    return 100.0 * (p == y).mean(-1)


def _f1(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Binary F1 of class 1 (scikit-learn's ``f1_score``; 0 where it is undefined)."""
    tp = ((p == 1) & (y == 1)).sum(-1)
    wrong = (p != y).sum(-1)  # false positives + false negatives
    den = 2 * tp + wrong
    return 100.0 * np.divide(2 * tp, den, out=np.zeros(len(p)), where=den > 0)


def _matthews(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Matthews correlation for any number of classes (scikit-learn's multiclass form, 0
    where it is undefined), from each resample's confusion matrix."""
    p, y = p.astype(np.int64), y.astype(np.int64)
    lo = min(p.min(), y.min())
    p, y = p - lo, y - lo
    k = int(max(p.max(), y.max())) + 1
    rows = np.arange(len(p))[:, None] * k * k
    conf = np.bincount((rows + y * k + p).ravel(), minlength=len(p) * k * k)
    conf = conf.reshape(len(p), k, k).astype(float)  # [resample, true, predicted]
    s = conf.sum((1, 2))
    c = np.trace(conf, axis1=1, axis2=2)
    t, q = conf.sum(2), conf.sum(1)  # true and predicted counts per class
    num = c * s - (t * q).sum(1)
    den = np.sqrt((s**2 - (q**2).sum(1)) * (s**2 - (t**2).sum(1)))
    return 100.0 * np.divide(num, den, out=np.zeros(len(p)), where=den > 0)


def _pearson(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson's r (NaN where either side is constant, as ``compute_metrics`` says)."""
    p = p - p.mean(-1, keepdims=True)
    y = y - y.mean(-1, keepdims=True)
    den = np.sqrt((p * p).sum(-1) * (y * y).sum(-1))
    out = np.full(len(p), np.nan)
    np.divide((p * y).sum(-1), den, out=out, where=den > 0)
    return 100.0 * out


def _spearman(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho: Pearson's r of the ranks (ties given their average rank)."""
    return _pearson(rankdata(p, axis=-1), rankdata(y, axis=-1))


#: The metrics of ``TaskSpec.metrics``, each on a batch of resamples, in percent.
METRICS: dict[str, BatchMetric] = {
    "accuracy": _accuracy,
    "f1": _f1,
    "matthews": _matthews,
    "pearson": _pearson,
    "spearman": _spearman,
}


def _metric(metric: str | BatchMetric) -> BatchMetric:
    if callable(metric):
        return metric
    if metric not in METRICS:
        raise ValueError(f"no bootstrap for metric {metric!r}; there is one for {list(METRICS)}")
    return METRICS[metric]


def _arrays(*arrays) -> list[np.ndarray]:
    out = [np.asarray(a) for a in arrays]
    n = len(out[0])
    if any(a.ndim != 1 or len(a) != n for a in out):
        shapes = [a.shape for a in out]
        raise ValueError(f"predictions and labels must be 1-d and of one length; got {shapes}")
    if n == 0:
        raise ValueError("no examples: an interval needs at least one")
    return out


def resample_indices(n_examples: int, n: int = 1000, seed: int = 0):
    """The bootstrap's example indices, ``n`` rows of ``n_examples``, yielded in chunks of at
    most ``CHUNK`` rows (the same rows for the same arguments)."""
    rng = np.random.default_rng(seed)
    for start in range(0, n, CHUNK):
        yield rng.integers(0, n_examples, size=(min(CHUNK, n - start), n_examples))


def _percentiles(values: np.ndarray, level: float) -> tuple[float, float]:
    values = values[~np.isnan(values)]
    if len(values) == 0:
        return (float("nan"), float("nan"))
    tail = 100 * (1 - level) / 2
    lo, hi = np.percentile(values, [tail, 100 - tail])
    return (float(lo), float(hi))


def bootstrap_distribution(
    metric: str | BatchMetric, preds, labels, n: int = 1000, seed: int = 0
) -> np.ndarray:
    """The metric on each of ``n`` bootstrap resamples of the examples."""
    fn = _metric(metric)
    preds, labels = _arrays(preds, labels)
    return np.concatenate([fn(preds[i], labels[i]) for i in resample_indices(len(preds), n, seed)])


def bootstrap_interval(
    metric: str | BatchMetric,
    preds,
    labels,
    n: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """The percentile bootstrap interval of ``metric`` (a name of ``METRICS`` or a function of
    (resamples, examples) arrays) over the examples."""
    return _percentiles(bootstrap_distribution(metric, preds, labels, n, seed), level)


def paired_difference_distribution(
    metric: str | BatchMetric, preds_a, preds_b, labels, n: int = 1000, seed: int = 0
) -> np.ndarray:
    """metric(a) - metric(b) on each of ``n`` resamples, both arms on the SAME indices."""
    fn = _metric(metric)
    preds_a, preds_b, labels = _arrays(preds_a, preds_b, labels)
    return np.concatenate(
        [
            fn(preds_a[i], labels[i]) - fn(preds_b[i], labels[i])
            for i in resample_indices(len(labels), n, seed)
        ]
    )


def paired_difference_interval(
    metric: str | BatchMetric,
    preds_a,
    preds_b,
    labels,
    n: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """The bootstrap interval of metric(a) - metric(b), two arms scored on the same examples
    (``labels``), resampled together: the paired interval."""
    return _percentiles(
        paired_difference_distribution(metric, preds_a, preds_b, labels, n, seed), level
    )


def mean_interval(
    arms: list[tuple[str | BatchMetric, object, object]],
    n: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """The interval of the mean over tasks of a metric (Table 5's Avg): ``arms`` holds one
    (metric, preds, labels) per task; each task's examples are resampled on their own."""
    if not arms:
        return (float("nan"), float("nan"))
    dists = [bootstrap_distribution(m, p, y, n, seed + i) for i, (m, p, y) in enumerate(arms)]
    return _percentiles(np.mean(dists, axis=0), level)


def mean_difference_interval(
    arms: list[tuple[str | BatchMetric, object, object, object]],
    n: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """The interval of the mean over tasks of metric(a) - metric(b) (Table 5's Avg of a
    finding): ``arms`` holds one (metric, preds_a, preds_b, labels) per task; each task's
    examples are resampled on their own (paired within the task), seeded per task."""
    if not arms:
        return (float("nan"), float("nan"))
    dists = [
        paired_difference_distribution(m, a, b, y, n, seed + i)
        for i, (m, a, b, y) in enumerate(arms)
    ]
    return _percentiles(np.mean(dists, axis=0), level)


def format_interval(value: float, interval: tuple[float, float] | None, digits: int = 1) -> str:
    """``"81.3 [79.1, 83.2]"``; the bare value where there is no interval."""
    if value is None or value != value:
        return "n/a"
    if interval is None or any(v != v for v in interval):
        return f"{value:.{digits}f}"
    lo, hi = interval
    return f"{value:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"
