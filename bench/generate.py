"""Seeded data shaped like real assistant memory, and the real data sets.

The synthetic stream is a concatenation of per-subject histories. Each
subject (``u0000042``) gets a few dozen fact keys: single-valued keys with
chains of supersession (employer, city, job title, diet...), multi-valued
ones (languages, pets, hobbies, notes), high-stakes identity keys where a
change from a user statement waits for confirmation, a ``plan`` owned by the
system of record, a task-scoped preference, facts about other entities
("Marc", "Acme Corp"), corroborating sources, ties that become conflicts,
and retractions of a few earlier claims. The same ``(seed, index)`` always
gives the same history, so every run and every size sees the same data.

Histories are independent by subject: a batch or a concurrent client that
takes whole subjects never sends a retraction before the claim it retracts.

:func:`real_events` reads YAGO11k and DyKnow from the shared data folder
through the project's own importers (their mapping, their events); the files
are read in place, never copied.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

# Valid and stated times fall in [EPOCH, HORIZON): in the past of any run.
EPOCH = datetime(2016, 1, 1, tzinfo=timezone.utc)
HORIZON = datetime(2026, 6, 1, tzinfo=timezone.utc)
# A valid time in the middle of most chains, for as-of (past valid time) reads.
PAST_VALID_AT = datetime(2021, 1, 1, tzinfo=timezone.utc)

TENANT = "bench"
DASHBOARD_TENANT = "bench-dashboard"
REAL_TENANT = "bench-real"

# Policies registered for the synthetic tenant (PUT /api/v1/predicates), on
# top of the shipped catalogue (employer, city_of_residence, job_title: one;
# speaks_language, pet, note: many; email, billing_address, legal_name: one
# and high stakes; plan: one, owned by the system of record).
PREDICATES: dict[str, dict] = {
    "diet": {"cardinality": "one", "stakes": "low", "authority": "user", "ttl_seconds": None},
    "favourite_food": {"cardinality": "one", "stakes": "low", "authority": "user", "ttl_seconds": None},
    "timezone": {"cardinality": "one", "stakes": "low", "authority": "user", "ttl_seconds": None},
    "package_manager": {"cardinality": "one", "stakes": "low", "authority": "user", "ttl_seconds": None},
    "relationship": {"cardinality": "one", "stakes": "low", "authority": "user", "ttl_seconds": None},
    "birthday": {"cardinality": "one", "stakes": "low", "authority": "user", "ttl_seconds": None},
    "hobby": {"cardinality": "many", "stakes": "low", "authority": "user", "ttl_seconds": None},
    "likes": {"cardinality": "many", "stakes": "low", "authority": "user", "ttl_seconds": None},
    "mood": {"cardinality": "one", "stakes": "low", "authority": "user", "ttl_seconds": 7 * 24 * 3600},
}
PREDICATES.update({f"attribute_{i:02d}": {"cardinality": "one", "stakes": "low", "authority": "user",
                                          "ttl_seconds": None} for i in range(20)})

_CITIES = ["Berlin", "Munich", "Hamburg", "Lisbon", "Porto", "Madrid", "Paris", "Lyon", "Vienna", "Zurich",
           "Amsterdam", "Rotterdam", "Oslo", "Copenhagen", "Prague", "Warsaw", "Dublin", "Milan", "Turin", "Athens"]
_EMPLOYERS = ["Acme Corp", "Globex", "Initech", "Umbrella", "Stark Industries", "Wayne Enterprises", "Hooli",
              "Pied Piper", "Vandelay Industries", "Soylent", "Tyrell", "Cyberdyne", "Wonka", "Gringotts"]
_TITLES = ["engineer", "senior engineer", "staff engineer", "manager", "director", "designer", "analyst",
           "product manager", "researcher", "consultant", "teacher", "nurse"]
_LANGUAGES = ["English", "German", "French", "Spanish", "Portuguese", "Italian", "Dutch", "Polish", "Greek"]
_PETS = ["a cat called Miso", "a dog called Rex", "two goldfish", "a rabbit", "a parrot", "a tortoise"]
_HOBBIES = ["climbing", "chess", "running", "baking", "photography", "gardening", "cycling", "painting"]
_DIETS = ["vegetarian", "vegan", "pescatarian", "omnivore", "gluten-free"]
_FOODS = ["ramen", "pizza", "dumplings", "paella", "curry", "tacos", "sushi", "risotto"]
_ZONES = ["Europe/Berlin", "Europe/Lisbon", "Europe/London", "America/New_York", "Asia/Tokyo"]
_PLANS = ["free", "plus", "pro", "team", "enterprise"]
_MANAGERS = ["npm", "pnpm", "yarn", "bun"]
_PEOPLE = ["Marc", "Ana", "Jonas", "Priya", "Chen", "Fatima", "Lukas", "Sofia", "Tom", "Mia"]
_RELATIONS = ["friend", "colleague", "partner", "brother", "sister", "neighbour", "manager"]
_NOTE_TOPICS = ["prefers short answers", "is training for a marathon", "is learning the guitar",
                "asked about mortgage rates", "likes morning meetings", "reads science fiction",
                "is planning a trip to Japan", "dislikes spam calls", "has a standing desk",
                "works remotely on Fridays", "is allergic to peanuts", "drinks oat milk"]
_EXTRACTORS = ["chat-extractor@2.3", "chat-extractor@2.4", "email-extractor@1.1", "doc-extractor@0.9"]
_LOW_KINDS = ["user_statement", "user_statement", "user_statement", "agent_inference", "agent_inference",
              "user_document"]


@dataclass(frozen=True)
class BenchEvent:
    """One inbound event: ``id`` is the idempotency key (batch ``id`` or
    ``webhook-id``), ``envelope`` the API.md ``{"type", "timestamp",
    "data"}``. ``asserts`` is true for ``fact.asserted`` (it stores a row)."""

    id: str
    envelope: dict
    subject: str
    asserts: bool


@dataclass
class SubjectHistory:
    """A subject's events in arrival order, plus what reads can ask about:
    ``chain_keys`` are single-valued keys with at least two versions
    ``(entity, predicate, scope)``."""

    subject: str
    events: list[BenchEvent]
    chain_keys: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def assertions(self) -> int:
        return sum(1 for e in self.events if e.asserts)


def _iso(value: datetime) -> str:
    return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _instant(rng: random.Random, start: datetime = EPOCH, stop: datetime = HORIZON) -> datetime:
    seconds = int((stop - start).total_seconds())
    return start + timedelta(seconds=rng.randrange(max(1, seconds)))


class _Builder:
    """Collects one subject's claims, then orders them by arrival."""

    def __init__(self, *, seed: int, index: int, prefix: str = "u") -> None:
        self.rng = random.Random(seed * 1_000_003 + index)
        self.index = index
        self.seed = seed
        self.subject = f"{prefix}{index:07d}"
        self.pending: list[tuple[datetime, int, dict, str]] = []  # (arrival, n, envelope, kind)
        self.n = 0
        self.chain_keys: list[tuple[str, str, str]] = []

    def claim(self, *, predicate: str, value, valid_from: datetime, kind: str, entity: str = "self",
              scope: str = "global", valid_to: datetime | None = None, late: bool = False) -> str:
        """Add one ``fact.asserted``; returns its source id."""
        self.n += 1
        source_id = f"msg-{self.seed}-{self.index}-{self.n}"
        stated_at = min(valid_from + timedelta(hours=self.rng.randrange(1, 72)), HORIZON)
        data = {
            "subject": self.subject, "entity": entity, "predicate": predicate, "value": value, "scope": scope,
            "valid_from": _iso(valid_from), "valid_to": _iso(valid_to) if valid_to else None,
            "stated_at": _iso(stated_at),
            "source": {"kind": kind, "id": source_id, "extractor": self.rng.choice(_EXTRACTORS),
                       "confidence": round(self.rng.uniform(0.5, 1.0), 2),
                       "evidence": f"turn {self.n}: {predicate.replace('_', ' ')} is {value}"},
        }
        # An old message pasted today arrives long after it was stated.
        arrival = _instant(self.rng, stated_at) if late else stated_at
        self.pending.append((arrival, self.n, {"type": "fact.asserted", "timestamp": _iso(stated_at), "data": data},
                             "assert"))
        return source_id

    def retract(self, *, source_id: str, after: datetime) -> None:
        self.n += 1
        envelope = {"type": "fact.retracted", "timestamp": _iso(after),
                    "data": {"subject": self.subject, "source_id": source_id, "reason": "wrong person"}}
        self.pending.append((after, self.n, envelope, "retract"))

    def history(self) -> SubjectHistory:
        self.pending.sort(key=lambda p: (p[0], p[1]))
        events = [BenchEvent(id=f"b{self.seed}-{self.subject}-{n}", envelope=env, subject=self.subject,
                             asserts=kind == "assert") for _, n, env, kind in self.pending]
        return SubjectHistory(self.subject, events, self.chain_keys)


def _chain(b: _Builder, *, predicate: str, choices: list, entity: str = "self", scope: str = "global",
           kinds: list[str] | None = None, max_len: int = 5) -> None:
    """A single-valued key: a chain of 1..max_len values with later valid
    starts (supersession), sometimes corroborated, sometimes tied."""
    rng = b.rng
    length = min(max_len, 1 + int(rng.expovariate(0.8)))
    starts = sorted(_instant(rng) for _ in range(length))
    value = None
    for start in starts:
        value = rng.choice([c for c in choices if c != value] or choices)
        kind = rng.choice(kinds or _LOW_KINDS)
        b.claim(predicate=predicate, value=value, valid_from=start, kind=kind, entity=entity, scope=scope,
                late=rng.random() < 0.05)
        if rng.random() < 0.12:  # corroboration: a second source, same value
            b.claim(predicate=predicate, value=value, valid_from=start + timedelta(days=rng.randrange(1, 30)),
                    kind=rng.choice(_LOW_KINDS), entity=entity, scope=scope)
        if rng.random() < 0.03:  # a tie: same start, same rank, another value
            other = rng.choice([c for c in choices if c != value] or choices)
            b.claim(predicate=predicate, value=other, valid_from=start, kind=kind, entity=entity, scope=scope)
    if length >= 2:
        b.chain_keys.append((entity, predicate, scope))


def _many(b: _Builder, *, predicate: str, choices: list, entity: str = "self", max_len: int = 4) -> None:
    rng = b.rng
    for value in rng.sample(choices, k=min(len(choices), rng.randint(1, max_len))):
        b.claim(predicate=predicate, value=value, valid_from=_instant(rng), kind=rng.choice(_LOW_KINDS),
                entity=entity)


def subject_history(*, seed: int, index: int) -> SubjectHistory:
    """The full history of synthetic subject ``index`` (about 100 events
    over 20-40 keys). Deterministic in ``(seed, index)``."""
    b = _Builder(seed=seed, index=index)
    rng = b.rng
    _chain(b, predicate="employer", choices=_EMPLOYERS)
    _chain(b, predicate="city_of_residence", choices=_CITIES)
    _chain(b, predicate="job_title", choices=_TITLES)
    _chain(b, predicate="diet", choices=_DIETS, max_len=3)
    _chain(b, predicate="favourite_food", choices=_FOODS, max_len=3)
    _chain(b, predicate="timezone", choices=_ZONES, max_len=3)
    _chain(b, predicate="mood", choices=["tired", "happy", "stressed", "calm"], max_len=3)
    _chain(b, predicate="plan", choices=_PLANS, kinds=["system_record"] * 5 + ["user_statement"], max_len=4)
    # High stakes: a user statement changing an e-mail is a proposal; a
    # correction applies at once; a rare tie stays an OPEN conflict.
    _chain(b, predicate="email", choices=[f"{b.subject}@{d}" for d in ("example.com", "mail.test", "post.test")],
           kinds=["system_record", "user_statement", "correction"], max_len=3)
    if rng.random() < 0.5:
        _chain(b, predicate="billing_address", choices=[f"{n} {c} Street" for n in (1, 7, 12) for c in ("Oak", "Elm")],
               kinds=["system_record", "user_statement"], max_len=3)
    _chain(b, predicate="package_manager", choices=_MANAGERS, scope=f"task:t{rng.randrange(1000)}", max_len=2)
    _chain(b, predicate="package_manager", choices=_MANAGERS, max_len=2)
    for i in rng.sample(range(20), k=rng.randint(6, 14)):
        _chain(b, predicate=f"attribute_{i:02d}", choices=[f"v{j}" for j in range(12)], max_len=4)
    _many(b, predicate="speaks_language", choices=_LANGUAGES, max_len=3)
    _many(b, predicate="pet", choices=_PETS, max_len=2)
    _many(b, predicate="hobby", choices=_HOBBIES, max_len=4)
    _many(b, predicate="note", choices=_NOTE_TOPICS, max_len=8)
    for person in rng.sample(_PEOPLE, k=rng.randint(1, 4)):
        _chain(b, predicate="relationship", choices=_RELATIONS, entity=person, max_len=2)
        _chain(b, predicate="employer", choices=_EMPLOYERS, entity=person, max_len=3)
        _many(b, predicate="likes", choices=_FOODS + _HOBBIES, entity=person, max_len=3)
    # A few claims turn out never to have been true.
    asserted = [(p[0], p[2]["data"]["source"]["id"]) for p in b.pending if p[3] == "assert"]
    for arrival, source_id in rng.sample(asserted, k=max(1, len(asserted) // 80)):
        b.retract(source_id=source_id, after=min(arrival + timedelta(days=rng.randrange(1, 60)), HORIZON))
    return b.history()


def histories(*, seed: int, start: int, assertions: int) -> Iterator[SubjectHistory]:
    """Subject histories from index ``start`` on, until at least
    ``assertions`` assertions have been yielded (whole subjects only)."""
    total, index = 0, start
    while total < assertions:
        h = subject_history(seed=seed, index=index)
        total += h.assertions
        index += 1
        yield h


def dashboard_history(*, memories: int, subject: str) -> SubjectHistory:
    """A heavy user for the dashboard page: ``memories`` current facts, one
    per key, spread over entities (the people and things they mention) and
    predicates, so no key grows large."""
    b = _Builder(seed=0, index=memories, prefix="d")
    b.subject = subject
    predicates = [f"attribute_{i:02d}" for i in range(20)]
    for n in range(memories):
        entity = "self" if n < len(predicates) else f"Entity {n // len(predicates):04d}"
        b.claim(predicate=predicates[n % len(predicates)], value=f"value {n}",
                valid_from=EPOCH + timedelta(hours=n), kind="user_statement", entity=entity)
    return b.history()


def real_events(*, data_dir: Path) -> tuple[list[BenchEvent], dict[str, dict], str]:
    """YAGO11k and DyKnow as ``(events, predicate policies, note)``, built
    by the project's importers from files under ``data_dir`` (the shared data
    folder). Events keep the importers' ids and natural (date) order. When an
    importer or a file is missing, returns no events and says why in
    ``note``."""
    try:
        from facts.importers import dyknow, yago
    except ImportError as exc:
        return [], {}, f"real data skipped: the importers are not available ({exc})"
    events: list[BenchEvent] = []
    rules: dict[str, dict] = {}
    try:
        yago_events = yago.build_events(directory=data_dir / "yago11k")
        dyknow_path = data_dir / "dyknow" / "grc_generated.json"
        dyknow_events = dyknow.build_events(path=dyknow_path)
        for name, rule in {**yago.predicate_rules(), **dyknow.predicate_rules(path=dyknow_path)}.items():
            rules[name] = rule.as_body()
    except (OSError, ValueError) as exc:
        return [], {}, f"real data skipped: {exc}"
    for e in sorted(yago_events, key=lambda e: (e.order_key, e.id)) + sorted(dyknow_events, key=lambda e: (e.order_key, e.id)):
        events.append(BenchEvent(id=e.id, envelope=e.envelope, subject=e.envelope["data"]["subject"], asserts=True))
    return events, rules, f"{len(yago_events)} YAGO11k and {len(dyknow_events)} DyKnow assertions"
