"""Bootstrap intervals (gpt1lib.stats): the metrics on batches of resamples agree with
compute_metrics, intervals behave as intervals, and a paired difference pairs."""

import numpy as np
import pytest

from gpt1lib.stats import (
    METRICS,
    bootstrap_interval,
    format_interval,
    mean_difference_interval,
    mean_interval,
    paired_difference_interval,
)
from gpt1lib.tasks import compute_metrics, get_task

RNG = np.random.default_rng(0)


def _classes(n, k=2, right=0.7, rng=RNG):
    y = rng.integers(0, k, n)
    p = np.where(rng.random(n) < right, y, rng.integers(0, k, n))
    return p, y


@pytest.mark.parametrize(
    ("task", "metric", "k"),
    [
        ("sst2", "accuracy", 2),
        ("mnli_m", "accuracy", 3),
        ("cola", "matthews", 2),
        ("mrpc", "f1", 2),
    ],
)
def test_batch_metrics_equal_compute_metrics(task, metric, k):
    p, y = _classes(300, k)
    assert METRICS[metric](p[None], y[None])[0] == pytest.approx(
        compute_metrics(get_task(task), p, y)[metric]
    )


def test_correlations_equal_compute_metrics_with_ties():
    y = RNG.random(200) * 5
    p = np.round(y + RNG.normal(size=200), 1)  # rounded: many ties
    want = compute_metrics(get_task("stsb"), p, y)
    for metric in ("pearson", "spearman"):
        assert METRICS[metric](p[None], y[None])[0] == pytest.approx(want[metric])


def test_degenerate_cases_match_scikit_learn():
    y = np.array([0, 1, 0, 1])
    ones = np.ones(4, int)
    assert METRICS["matthews"](ones[None], y[None])[0] == 0.0  # constant predictions
    assert METRICS["f1"](np.zeros((1, 4), int), np.zeros((1, 4), int))[0] == 0.0
    assert np.isnan(METRICS["pearson"](ones[None] * 1.0, y[None] * 1.0)[0])


def test_interval_contains_the_estimate_and_is_seeded():
    p, y = _classes(400)
    lo, hi = bootstrap_interval("accuracy", p, y)
    assert lo < 100 * (p == y).mean() < hi
    assert bootstrap_interval("accuracy", p, y) == (lo, hi)  # deterministic
    assert bootstrap_interval("accuracy", p, y, seed=1) != (lo, hi)


def test_interval_shrinks_with_more_examples():
    rng = np.random.default_rng(1)
    widths = []
    for n in (100, 1600):
        p, y = _classes(n, rng=rng)
        lo, hi = bootstrap_interval("matthews", p, y)
        widths.append(hi - lo)
    assert widths[1] < widths[0] / 2.5  # about 1/sqrt(16) = 1/4


def test_accuracy_interval_matches_the_binomial_one():
    # n outcomes, a fraction q right: the bootstrap's standard error is sqrt(q (1 - q) / n)
    n, q = 2000, 0.8
    y = np.zeros(n, int)
    p = np.where(np.arange(n) < q * n, 0, 1)
    lo, hi = bootstrap_interval("accuracy", p, y, n=2000)
    half = 1.96 * 100 * np.sqrt(q * (1 - q) / n)
    assert lo == pytest.approx(80 - half, abs=0.3)
    assert hi == pytest.approx(80 + half, abs=0.3)


def test_every_interval_is_95_percent_unless_asked():
    """The default level is 95% for every interval: on a normal-shaped bootstrap its width is
    1.96 / 1.645 = 1.19 times the 90% one's (issue 47: a 90% default passed by 0.003)."""
    n = 4000
    y = np.zeros(n, int)
    p = np.where(np.arange(n) < 0.75 * n, 0, 1)
    q = np.where(np.arange(n) % 10 < 6, 0, 1)  # 60% right, paired with p
    for interval, args in (
        (bootstrap_interval, ("accuracy", p, y)),
        (paired_difference_interval, ("accuracy", p, q, y)),
        (mean_interval, ([("accuracy", p, y)],)),
        (mean_difference_interval, ([("accuracy", p, q, y)],)),
    ):
        lo, hi = interval(*args, n=4000)
        assert (lo, hi) == interval(*args, n=4000, level=0.95)
        lo90, hi90 = interval(*args, n=4000, level=0.90)
        assert (hi - lo) / (hi90 - lo90) == pytest.approx(1.96 / 1.645, abs=0.06)
    lo, hi = bootstrap_interval("accuracy", p, y, n=4000)
    assert hi - lo == pytest.approx(2 * 1.96 * 100 * np.sqrt(0.75 * 0.25 / n), rel=0.06)


def test_paired_difference_of_identical_arms_is_zero():
    p, y = _classes(300)
    assert paired_difference_interval("accuracy", p, p, y) == (0.0, 0.0)
    assert paired_difference_interval("f1", p, p, y) == (0.0, 0.0)


def test_paired_interval_is_narrower_than_two_unpaired_ones():
    # arm b is arm a with 5% of its examples flipped: the difference is small and certain
    p, y = _classes(1000)
    flip = np.random.default_rng(2).random(1000) < 0.05
    b = np.where(flip, 1 - p, p)
    d_lo, d_hi = paired_difference_interval("accuracy", p, b, y)
    diff = 100 * ((p == y).mean() - (b == y).mean())
    assert d_lo <= diff <= d_hi
    a_lo, a_hi = bootstrap_interval("accuracy", p, y)
    # unpaired, the difference of two such arms would spread sqrt(2) times one arm's interval
    assert d_hi - d_lo < 0.75 * (a_hi - a_lo)


def test_a_clear_gain_excludes_zero():
    y = np.arange(500) % 2
    a = y.copy()  # always right
    b = np.where(np.arange(500) % 4 == 0, 1 - y, y)  # wrong on a quarter
    lo, hi = paired_difference_interval("accuracy", a, b, y)
    assert lo > 15 and hi < 35


def test_means_over_tasks():
    p1, y1 = _classes(300)
    p2, y2 = _classes(300, 3)
    lo, hi = mean_interval([("accuracy", p1, y1), ("accuracy", p2, y2)])
    mean = 50 * ((p1 == y1).mean() + (p2 == y2).mean())
    assert lo < mean < hi
    same = [("accuracy", p1, p1, y1), ("matthews", p2, p2, y2)]
    assert mean_difference_interval(same) == (0.0, 0.0)
    assert np.isnan(mean_interval([])[0])


def test_fast_enough_for_a_full_dev_set():
    import time

    p, y = _classes(10_000, 3)
    t0 = time.perf_counter()
    bootstrap_interval("accuracy", p, y)
    assert time.perf_counter() - t0 < 5


def test_bad_inputs_and_formatting():
    with pytest.raises(ValueError, match="one length"):
        bootstrap_interval("accuracy", [0, 1], [0])
    with pytest.raises(ValueError, match="no examples"):
        bootstrap_interval("accuracy", [], [])
    with pytest.raises(ValueError, match="no bootstrap for metric 'bleu'"):
        bootstrap_interval("bleu", [0], [0])
    assert format_interval(81.26, (79.14, 83.2)) == "81.3 [79.1, 83.2]"
    assert format_interval(81.26, None) == "81.3"
    assert format_interval(float("nan"), None) == "n/a"
