"""Statistics of timing samples: summary statistics and the speedup's confidence interval.

Runs inside the verification worker (numpy and the standard library only). What is decided
from the interval (faster, slower, no measurable difference) is not here but in
``xeforge_core.verdict.speedup_call``, the one rule every consumer applies.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import numpy as np

from xeforge_core.verdict import SPEEDUP_CONFIDENCE, TimingStats

#: Bootstrap resamples for the speedup interval. With 2000 the Monte-Carlo error of a 95 %
#: percentile bound is well under the bound's own sampling error (Efron & Tibshirani, *An
#: Introduction to the Bootstrap*, 1993, §19.3, recommend at least 1000 for percentile
#: intervals); the resampling is seeded, so the same samples give the same interval.
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261201

#: Least half-width of the reported interval, as a fraction of the speedup (1 %). The
#: bootstrap sees only the noise between the samples of one run; between worker processes the
#: same pair also moves with where its buffers land and with the device's clock state, which
#: interleaving cannot cancel. The issue's A/A target band is ±2 % ([0.98, 1.02]); half of it
#: is claimed as the method's resolution, and ``benchmarks/bench_verifier.py`` checks it (A/A
#: runs and repeatability over fresh processes).
RESOLUTION_FLOOR = 0.01

INTERVAL_METHOD = (f"paired bootstrap of the ratio of medians ({BOOTSTRAP_RESAMPLES} resamples of the "
                   f"interleaved trials, percentile interval), at least ±{RESOLUTION_FLOOR:.0%}")


def stats_of(samples_us: Sequence[float], method: str) -> TimingStats:
    """Median, mean, min (µs) and coefficient of variation (stdev / mean) of ``samples_us``
    (µs per call, one value per sample). Raises ``statistics.StatisticsError`` when empty."""
    values = list(samples_us)
    mean = statistics.fmean(values)
    cv = statistics.pstdev(values) / mean if mean > 0 and len(values) > 1 else 0.0
    return TimingStats(median_us=statistics.median(values), mean_us=mean, min_us=min(values), cv=cv,
                       trials=len(values), method=method)


def median_se(samples: Sequence[float]) -> float:
    """Standard error of the median of ``samples`` (same unit), from the median absolute
    deviation: ``1.2533 x 1.4826 x MAD / sqrt(n)`` (the normal-theory efficiency of the
    median, sqrt(pi/2), times the MAD's scale to a standard deviation); 0 for fewer than two."""
    n = len(samples)
    if n < 2:
        return 0.0
    med = statistics.median(samples)
    mad = statistics.median(abs(x - med) for x in samples)
    return 1.2533 * 1.4826 * mad / n ** 0.5


def bootstrap_speedup_interval(base_us: Sequence[float], cand_us: Sequence[float], *,
                               confidence: float = SPEEDUP_CONFIDENCE, resamples: int = BOOTSTRAP_RESAMPLES,
                               seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Percentile interval at ``confidence`` of ``median(base) / median(cand)``.

    ``base_us[t]`` and ``cand_us[t]`` are the samples of trial ``t`` (taken next to each other,
    in rotated order); the bootstrap resamples whole trials, so drift shared by the two samples
    of a trial stays paired (case resampling of matched pairs; Efron & Tibshirani 1993, ch. 6
    and §13.3 for the percentile interval). Unequal lengths use the common first trials. With
    fewer than two trials the interval is the point itself. Raises ``ValueError`` for an empty
    sample or a candidate median that is not positive."""
    n = min(len(base_us), len(cand_us))
    if n == 0:
        raise ValueError("no timing samples to compute a speedup interval from")
    b = np.asarray(base_us[:n], dtype=float)
    c = np.asarray(cand_us[:n], dtype=float)
    if float(np.median(c)) <= 0:
        raise ValueError("the candidate's median time is not positive")
    point = float(np.median(b) / np.median(c))
    if n < 2:
        return point, point
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(int(resamples), n))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.median(b[idx], axis=1) / np.median(c[idx], axis=1)
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        return point, point
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(ratios, [alpha, 1.0 - alpha])
    return float(low), float(high)


def speedup_interval(base_us: Sequence[float], cand_us: Sequence[float], *,
                     confidence: float = SPEEDUP_CONFIDENCE, floor: float = RESOLUTION_FLOOR
                     ) -> tuple[float, float, float, float]:
    """``(low, high, raw_low, raw_high)``: the bootstrap interval of the speedup
    (:func:`bootstrap_speedup_interval`) widened to at least ``speedup x (1 ± floor)``
    (:data:`RESOLUTION_FLOOR`), and the bootstrap interval as it came."""
    raw_low, raw_high = bootstrap_speedup_interval(base_us, cand_us, confidence=confidence)
    n = min(len(base_us), len(cand_us))
    point = statistics.median(base_us[:n]) / statistics.median(cand_us[:n])
    return min(raw_low, point * (1.0 - floor)), max(raw_high, point * (1.0 + floor)), raw_low, raw_high
