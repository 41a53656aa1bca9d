"""DyKnow (``data/dyknow/grc_generated.json``): who held an office, ran a
company or played for a team, and when, as Wikidata records it.

File shape (data README): ``{category: {entity: {slot: {"questions",
"answers"}}}}`` for ``countries_byGDP`` and ``organizations``; for
``companies_byRevenue`` and ``athletes_byPayment`` the slot level is
missing (``{entity: {"questions", "answers"}}``: the CEO, the current sports
team). Each answer is ``"Name |S: +YYYY-MM-DDT00:00:00Z |E: ..."`` with
``S`` start, ``E`` end, ``P`` a point in time.

Mapping (one assertion per answer, nothing dropped):

- subject: one per entity, external id :func:`~facts.importers.common.slug`
  of its name (``united-states-of-america``), ``subject_name`` the name;
  entity ``self``.
- predicate: the slot, slugified with ``_`` (``president_of_italy``); the
  slot-less categories use Wikidata's property names
  ``chief_executive_officer`` and ``member_of_sports_team``.
- value: the name. Source: kind ``system_record``, id
  ``wikidata:dyknow:<entity slug>:<predicate>:<n>`` (``n`` the answer's
  position in the file's list, from 0), extractor ``dyknow-importer@1``,
  evidence the raw answer text.
- time zone: UTC. Wikidata dates are midnight UTC; an instant is the first
  moment of its period.
- precision: a ``-00`` month (or day) means year (or month) precision.
  ``valid_from`` is the first day of the period and ``valid_from_precision``
  says ``year``, ``month`` or ``day``; no day is invented silently.
- valid time from S/E/P, half-open ``[valid_from, valid_to)``:
  ``S`` gives ``valid_from``. ``E`` gives ``valid_to`` = the first day of its
  period (the same instant a successor's start of the same precision gets, so
  a chain of offices has no gaps or overlaps); when that would not be after
  ``valid_from`` (start and end in the same year or month) it is the first
  day of the *next* period. ``P`` alone is a point: ``[P, P + one period)``.
  ``S`` with ``P`` and no ``E``: held from S, last known at P:
  ``[S, P + one period)``. ``E`` without a start (four answers): only its last
  period is known, ``[E - one period, E)`` with E's precision.
- ``stated_at`` = ``valid_from``: when the record says it began. Never the
  time of import, so any delivery order resolves to the same view (left
  out for a record that starts after today:
  :func:`~facts.importers.common.stated_at`).
- policy: every predicate is cardinality ``one`` (one holder at a time),
  authority ``user`` (a person's correction or a clarification answer still
  outranks the record). Stakes ``low`` (ties settle by rule) except
  :data:`HIGH_STAKES`: there a genuine equal-start overlap stays an OPEN
  conflict and an overlapping successor is a proposal waiting for a human.
"""
from __future__ import annotations

import calendar
import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

from facts.importers.common import DataError, ImportEvent, PredicateRule, assertion_event, iso, slug, stated_at

DEFAULT_PATH = Path("..") / "shared" / "data" / "dyknow" / "grc_generated.json"
DATASET = "dyknow"
EXTRACTOR = "dyknow-importer@1"
SOURCE_KIND = "system_record"

# Categories whose entities hold the answers directly (no slot level).
SINGLE_SLOT = {
    "companies_byRevenue": "chief_executive_officer",
    "athletes_byPayment": "member_of_sports_team",
}
# Predicates registered high stakes. Each has a genuine equal-start tie in
# the record (joint or acting heads of state: Dong Biwu and Soong Ching-ling
# from 1968-10-31, Sheikh Mujibur Rahman and Syed Nazrul Islam from
# 1971-04-17, Bogdan Borusewicz and Grzegorz Schetyna from 2010-07-08) and no
# overlapping succession, so each keeps exactly one OPEN conflict for the
# review queue while its chain of holders resolves normally. Every other
# predicate is low stakes: its ties (mostly a club and a national team from
# the same year) settle by rule and are recorded as auto-resolved.
HIGH_STAKES = frozenset({
    "president_of_bangladesh",
    "president_of_the_peoples_republic_of_china",
    "president_of_the_republic_of_poland",
})

_PART = re.compile(r"^(?P<tag>[SEP]):\s*(?P<date>[+-]?\d+-\d\d-\d\dT\d\d:\d\d:\d\dZ)$")
_DATE = re.compile(r"^(?P<sign>[+-]?)(?P<year>\d+)-(?P<month>\d\d)-(?P<day>\d\d)T")


@dataclass(frozen=True)
class WikiDate:
    """A Wikidata date with its precision: ``month`` 0 means year precision,
    ``day`` 0 month precision."""

    year: int
    month: int
    day: int

    @classmethod
    def parse(cls, text: str) -> "WikiDate":
        """``+YYYY-MM-DDT00:00:00Z`` (``-00`` parts allowed). Raises
        :class:`DataError` for a BC year or a malformed date."""
        m = _DATE.match(text)
        if not m or m.group("sign") == "-":
            raise DataError(f"unsupported date {text!r}")
        date = cls(int(m.group("year")), int(m.group("month")), int(m.group("day")))
        if date.year < 1 or not 0 <= date.month <= 12 or (date.month == 0 and date.day != 0):
            raise DataError(f"unsupported date {text!r}")
        if date.day > calendar.monthrange(date.year, date.month or 1)[1]:
            raise DataError(f"no such day {text!r}")
        return date

    @property
    def precision(self) -> str:
        return "year" if self.month == 0 else "month" if self.day == 0 else "day"

    @property
    def start(self) -> datetime:
        """First instant of the period (UTC)."""
        return datetime(self.year, self.month or 1, self.day or 1, tzinfo=timezone.utc)

    @property
    def next_start(self) -> datetime:
        """First instant of the following period (UTC)."""
        if self.precision == "year":
            return datetime(self.year + 1, 1, 1, tzinfo=timezone.utc)
        if self.precision == "month":
            return datetime(self.year + (self.month == 12), self.month % 12 + 1, 1, tzinfo=timezone.utc)
        return self.start + timedelta(days=1)

    @property
    def previous_start(self) -> datetime:
        """First instant of the preceding period (UTC)."""
        if self.precision == "year":
            return datetime(self.year - 1, 1, 1, tzinfo=timezone.utc)
        if self.precision == "month":
            return datetime(self.year - (self.month == 1), (self.month - 2) % 12 + 1, 1, tzinfo=timezone.utc)
        return self.start - timedelta(days=1)


@dataclass(frozen=True)
class Answer:
    """One DyKnow answer, parsed and mapped to valid time."""

    category: str
    entity: str
    slot: str
    predicate: str
    index: int
    name: str
    raw: str
    valid_from: datetime
    valid_to: datetime | None
    precision: str

    @property
    def subject(self) -> str:
        return slug(self.entity)

    @property
    def source_id(self) -> str:
        return f"wikidata:dyknow:{self.subject}:{self.predicate}:{self.index}"


def parse_answer(*, raw: str) -> tuple[str, dict[str, WikiDate]]:
    """Split ``"Name |S: ... |E: ..."`` into the name and its dates by tag.
    Raises :class:`DataError` for an unknown or repeated tag or an empty name."""
    name, *parts = raw.split(" |")
    dates: dict[str, WikiDate] = {}
    for part in parts:
        m = _PART.match(part.strip())
        if not m or m.group("tag") in dates:
            raise DataError(f"unreadable qualifier {part!r} in {raw!r}")
        dates[m.group("tag")] = WikiDate.parse(m.group("date"))
    if not name.strip():
        raise DataError(f"answer without a name: {raw!r}")
    return name.strip(), dates


def valid_time(*, dates: dict[str, WikiDate], raw: str = "") -> tuple[datetime, datetime | None, str]:
    """``(valid_from, valid_to, valid_from_precision)`` from an answer's
    S/E/P dates, by the rules in this module's docstring. Raises
    :class:`DataError` when there is no date at all or the end is before the
    start."""
    s, e, p = dates.get("S"), dates.get("E"), dates.get("P")
    if s is not None:
        valid_from, precision = s.start, s.precision
    elif p is not None:
        valid_from, precision = p.start, p.precision
    elif e is not None:
        valid_from, precision = e.previous_start, e.precision
    else:
        raise DataError(f"no date in {raw!r}")
    if e is not None:
        valid_to = e.start if e.start > valid_from else e.next_start
    elif p is not None:
        valid_to = p.next_start
    else:
        valid_to = None
    if valid_to is not None and valid_to <= valid_from:
        raise DataError(f"ends before it starts: {raw!r}")
    return valid_from, valid_to, precision


def read_answers(*, path: Path) -> list[Answer]:
    """Every answer of the file, in file order. Raises ``OSError`` if the
    file cannot be read, :class:`DataError` for an answer it cannot map."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    out: list[Answer] = []
    for category, entities in data.items():
        for entity, body in entities.items():
            for slot, predicate, answers in _slots(category, body):
                for index, raw in enumerate(answers):
                    name, dates = parse_answer(raw=raw)
                    try:
                        valid_from, valid_to, precision = valid_time(dates=dates, raw=raw)
                    except DataError as exc:
                        raise DataError(f"{category}/{entity}/{slot}[{index}]: {exc}") from None
                    out.append(Answer(category, entity, slot, predicate, index, name, raw, valid_from, valid_to,
                                      precision))
    return out


def _slots(category: str, body: dict) -> Iterator[tuple[str, str, list[str]]]:
    if "answers" in body:  # no slot level: the category's one slot ("holder" for an unknown category)
        predicate = SINGLE_SLOT.get(category) or "holder"
        yield predicate.replace("_", " "), predicate, body["answers"]
        return
    for slot, content in body.items():
        yield slot, slug(slot, sep="_"), content["answers"]


def assertion_data(*, answer: Answer) -> dict:
    """The ``fact.asserted`` ``data`` object (API.md) for one answer."""
    return {
        "subject": answer.subject,
        "subject_name": answer.entity,
        "entity": "self",
        "predicate": answer.predicate,
        "value": answer.name,
        "scope": "global",
        "valid_from": iso(answer.valid_from),
        "valid_from_precision": answer.precision,
        "valid_to": iso(answer.valid_to),
        **stated_at(answer.valid_from),
        "source": {"kind": SOURCE_KIND, "id": answer.source_id, "extractor": EXTRACTOR, "evidence": answer.raw},
    }


def build_events(*, path: Path = DEFAULT_PATH) -> list[ImportEvent]:
    """One event per answer; natural order is date order (``valid_from``,
    then subject, predicate, position). Raises like :func:`read_answers`."""
    return [
        assertion_event(data=assertion_data(answer=a), order_key=(iso(a.valid_from), a.subject, a.predicate, a.index))
        for a in read_answers(path=path)
    ]


def predicate_rules(*, path: Path = DEFAULT_PATH) -> dict[str, PredicateRule]:
    """Every predicate of the file: cardinality ``one``, authority ``user``,
    stakes ``high`` for :data:`HIGH_STAKES`, else ``low``."""
    return {
        a.predicate: PredicateRule("one", "high" if a.predicate in HIGH_STAKES else "low")
        for a in read_answers(path=path)
    }
