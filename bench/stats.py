"""Summaries of latency samples."""
from __future__ import annotations

import math
from typing import Sequence


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``samples`` by linear interpolation
    between closest ranks; ``nan`` for no samples."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    pos = (len(ordered) - 1) * q
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def latency_summary(samples_seconds: Sequence[float]) -> dict:
    """``{"n", "p50_ms", "p95_ms", "p99_ms", "mean_ms"}`` of latencies given
    in seconds (the summary is in milliseconds)."""
    n = len(samples_seconds)
    mean = sum(samples_seconds) / n if n else math.nan
    return {"n": n, "p50_ms": round(percentile(samples_seconds, 0.50) * 1000, 3),
            "p95_ms": round(percentile(samples_seconds, 0.95) * 1000, 3),
            "p99_ms": round(percentile(samples_seconds, 0.99) * 1000, 3), "mean_ms": round(mean * 1000, 3)}


def ratio(value: float, baseline: float) -> float | None:
    """``value / baseline`` rounded to 2 places; ``None`` when either is
    missing or the baseline is zero."""
    if value is None or baseline is None or not baseline or math.isnan(value) or math.isnan(baseline):
        return None
    return round(value / baseline, 2)
