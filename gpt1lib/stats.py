"""Uncertainty: 95% percentile bootstrap intervals over the evaluation examples (Efron &
Tibshirani 1993, ch. 13): resample the examples with replacement ``n`` times, score each
resample, take the 2.5th and 97.5th percentiles. The difference between two arms scored on the
same examples gets the **paired** interval: both arms take the same indices in each resample,
so what they share (an example both find easy) cancels.

``METRICS[name](predictions, labels)`` are ``tasks.compute_metrics``'s metrics (in percent) on
``(resamples, examples)`` arrays, one value per resample. The same inputs and seed give the same
interval.
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


def _distribution(metric: str | BatchMetric, n: int, seed: int, *arrays) -> np.ndarray:
    """The metric on each of ``n`` resamples of ``arrays`` = (preds, labels), or of
    metric(a) - metric(b) for (preds_a, preds_b, labels), both arms on the SAME indices."""
    if not callable(metric) and metric not in METRICS:
        raise ValueError(f"no bootstrap for metric {metric!r}; there is one for {list(METRICS)}")
    fn = metric if callable(metric) else METRICS[metric]
    *preds, labels = arrays = [np.asarray(a) for a in arrays]
    if any(a.ndim != 1 or len(a) != len(labels) for a in arrays):
        shapes = [a.shape for a in arrays]
        raise ValueError(f"predictions and labels must be 1-d and of one length; got {shapes}")
    if len(labels) == 0:
        raise ValueError("no examples: an interval needs at least one")
    chunks = []
    for i in resample_indices(len(labels), n, seed):
        scores = [fn(p[i], labels[i]) for p in preds]
        chunks.append(scores[0] - scores[1] if len(scores) == 2 else scores[0])
    return np.concatenate(chunks)


def bootstrap_interval(
    metric: str | BatchMetric, *arrays, n: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """The percentile bootstrap interval of ``metric`` (a name of ``METRICS`` or a function of
    (resamples, examples) arrays) over the examples of ``arrays``: (preds, labels), or
    (preds_a, preds_b, labels) for metric(a) - metric(b), two arms scored on the same examples
    and resampled together (the paired interval)."""
    return _percentiles(_distribution(metric, n, seed, *arrays), level)


#: The paired interval of metric(a) - metric(b): ``bootstrap_interval`` of (metric, a, b, labels).
paired_difference_interval = bootstrap_interval


def mean_interval(
    arms: list[tuple], n: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """The interval of the mean over tasks of a metric (Table 5's Avg): ``arms`` holds one
    (metric, preds, labels) per task, or one (metric, preds_a, preds_b, labels) for the mean
    of metric(a) - metric(b); each task's examples are resampled on their own (paired within
    the task), seeded per task."""
    if not arms:
        return (float("nan"), float("nan"))
    dists = [_distribution(m, n, seed + i, *arrays) for i, (m, *arrays) in enumerate(arms)]
    return _percentiles(np.mean(dists, axis=0), level)


#: The mean over tasks of metric(a) - metric(b): ``mean_interval`` of (metric, a, b, labels).
mean_difference_interval = mean_interval


def format_interval(value: float, interval: tuple[float, float] | None, digits: int = 1) -> str:
    """``"81.3 [79.1, 83.2]"``; the bare value where there is no interval."""
    if value is None or value != value:
        return "n/a"
    if interval is None or any(v != v for v in interval):
        return f"{value:.{digits}f}"
    lo, hi = interval
    return f"{value:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"
