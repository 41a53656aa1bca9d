"""Console metrics (issue 5, "Metrics with charts"): conflicts opened per
day, the conflict rate (conflicts per 1,000 assertions recorded), how
conflicts were resolved (by rule, by people, by later data), what happened
to clarification prompts, the median time to answer, delivery failures.
A conflict counts as resolved by people when a person settled it, through
whatever channel and under whatever actor name (:func:`how_resolved`).
Charts are server-rendered SVG: :func:`bar_chart` turns a daily series into
bar geometry a template draws. Reads only, scoped by tenant.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.db.models import Case, Count, Exists, OuterRef, Q, QuerySet, Value, When
from django.db.models.functions import TruncDate
from django.utils import timezone

from conflicts.models import ClarificationPrompt, DeliveryAttempt, ReviewTask
from facts.models import Assertion, Conflict, Tenant
from facts.resolve import RULE_TIE_CONFIRMED, RULE_TIE_CONTENT_HASH, RULE_TIE_STATED_AT

RESOLVED_BY = ("rule", "people", "later data")


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


def how_resolved(conflicts: QuerySet[Conflict]) -> dict[str, int]:
    """How the RESOLVED ``conflicts`` were settled: ``{"rule": n, "people":
    n, "later data": n}``, counted in one query whatever their number.

    Classified by what settled each one, never by the actor's name (an
    answer through the API or the ``clarification.answered`` webhook is
    recorded under ``api:<tenant>`` or whatever ``answered_by`` says):

    - people: a ``correction`` naming one of the tied values decided it
      (``tie-confirmed-by-correction``, write rule step 6); or its
      clarification prompt was answered (by the person, an agent backend on
      their behalf, or staff); or staff decided its review task; or the
      write that resolved it recorded a ``correction`` on its key ("neither,
      it is …", a person's correction from any channel). A correction's
      ``recorded_at`` is the conflict's ``resolved_at``: both are the
      ledger's clock of that one write.
    - rule: recorded as auto-resolved by the low-stakes tie rule (later
      ``stated_at``, then content hash), or settled by it after a policy
      change made the predicate low stakes.
    - later data: anything else, i.e. a later assertion that outranks the
      tie, a retraction, a revocation or an erasure.
    """
    answered = ClarificationPrompt.objects.filter(conflict=OuterRef("pk"), status=ClarificationPrompt.ANSWERED)
    decided = ReviewTask.objects.filter(conflict=OuterRef("pk"), decision__in=("confirm", "reject"))
    corrected = Assertion.objects.filter(fact_key=OuterRef("fact_key"), recorded_at=OuterRef("resolved_at"),
                                         source_kind="correction")
    how = Case(
        When(resolution_rule=RULE_TIE_CONFIRMED, then=Value("people")),
        When(Q(resolved_by="rule") | Q(resolution_rule__in=(RULE_TIE_STATED_AT, RULE_TIE_CONTENT_HASH)),
             then=Value("rule")),
        When(Exists(answered) | Exists(decided) | Exists(corrected), then=Value("people")),
        default=Value("later data"),
    )
    counts = dict(conflicts.order_by().annotate(how=how).values("how").annotate(n=Count("pk")).values_list("how", "n"))
    return {name: counts.get(name, 0) for name in RESOLVED_BY}


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
    prompts = ClarificationPrompt.objects.filter(tenant=tenant, created_at__gte=since)
    prompt_counts = {
        "asked": prompts.count(),
        "answered": prompts.filter(status=ClarificationPrompt.ANSWERED).count(),
        "expired": prompts.filter(status=ClarificationPrompt.EXPIRED).count(),
        "withdrawn": prompts.filter(status=ClarificationPrompt.WITHDRAWN).count(),
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
        resolved_by=how_resolved(resolved), prompts=prompt_counts,
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


__all__ = ["tenant_metrics", "how_resolved", "bar_chart", "share", "Metrics", "Chart"]
