"""The ledger's invariants (DESIGN.md, "Invariants"), as properties over
random assertion sets written through the ledger into real PostgreSQL.

Each example gets a fresh tenant (the whole test shares one database
transaction). Assertions fall on a few keys of one subject, with random
source kinds (ranks), values, valid and stated times, scopes, a random TTL
on the ephemeral predicate, and random retractions and erasures. The clock
is frozen and moved forward between writes so every write has its own
transaction time.
"""
from __future__ import annotations

import hashlib
import json
import random
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import time_machine
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from facts import ledger, queries
from facts.claims import live_claims_by_key
from facts.inputs import parse_assertion
from facts.models import Assertion, CurrentFact, Event, FactKey, Tenant
from facts.policy import PolicyCache
from facts.projection import iso
from facts.resolve import FATE_PROPOSED, RULE_HIGH_STAKES, SOURCE_KINDS, resolve, timeline_digest
from tests.facts.as_of import resolve_subject_as_of
from tests.factories import TenantFactory

EPOCH = datetime(2024, 1, 1, tzinfo=timezone.utc)
START = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
SUBJECT = "u-1"
# employer: one/low; billing_address: one/high; speaks_language: many;
# plan: owned by the system of record; mood: one with a random TTL.
PREDICATES = ("employer", "billing_address", "speaks_language", "plan", "mood")
TTLS = (None, 2 * 86400, 9 * 86400)

EXAMPLES = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def assertion_payloads(draw):
    """One ``fact.asserted`` ``data`` object on a small space of keys,
    values, times and sources, so that collisions (corroboration, ties,
    duplicates) are common."""
    start = draw(st.integers(min_value=0, max_value=20))
    length = draw(st.one_of(st.none(), st.integers(min_value=1, max_value=12)))
    return {
        "subject": SUBJECT,
        "predicate": draw(st.sampled_from(PREDICATES)),
        "scope": draw(st.sampled_from(["global", "global", "global", "task:x"])),
        "value": draw(st.sampled_from(["A", "B", "C"])),
        "valid_from": iso(EPOCH + timedelta(days=start)),
        "valid_to": None if length is None else iso(EPOCH + timedelta(days=start + length)),
        "stated_at": iso(EPOCH + timedelta(days=start + draw(st.integers(min_value=0, max_value=2)))),
        "source": {"kind": draw(st.sampled_from(SOURCE_KINDS)), "id": draw(st.sampled_from(["s1", "s2", "s3"]))},
    }


@dataclass
class Scenario:
    """Assertions, which of them get retracted or erased, and the TTL."""

    payloads: list[dict]
    retracted: set[int]
    erased: set[int]
    ttl_seconds: int | None

    def probe_times(self) -> list[datetime]:
        """Valid times worth asking about: every bound, just before and after."""
        bounds = {datetime.fromisoformat(p[k]) for p in self.payloads for k in ("valid_from", "valid_to") if p[k]}
        shifts = (timedelta(0), timedelta(hours=-1), timedelta(hours=1))
        return sorted({b + s for b in bounds for s in shifts} | {START + timedelta(days=400)})


def same_payload(payloads: list[dict], i: int) -> set[int]:
    """Indices whose payload is identical to ``i``'s (one stored assertion)."""
    return {j for j, p in enumerate(payloads) if p == payloads[i]}


@st.composite
def scenarios(draw, *, erasures: bool = False):
    payloads = draw(st.lists(assertion_payloads(), min_size=1, max_size=8))
    indices = st.integers(min_value=0, max_value=len(payloads) - 1)
    retracted = draw(st.sets(indices, max_size=3))
    # Erase distinct assertions that are not also retracted.
    erased: set[int] = set()
    for i in (draw(st.sets(indices, max_size=2)) if erasures else ()):
        if not same_payload(payloads, i) & (retracted | erased):
            erased.add(i)
    return Scenario(payloads, retracted, erased, draw(st.sampled_from(TTLS)))


def delivery(scenario: Scenario, rng: random.Random | None) -> list[tuple[str, int]]:
    """An order of operations: ``("assert", i)`` (with duplicates when
    shuffled), ``("retract", i)`` somewhere after the first delivery of
    ``i``, ``("erase", i)`` after the last delivery of its payload (a payload
    sent again after its erasure is a new assertion). ``rng`` ``None``: the
    payloads in order, then the retractions, then the erasures."""
    ops = [("assert", i) for i in range(len(scenario.payloads))]
    retractions = [("retract", i) for i in sorted(scenario.retracted)]
    erasures = [("erase", i) for i in sorted(scenario.erased)]
    if rng is None:
        return ops + retractions + erasures
    ops += [("assert", rng.randrange(len(scenario.payloads))) for _ in range(rng.randrange(3))]
    rng.shuffle(ops)
    for op in retractions:
        first = ops.index(("assert", op[1]))
        ops.insert(rng.randint(first + 1, len(ops)), op)
    for op in erasures:
        group = same_payload(scenario.payloads, op[1])
        last = max(n for n, (kind, i) in enumerate(ops) if kind == "assert" and i in group)
        ops.insert(rng.randint(last + 1, len(ops)), op)
    return ops


class Stream:
    """Applies operations to a fresh tenant through the ledger, one second
    of transaction time apart."""

    def __init__(self, scenario: Scenario, clock) -> None:
        self.scenario = scenario
        self.clock = clock
        self.tenant: Tenant = TenantFactory()
        self.ids: dict[int, uuid.UUID] = {}
        self.times: dict[tuple[str, int], datetime] = {}
        ledger.set_predicate_policy(tenant=self.tenant, predicate="mood", cardinality="one", stakes="low",
                                    authority="user", ttl_seconds=scenario.ttl_seconds, actor="test")

    def apply(self, op: tuple[str, int]) -> datetime:
        self.clock.shift(1)
        kind, i = op
        now = datetime.now(timezone.utc)
        if kind == "assert":
            data = parse_assertion(self.scenario.payloads[i], received_at=now)
            self.ids[i] = uuid.UUID(ledger.assert_fact(tenant=self.tenant, data=data, actor="test").assertion_id)
        elif kind == "retract":
            ledger.retract(tenant=self.tenant, assertion_ids=[str(self.ids[i])], reason="", actor="test")
        else:
            ledger.erase(tenant=self.tenant, assertion_id=str(self.ids[i]), actor="test")
        self.times.setdefault(op, now)
        return now

    def facts(self, *, valid_at: datetime, known_at: datetime | None = None) -> list[dict]:
        return queries.facts_at(tenant=self.tenant, external_id=SUBJECT, valid_at=valid_at, known_at=known_at)["facts"]


def projection_digest(tenant: Tenant) -> str:
    """Hash of the tenant's whole current view as stored in the projection,
    with assertion ids replaced by their payload hashes (the same content in
    every tenant)."""
    content = dict(Assertion.objects.filter(tenant=tenant).values_list("id", "payload_hash"))
    name = lambda aid: content[uuid.UUID(str(aid))] if aid else None  # noqa: E731
    rows = sorted(json.dumps([
        r.entity, r.predicate, r.scope_kind, r.scope_key, r.status, r.value_key, iso(r.valid_from), iso(r.valid_to),
        iso(r.asserted_valid_to), r.rule, name(r.assertion_id), sorted(name(s["assertion_id"]) for s in r.sources),
        sorted(name(c["assertion_id"]) for c in r.candidates),
    ]) for r in CurrentFact.objects.filter(tenant=tenant))
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()


def resolved_digest(tenant: Tenant, now: datetime) -> str:
    """Hash of the tenant's current view recomputed from the log with the
    pure resolution function (content only, no ids)."""
    keys = {k.id: k for k in FactKey.objects.filter(tenant=tenant)}
    grouped = live_claims_by_key(Assertion.objects.filter(tenant=tenant), known_at=now)
    policies = PolicyCache(tenant_id=tenant.id, at=now)
    per_key = sorted(
        f"{k.entity}|{k.predicate}|{k.scope}|"
        f"{timeline_digest(resolve(grouped.get(k.id, []), policies.get(k.predicate)).segments)}"
        for k in keys.values()
    )
    return hashlib.sha256("\n".join(per_key).encode()).hexdigest()


def ids_in(items: list[dict]) -> set[str]:
    """Every assertion id an answer mentions: winner, sources, candidates."""
    return {i for f in items for i in [f.get("assertion_id")] + [s["assertion_id"] for s in f.get("sources", [])]
            + [c["assertion_id"] for c in f.get("candidates", [])] if i}


# --------------------------------------------------------------------------- (1) order independence


@EXAMPLES
@given(scenario=scenarios(), seed=st.randoms(use_true_random=False))
def test_every_delivery_order_with_duplicates_gives_the_same_current_view(db, scenario, seed):
    digests = []
    for order in (delivery(scenario, None), delivery(scenario, seed)):
        with time_machine.travel(START, tick=False) as clock:
            stream = Stream(scenario, clock)
            for op in order:
                stream.apply(op)
            clock.shift(1)
            now = datetime.now(timezone.utc)
            digests.append((projection_digest(stream.tenant), resolved_digest(stream.tenant, now),
                            queries.context(tenant=stream.tenant, external_id=SUBJECT)["facts"]))

    assert digests[0] == digests[1]


# --------------------------------------------------------------------------- (2) as-of reproducibility


def projection_timeline(stream: Stream) -> list[tuple]:
    """The whole current view as stored: every segment of every key (all
    valid times) and every pending proposal, by assertion id."""
    return sorted(
        (r.predicate, r.scope_kind, r.scope_key, r.status, r.value_key, r.valid_from, r.valid_to, r.rule,
         str(r.assertion_id) if r.assertion_id else None, tuple(s["assertion_id"] for s in r.sources),
         tuple(c["assertion_id"] for c in r.candidates))
        for r in CurrentFact.objects.filter(tenant=stream.tenant)
    )


def as_of_timeline(stream: Stream, known_at: datetime) -> list[tuple]:
    """The same shape, recomputed from the log as known at ``known_at``."""
    subject = queries.get_subject(tenant=stream.tenant, external_id=SUBJECT)
    out = []
    for key, claims, res in resolve_subject_as_of(subject=subject, known_at=known_at):
        where = (key.predicate, key.scope_kind, key.scope_key)
        for s in res.segments:
            out.append((*where, s.status, s.value_key, s.valid_from, s.valid_to, s.rule,
                        str(s.winner.id) if s.winner else None, tuple(str(c.id) for c in s.sources),
                        tuple(str(c.id) for c in s.candidates)))
        for c in claims:
            if res.fate[c.id] == FATE_PROPOSED:
                out.append((*where, "proposed", c.value_key, c.valid_from, c.valid_to, RULE_HIGH_STAKES, str(c.id),
                            (str(c.id),), ()))
    return sorted(out)


@EXAMPLES
@given(scenario=scenarios(), seed=st.randoms(use_true_random=False))
def test_as_of_answers_equal_snapshots_of_the_current_view(db, scenario, seed):
    probes = seed.sample(scenario.probe_times(), k=min(3, len(scenario.probe_times())))
    snapshots: dict[datetime, tuple] = {}
    with time_machine.travel(START, tick=False) as clock:
        stream = Stream(scenario, clock)
        for op in delivery(scenario, seed):
            at = stream.apply(op)
            snapshots[at] = (projection_timeline(stream), [stream.facts(valid_at=v) for v in probes])
        clock.shift(3600)

        as_of = {t: (as_of_timeline(stream, t), [stream.facts(valid_at=v, known_at=t) for v in probes])
                 for t in snapshots}

    assert as_of == snapshots


# --------------------------------------------------------------------------- (3) retracted is never true


@EXAMPLES
@given(scenario=scenarios().filter(lambda s: s.retracted), seed=st.randoms(use_true_random=False))
def test_a_retracted_assertion_is_in_no_answer_after_its_retraction(db, scenario, seed):
    probes = seed.sample(scenario.probe_times(), k=min(6, len(scenario.probe_times())))
    with time_machine.travel(START, tick=False) as clock:
        stream = Stream(scenario, clock)
        for op in delivery(scenario, seed):
            stream.apply(op)
        clock.shift(3600)
        now = datetime.now(timezone.utc)
        retracted = {str(i): when for i, when in Assertion.objects.filter(
            tenant=stream.tenant, retracted_at__isnull=False).values_list("id", "retracted_at")}
        transaction_times = sorted(set(stream.times.values()) | {now})

        # Through the API, at each retraction and now, at valid times around the bounds.
        answered = {t: ids_in([f for v in probes for f in stream.facts(valid_at=v, known_at=t)])
                    for t in {*retracted.values(), now}}
        # Every segment of every key, at every transaction time.
        timelines = {t: {i for row in as_of_timeline(stream, t) for i in (row[8], *row[9], *row[10])}
                     for t in transaction_times}
        leaked = {(aid, t) for aid, when in retracted.items() for t, seen in answered.items()
                  if t >= when and aid in seen}
        in_timeline = {(aid, t) for aid, when in retracted.items() for t, seen in timelines.items()
                       if t >= when and aid in seen}
        in_projection = {aid for aid in retracted for row in projection_timeline(stream)
                         if aid in (row[8], *row[9], *row[10])}

    assert leaked == in_timeline == in_projection == set()


# --------------------------------------------------------------------------- (4) nothing is lost


@EXAMPLES
@given(scenario=scenarios(erasures=True), seed=st.randoms(use_true_random=False))
def test_no_assertion_disappears_except_by_erasure_which_leaves_a_tombstone(db, scenario, seed):
    with time_machine.travel(START, tick=False) as clock:
        stream = Stream(scenario, clock)
        for op in delivery(scenario, seed):
            stream.apply(op)

        rows = {r["id"]: r for r in Assertion.objects.filter(tenant=stream.tenant).values(
            "id", "value", "erased_at", "retracted_at", "payload_hash")}
        keys = FactKey.objects.filter(tenant=stream.tenant)
        listed = [s["assertion_id"] for k in keys for v in queries.key_versions(key=k) for s in v["sources"]]

    erased_ids = {stream.ids[i] for i in scenario.erased}
    assert set(rows) == set(stream.ids.values())
    assert len(rows) == len({json.dumps(p, sort_keys=True) for p in scenario.payloads})
    assert {i for i, r in rows.items() if r["erased_at"] is not None} == erased_ids
    assert all(rows[i]["value"] is None for i in erased_ids)
    assert {i for i, r in rows.items() if r["retracted_at"] is not None} == {stream.ids[i] for i in scenario.retracted}
    assert sorted(listed) == sorted(str(i) for i in rows)


# --------------------------------------------------------------------------- (5) a batch is its events in order


@st.composite
def batch_operations(draw):
    """Assertion payloads with retractions by (subject, source id) between
    them, as a batch import would carry them."""
    payloads = draw(st.lists(assertion_payloads(), min_size=1, max_size=8))
    ops: list[tuple[str, object]] = [("assert", p) for p in payloads]
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        ops.insert(draw(st.integers(min_value=0, max_value=len(ops))),
                   ("retract", draw(st.sampled_from(["s1", "s2", "s3", "never-sent"]))))
    return ops


def ledger_item(op: tuple[str, object], now: datetime) -> ledger.Item:
    kind, arg = op
    if kind == "assert":
        return parse_assertion(arg, received_at=now)
    return ledger.Retraction(subject=SUBJECT, source_id=arg, reason="test")


def named_results(tenant: Tenant, results: list) -> list[tuple]:
    """Results with assertion ids replaced by payload hashes (the same content
    in every tenant)."""
    content = {str(k): v for k, v in Assertion.objects.filter(tenant=tenant).values_list("id", "payload_hash")}
    return [("not-found",) if isinstance(r, ledger.NotFound) else
            (r.outcome, r.rule, sorted(content[a] for a in r.extra.get("retracted", [])),
             sorted(content[a] for a in r.supersedes)) for r in results]


@EXAMPLES
@given(ops=batch_operations())
def test_a_batch_answers_and_stores_like_its_events_one_at_a_time(db, ops):
    seen = []
    for together in (False, True):
        with time_machine.travel(START, tick=False) as clock:
            tenant = TenantFactory()
            if together:
                clock.shift(1)
                now = datetime.now(timezone.utc)
                results = ledger.write_batch(tenant=tenant, items=[ledger_item(op, now) for op in ops], actor="test")
            else:
                results = []
                for op in ops:
                    clock.shift(1)
                    now = datetime.now(timezone.utc)
                    results += ledger.write_batch(tenant=tenant, items=[ledger_item(op, now)], actor="test")
            events = sorted(Event.objects.filter(tenant=tenant).values_list("type", flat=True))
            seen.append((named_results(tenant, results), projection_digest(tenant), events))

    assert seen[0] == seen[1]


# --------------------------------------------------------------------------- bodies

_json_scalars = (st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=False, allow_infinity=False)
                 | st.text(st.characters(blacklist_categories=()), max_size=6))
_json_values = st.recursive(_json_scalars, lambda inner: st.lists(inner, max_size=3)
                            | st.dictionaries(st.text(st.characters(blacklist_categories=()), max_size=3), inner,
                                              max_size=3), max_leaves=40)


@settings(max_examples=400, deadline=None)
@given(value=_json_values, depth=st.integers(0, 16))
def test_a_body_is_refused_exactly_when_walking_all_of_it_would_refuse_it(value, depth):
    """parse_json_body skips the walk over every string when the text holds
    no \\u escape that could be a NUL or a surrogate and nothing nests too
    deep: it must refuse exactly the bodies the full walk refuses (NUL,
    unpaired surrogate, deeper than MAX_BODY_DEPTH), naming the same field."""
    from facts.inputs import InputError, _check_storable, parse_json_body

    for _ in range(depth):
        value = [value]
    body = json.dumps(value).encode()  # ASCII: every NUL and surrogate is a \u escape
    try:
        _check_storable(value, depth=0)
        expected = None
    except InputError as exc:
        expected = (exc.detail, exc.field)
    try:
        assert parse_json_body(body) == value
        got = None
    except InputError as exc:
        got = (exc.detail, exc.field)
    assert got == expected


@given(st.datetimes(timezones=st.sampled_from([timezone.utc, timezone(timedelta(hours=5, minutes=30)),
                                               timezone(timedelta(hours=-8))])))
def test_iso_spells_every_time_as_the_iso_format_does_whatever_was_spelled_before(value):
    """``iso`` remembers UTC spellings; a time in another zone equal to a
    remembered one (an equal key) still gets its own offset."""
    same_instant_in_utc = value.astimezone(timezone.utc)
    iso(same_instant_in_utc)

    assert iso(value) == value.isoformat().replace("+00:00", "Z")
    assert datetime.fromisoformat(iso(value).replace("Z", "+00:00")) == value
