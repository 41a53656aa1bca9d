"""YAGO11k (``data/yago11k/``): some 20,500 dated facts about people,
clubs, prizes and places, from the YAGO knowledge graph.

Files (data README): ``train.txt``, ``valid.txt``, ``test.txt`` with rows
``subject_id <TAB> relation_id <TAB> object_id <TAB> start_year <TAB>
end_year``; ``entity2id.txt`` and ``relation2id.txt`` map ids to names
(``<Jeff_Bezos>``, ``<worksAt>``).

Mapping (one assertion per forward row):

- relation ids 10 and above (names starting with ``!``) are inverse
  duplicates of the forward rows: dropped, and counted.
- subject: one per YAGO subject entity, external id
  :func:`~facts.importers.common.slug` of its name (``jeff-bezos``; the id
  is appended only if two names would share a slug), ``subject_name`` the
  name with spaces; entity ``self``.
- predicate: the relation in snake case (``worksAt`` -> ``works_at``); value:
  the object's name with spaces (``"University of Cambridge"``).
- source: each split file is a document: kind ``user_document`` (an
  encyclopaedic extraction ranks below a system of record and below what the
  person says), id ``yago11k:<split>:<line>`` (line numbers from 1),
  extractor ``yago11k-importer@1``, evidence the row with names.
- time zone UTC; year precision: ``valid_from`` is 1 January of the start
  year, ``valid_from_precision`` ``year``. YAGO's years are inclusive, so
  ``valid_to`` is 1 January of the year *after* the end year (a row
  2005-2005 holds during 2005). An end of ``3000``, ``0`` or ``None`` is
  open (``valid_to`` null). An unknown start with a known end asserts only
  the end year; both unknown (a timeless ``owns`` or ``created``) starts at
  :data:`UNKNOWN_START` (0001-01-01, year precision).
- ``wasBornIn`` / ``diedIn`` are events (YAGO gives start == end): the fact
  "was born in X" holds from that year on, ``valid_to`` null.
- ``stated_at`` = ``valid_from`` (never the time of import), left out for
  the few rows that start after today (:func:`~facts.importers.common.stated_at`).
- cardinality (:data:`RULES`): ``worksAt``, ``playsFor``, ``isAffiliatedTo``,
  ``owns``, ``graduatedFrom``, ``hasWonPrize``, ``created`` are ``many`` (a
  person works at two institutions at once: neither value may close the
  other). ``isMarriedTo`` is ``one``, low stakes: a later marriage ends the
  earlier one at its start. ``wasBornIn`` and ``diedIn`` are ``one``, high
  stakes (identity data, DESIGN.md): a second, different birthplace would be
  an OPEN conflict for a human, never settled silently.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from facts.importers.common import DataError, ImportEvent, PredicateRule, assertion_event, iso, slug, stated_at

logger = logging.getLogger(__name__)

DEFAULT_DIR = Path("..") / "shared" / "data" / "yago11k"
DATASET = "yago11k"
SPLITS = ("train", "valid", "test")
EXTRACTOR = "yago11k-importer@1"
SOURCE_KIND = "user_document"
INVERSE_FROM = 10
UNKNOWN_YEARS = frozenset({"3000", "0", "None", ""})
UNKNOWN_START = datetime(1, 1, 1, tzinfo=timezone.utc)
EVENT_RELATIONS = frozenset({"was_born_in", "died_in"})

RULES: dict[str, PredicateRule] = {
    "works_at": PredicateRule("many"),
    "plays_for": PredicateRule("many"),
    "is_affiliated_to": PredicateRule("many"),
    "owns": PredicateRule("many"),
    "graduated_from": PredicateRule("many"),
    "has_won_prize": PredicateRule("many"),
    "created": PredicateRule("many"),
    "is_married_to": PredicateRule("one"),
    "was_born_in": PredicateRule("one", "high"),
    "died_in": PredicateRule("one", "high"),
}


@dataclass(frozen=True)
class YagoFact:
    """One forward row, mapped to an assertion."""

    split: str
    line: int
    subject: str
    subject_name: str
    predicate: str
    value: str
    valid_from: datetime
    valid_to: datetime | None
    evidence: str

    @property
    def source_id(self) -> str:
        return f"yago11k:{self.split}:{self.line}"


def predicate_name(*, relation: str) -> str:
    """``<worksAt>`` -> ``works_at``. Raises :class:`DataError` for an
    inverse (``!``) or malformed name."""
    bare = relation.strip()
    if bare.startswith("!") or not (bare.startswith("<") and bare.endswith(">")):
        raise DataError(f"not a forward relation: {relation!r}")
    return re.sub(r"(?<!^)(?=[A-Z])", "_", bare[1:-1]).lower()


def display_name(*, entity: str) -> str:
    """``<University_of_Cambridge>`` -> ``University of Cambridge``."""
    return entity.strip().removeprefix("<").removesuffix(">").replace("_", " ")


def _year_start(year: int) -> datetime:
    return datetime(year, 1, 1, tzinfo=timezone.utc)


def valid_time(*, start: str, end: str, event: bool = False) -> tuple[datetime, datetime | None]:
    """``(valid_from, valid_to)`` for a row's year columns, by the rules in
    this module's docstring (``event`` for born/died). Raises
    :class:`DataError` for a year that is not a number or an end before
    the start."""
    def year(raw: str) -> int | None:
        if raw.strip() in UNKNOWN_YEARS:
            return None
        if not raw.strip().isdigit():
            raise DataError(f"not a year: {raw!r}")
        return int(raw)

    first, last = year(start), year(end)
    if first is not None and last is not None and last < first:
        raise DataError(f"ends ({last}) before it starts ({first})")
    if event:
        known = first if first is not None else last
        return (_year_start(known) if known is not None else UNKNOWN_START), None
    if first is None:
        if last is None:
            return UNKNOWN_START, None
        return _year_start(last), _year_start(last + 1)
    return _year_start(first), (_year_start(last + 1) if last is not None else None)


def _read_map(path: Path) -> dict[int, str]:
    out: dict[int, str] = {}
    with open(path, encoding="utf-8") as fh:
        for number, row in enumerate(fh, start=1):
            if not row.strip():
                continue
            try:
                name, ident = row.rstrip("\n").split("\t")
                out[int(ident)] = name
            except ValueError:
                raise DataError(f"{path.name}:{number}: expected 'name<TAB>id'") from None
    return out


def subject_ids(*, entities: dict[int, str]) -> dict[int, str]:
    """External subject id per entity id: the slug of its name, with
    ``-<id>`` appended only where two names share a slug."""
    slugs = {i: slug(display_name(entity=n)) for i, n in entities.items()}
    taken: dict[str, int] = {}
    for s in slugs.values():
        taken[s] = taken.get(s, 0) + 1
    return {i: (s if taken[s] == 1 else f"{s}-{i}") for i, s in slugs.items()}


def read_facts(*, directory: Path = DEFAULT_DIR, splits: tuple[str, ...] = SPLITS) -> list[YagoFact]:
    """The forward rows of ``splits`` (file order), inverse rows dropped.
    Logs ``yago.read`` with the counts. Raises ``OSError`` for a missing
    file, :class:`DataError` (naming ``split:line``) for a row it cannot map."""
    entities = _read_map(directory / "entity2id.txt")
    relations = _read_map(directory / "relation2id.txt")
    subjects = subject_ids(entities=entities)
    facts: list[YagoFact] = []
    dropped = 0
    for split in splits:
        with open(directory / f"{split}.txt", encoding="utf-8") as fh:
            for number, row in enumerate(fh, start=1):
                if not row.strip():
                    continue
                try:
                    s, r, o, start, end = row.rstrip("\n").split("\t")
                    s_id, r_id, o_id = int(s), int(r), int(o)
                    if r_id >= INVERSE_FROM or relations[r_id].startswith("!"):
                        dropped += 1
                        continue
                    predicate = predicate_name(relation=relations[r_id])
                    valid_from, valid_to = valid_time(start=start, end=end, event=predicate in EVENT_RELATIONS)
                    evidence = f"{entities[s_id]} {relations[r_id]} {entities[o_id]} [{start}, {end}]"
                    facts.append(YagoFact(split, number, subjects[s_id], display_name(entity=entities[s_id]), predicate,
                                          display_name(entity=entities[o_id]), valid_from, valid_to, evidence))
                except (ValueError, KeyError) as exc:
                    raise DataError(f"{split}.txt:{number}: {exc}") from None
    logger.info("yago.read", extra={"forward": len(facts), "inverse_dropped": dropped, "splits": list(splits)})
    return facts


def assertion_data(*, fact: YagoFact) -> dict:
    """The ``fact.asserted`` ``data`` object (API.md) for one row."""
    return {
        "subject": fact.subject,
        "subject_name": fact.subject_name,
        "entity": "self",
        "predicate": fact.predicate,
        "value": fact.value,
        "scope": "global",
        "valid_from": iso(fact.valid_from),
        "valid_from_precision": "year",
        "valid_to": iso(fact.valid_to),
        **stated_at(fact.valid_from),
        "source": {"kind": SOURCE_KIND, "id": fact.source_id, "extractor": EXTRACTOR, "evidence": fact.evidence},
    }


def build_events(*, directory: Path = DEFAULT_DIR, splits: tuple[str, ...] = SPLITS,
                 subjects: frozenset[str] | None = None) -> list[ImportEvent]:
    """One event per forward row (only rows of ``subjects``, external ids,
    when given); natural order is date order (``valid_from``, split, line).
    Raises like :func:`read_facts`."""
    return [
        assertion_event(data=assertion_data(fact=f), order_key=(iso(f.valid_from), f.split, f.line))
        for f in read_facts(directory=directory, splits=splits)
        if subjects is None or f.subject in subjects
    ]


def predicate_rules() -> dict[str, PredicateRule]:
    """The policy of every YAGO11k predicate (:data:`RULES`)."""
    return dict(RULES)
