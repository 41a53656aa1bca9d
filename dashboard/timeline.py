"""Geometry of a memory's history picture: an SVG timeline with valid time on
the horizontal axis and one bar per version, coloured by status, with the
moments each source was learned and retracted marked (issue 4, "history").

Pure: takes API.md history versions (ISO strings) and returns numbers the
template draws. Units are SVG user units; times are UTC.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from dashboard.words import STATUS_LABELS, day, parse_iso, status_words, value_text

WIDTH = 760
ROW = 46
TOP = 8
AXIS = 34
SIDE = 14
# A generous width of one character of a bar's label (12.5px, semi-bold):
# enough to tell a label that would run past the right edge.
LABEL_CHAR = 8.0
# Statuses the page's fixed legend does not show; drawn only when a bar has them.
EXTRA_LEGEND = ("scheduled", "ended", "conflict", "erased")


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    status: str
    label: str
    title: str
    open_end: bool
    label_end: float | None = None  # set: the label ends there (the right edge) instead of starting at the bar
    words: str = ""  # the status in words, when the rule that decided says more than the status name

    @property
    def label_x(self) -> float:
        return self.x if self.label_end is None else self.label_end

    @property
    def label_anchor(self) -> str:
        return "start" if self.label_end is None else "end"

    @property
    def label_y(self) -> float:
        return self.y - 5

    @property
    def fade_x(self) -> float:
        return round(self.x + self.width - min(40.0, self.width), 1)

    @property
    def fade_width(self) -> float:
        return min(40.0, self.width)

    @property
    def status_label(self) -> str:
        """Beside the value; none for a forgotten version, whose label says it already."""
        if self.status == "erased":
            return ""
        return self.words or STATUS_LABELS.get(self.status, self.status)


@dataclass(frozen=True)
class Marker:
    x: float
    y: float
    kind: str  # "learned" | "retracted"
    title: str

    @property
    def cross(self) -> str:
        """SVG path of a cross centred on the marker."""
        return f"M{self.x - 5} {self.y - 5} l10 10 m0 -10 l-10 10"


@dataclass(frozen=True)
class Tick:
    x: float
    label: str


@dataclass
class Timeline:
    width: int
    height: int
    axis_y: float
    now_x: float
    bars: list[Bar] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    ticks: list[Tick] = field(default_factory=list)

    @property
    def tick_y(self) -> float:
        return self.axis_y + 16

    @property
    def extra_legend(self) -> list[tuple[str, str]]:
        """``(status, label)`` for the statuses drawn here that the fixed legend lacks."""
        drawn = {b.status for b in self.bars}
        return [(s, STATUS_LABELS[s]) for s in EXTRA_LEGEND if s in drawn]


def _ticks(start: datetime, end: datetime, scale) -> list[Tick]:
    """About six ticks on round dates: years, months or days by span."""
    span_days = (end - start).days
    if span_days > 6 * 365:
        step = max(1, math.ceil(span_days / 365 / 6))
        points = [datetime(y, 1, 1, tzinfo=start.tzinfo) for y in range(start.year + 1, end.year + 1, step)]
        fmt = lambda d: f"{d.year}"  # noqa: E731
    elif span_days > 60:
        months = (end.year - start.year) * 12 + end.month - start.month
        step = max(1, math.ceil(months / 6))
        points, y, m = [], start.year, start.month
        while True:
            m += 1
            if m > 12:
                y, m = y + 1, 1
            d = datetime(y, m, 1, tzinfo=start.tzinfo)
            if d > end:
                break
            if ((y - start.year) * 12 + m - start.month) % step == 0:
                points.append(d)
        fmt = lambda d: f"{d:%b %Y}"  # noqa: E731
    else:
        step = max(1, math.ceil(max(span_days, 1) / 6))
        first = datetime(start.year, start.month, start.day, tzinfo=start.tzinfo) + timedelta(days=1)
        points = [first + timedelta(days=i) for i in range(0, max(span_days, 1) + 1, step) if first + timedelta(days=i) <= end]
        fmt = day
    return [Tick(round(scale(p), 1), fmt(p)) for p in points]


def build_timeline(*, versions: list[dict], now: datetime, width: int = WIDTH) -> Timeline:
    """Lay out ``versions`` (oldest first) as bars, one row each. An open
    valid time (``valid_to`` null) runs to the right edge. The axis spans
    every valid time, learned and retracted moment, and now, with a margin."""
    moments = [now]
    for v in versions:
        moments += [parse_iso(v["valid_from"]), parse_iso(v["valid_to"])]
        for s in v["sources"]:
            moments += [parse_iso(s["recorded_at"]), parse_iso(s.get("retracted_at"))]
    moments = [m for m in moments if m is not None]
    start, end = min(moments), max(moments)
    pad = max((end - start) * 0.06, timedelta(days=2))
    # Padded, but never past the calendar's ends (a claim from the year 1).
    first, last = datetime.min.replace(tzinfo=start.tzinfo), datetime.max.replace(tzinfo=end.tzinfo)
    start = start - pad if start - first > pad else first
    end = end + pad if last - end > pad else last
    inner = width - 2 * SIDE
    total = (end - start).total_seconds()

    def scale(t: datetime) -> float:
        return SIDE + inner * (t - start).total_seconds() / total

    height = TOP + ROW * max(len(versions), 1) + AXIS
    timeline = Timeline(width=width, height=height, axis_y=height - AXIS + 6, now_x=round(scale(now), 1))
    for i, v in enumerate(versions):
        y = TOP + ROW * i + 18
        x0 = scale(parse_iso(v["valid_from"]))
        to = parse_iso(v["valid_to"])
        x1 = scale(to) if to else width - SIDE
        status = v["status"]
        label = value_text(v["value"]) if status != "erased" else "forgotten"
        span = f"{day(parse_iso(v['valid_from']))} – {day(to) if to else 'until further notice'}"
        shown = label if len(label) <= 60 else label[:57] + "…"
        words = status_words(v)
        bar = Bar(round(x0, 1), y, round(max(x1 - x0, 3), 1), status, shown,
                  f"{label}, {span}" if status == "erased" else f"{label}: {words}, {span}",
                  to is None, words=words)
        # "Cologne · kept, not used" over a bar near the right edge would run out of the picture: end it at the edge.
        text = f"{shown} · {bar.status_label}" if bar.status_label else shown
        if x0 + LABEL_CHAR * len(text) > width - SIDE:
            bar = replace(bar, label_end=width - SIDE)
        timeline.bars.append(bar)
        for s in v["sources"]:
            learned = parse_iso(s["recorded_at"])
            timeline.markers.append(Marker(round(scale(learned), 1), y + 8, "learned", f"learned {day(learned)}"))
            if s.get("retracted_at"):
                gone = parse_iso(s["retracted_at"])
                timeline.markers.append(Marker(round(scale(gone), 1), y + 8, "retracted",
                                               f"marked never true {day(gone)}"))
    # A tick label too close to "today" would collide with it.
    timeline.ticks = [t for t in _ticks(start, end, scale) if abs(t.x - timeline.now_x) > 48]
    return timeline
