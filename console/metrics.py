"""Console metrics (issue 5, "Metrics with charts"): conflicts opened per
day, the conflict rate (conflicts per 1,000 assertions recorded), how
conflicts were resolved (by rule, by people, by later data), what happened
to clarification prompts, the median time to answer, delivery failures.
Charts are server-rendered SVG: :func:`bar_chart` turns a daily series into
bar geometry a template draws. Reads only, scoped by tenant.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.db.models import Count
from django.db.models.functions import TruncDate
from django.utils import timezone

from conflicts.models import ClarificationPrompt, DeliveryAttempt
from facts.models import Assertion, Conflict, Tenant

PEOPLE_PREFIXES = ("user:", "staff:")


@dataclass
class Bar:
    x: float
    y: float
    width: float
    height: float
    day: date
    value: float
    label: str


@dataclass
class Chart:
    """A bar chart's geometry in a ``width`` x ``height`` viewBox."""

    bars: list[Bar]
    width: int
    height: int
    top: float
    gridlines: list[tuple[float, str]]
    first: date
    last: date
    total: float
    title: str


def _daily(qs, field: str, *, start: date, days: int) -> list[tuple[date, int]]:
    counts = dict(qs.annotate(day=TruncDate(field)).values("day").annotate(n=Count("pk")).values_list("day", "n"))
    return [(start + timedelta(days=i), counts.get(start + timedelta(days=i), 0)) for i in range(days)]


def bar_chart(series: list[tuple[date, float]], *, title: str, unit: str = "", width: int = 560, height: int = 160) -> Chart:
    """Bar geometry for a daily series (oldest first), with three gridlines."""
    top = max([v for _, v in series] + [0]) or 1
    nice = _nice(top)
    plot_h = height - 22
    step = width / max(len(series), 1)
    bars = []
    for i, (day, value) in enumerate(series):
        h = plot_h * value / nice
        bars.append(Bar(x=round(i * step + step * 0.15, 2), y=round(plot_h - h, 2), width=round(step * 0.7, 2),
                        height=round(h, 2), day=day, value=value,
                        label=f"{day:%-d %b}: {value:g}{unit}"))
    grid = [(round(plot_h - plot_h * f, 2), f"{nice * f:g}") for f in (0, 0.5, 1)]
    return Chart(bars, width, height, nice, grid, series[0][0], series[-1][0], sum(v for _, v in series), title)


def _nice(top: float) -> float:
    for candidate in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000):
        if top <= candidate:
            return candidate
    return top


@dataclass
class Metrics:
    days: int
    conflicts: Chart
    rate: Chart
    failures: Chart
    rate_recent: float
    rate_previous: float
    opened_recent: int
    resolved_by: dict
    prompts: dict
    median_answer_seconds: float | None
    open_conflicts: int

    @property
    def rate_rising(self) -> bool:
        return self.rate_recent > self.rate_previous

    @property
    def rate_change(self) -> float | None:
        if not self.rate_previous:
            return None
        return round(100 * (self.rate_recent - self.rate_previous) / self.rate_previous)

    @property
    def median_answer_text(self) -> str:
        s = self.median_answer_seconds
        if s is None:
            return "—"
        if s < 3600:
            return f"{round(s / 60)} min"
        if s < 48 * 3600:
            return f"{s / 3600:.1f} h"
        return f"{s / 86400:.1f} days"


def _rate(conflicts: int, assertions: int) -> float:
    return round(1000 * conflicts / assertions, 1) if assertions else 0.0


def tenant_metrics(*, tenant: Tenant, days: int = 30, now: datetime | None = None) -> Metrics:
    """The console's first screen for ``tenant`` over the last ``days`` days (UTC)."""
    now = now or timezone.now()
    start = (now - timedelta(days=days - 1)).date()
    since = datetime.combine(start, datetime.min.time(), tzinfo=now.tzinfo)
    conflicts = Conflict.objects.filter(tenant=tenant, opened_at__gte=since)
    opened = _daily(conflicts, "opened_at", start=start, days=days)
    recorded = _daily(Assertion.objects.filter(tenant=tenant, recorded_at__gte=since), "recorded_at", start=start, days=days)
    rates = [(d, _rate(c, a)) for (d, c), (_, a) in zip(opened, recorded)]
    week = 7
    recent_c, recent_a = sum(c for _, c in opened[-week:]), sum(a for _, a in recorded[-week:])
    prev_c, prev_a = sum(c for _, c in opened[-2 * week:-week]), sum(a for _, a in recorded[-2 * week:-week])
    failed = DeliveryAttempt.objects.filter(tenant=tenant, at__gte=since).exclude(status_code__gte=200, status_code__lt=300)
    resolved = Conflict.objects.filter(tenant=tenant, status=Conflict.RESOLVED, resolved_at__gte=since)
    by = {"rule": 0, "people": 0, "later data": 0}
    for who in resolved.values_list("resolved_by", flat=True):
        key = "rule" if who == "rule" else "people" if who.startswith(PEOPLE_PREFIXES) else "later data"
        by[key] += 1
    prompts = ClarificationPrompt.objects.filter(tenant=tenant, created_at__gte=since)
    prompt_counts = {
        "asked": prompts.count(),
        "answered": prompts.filter(status=ClarificationPrompt.ANSWERED).count(),
        "expired": prompts.filter(status=ClarificationPrompt.EXPIRED).count(),
        "escalated": prompts.filter(escalated_at__isnull=False).count(),
        "pending": prompts.filter(status__in=ClarificationPrompt.OPEN_STATUSES).count(),
    }
    waits = [(p["answered_at"] - p["asked_at"]).total_seconds() for p in
             prompts.filter(answered_at__isnull=False).values("answered_at", "asked_at")]
    return Metrics(
        days=days,
        conflicts=bar_chart(opened, title="Conflicts opened per day"),
        rate=bar_chart(rates, title="Conflicts per 1,000 assertions"),
        failures=bar_chart(_daily(failed, "at", start=start, days=days), title="Failed delivery attempts per day"),
        rate_recent=_rate(recent_c, recent_a), rate_previous=_rate(prev_c, prev_a), opened_recent=recent_c,
        resolved_by=by, prompts=prompt_counts,
        median_answer_seconds=statistics.median(waits) if waits else None,
        open_conflicts=Conflict.objects.filter(tenant=tenant, status=Conflict.OPEN).count(),
    )


def share(parts: dict) -> list[dict]:
    """``{"name": n}`` -> rows with percentages and stacked-bar offsets (0-100)."""
    total = sum(parts.values())
    rows, offset = [], 0.0
    for name, n in parts.items():
        pct = 100 * n / total if total else 0
        rows.append({"name": name, "n": n, "pct": round(pct), "offset": round(offset, 2), "width": round(pct, 2)})
        offset += pct
    return rows


__all__ = ["tenant_metrics", "bar_chart", "share", "Metrics", "Chart"]
