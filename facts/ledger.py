"""Writes to the ledger: assert, retract, erase, policy changes.

DESIGN.md, "The write rule": admit, lock the fact key, recompute it with the
resolution function, compare before and after to name the outcome, append
events naming the rule that decided, update the projection and publish domain
events, all in one transaction. Writes to one key are serialised by a row
lock on its :class:`~facts.models.FactKey`; several keys are locked in id
order. Nothing here deletes an assertion.
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from functools import cached_property
from types import SimpleNamespace
from datetime import datetime
from typing import Any, Callable, Iterable

from django.db import DEFAULT_DB_ALIAS, IntegrityError, transaction
from django.utils import timezone

from facts import events as ev
from facts.errors import NotFound
from facts.bulk import Select, Writes, fetch_together, insert_rows, json_text
from facts.claims import CLAIM_FIELDS, LIVE_SQL, to_claim
from facts.inputs import AssertionInput, InputError, parse_name
from facts.models import (
    Assertion, Conflict, CurrentFact, Event, FactKey, PredicatePolicy, SourceRanking, Subject, Tenant,
    WebhookReceipt, new_assertion_id,
)
from facts.policy import PolicyCache
from facts.projection import iso, rows_for_key
from facts.resolve import (
    AUTHORITY_SYSTEM_RECORD, CARDINALITY_MANY, FATE_CONFLICT, FATE_OVERRULED, FATE_PROPOSED, FATE_WINNING,
    RULE_CARDINALITY_MANY, RULE_CORROBORATION, RULE_HIGH_STAKES, RULE_NO_OVERLAP, RULE_SOURCE_RANK,
    RULE_SYSTEM_OF_RECORD, RULE_TIE_CONFLICT, RULE_VALID_TIME, SEGMENT_CONFLICT, SEGMENT_VALUE, SOURCE_KINDS, Claim,
    Resolution, resolve,
)

logger = logging.getLogger(__name__)

# Source kinds that speak for the user: overruled by a system of record,
# they get a follow-up (write rule step 4).
FOLLOWUP_KINDS = ("user_statement", "correction")

# Keys rebuilt per transaction by rebuild_projection.
REBUILD_CHUNK = 500


@dataclass
class WriteResult:
    """The answer to one write (API.md, "Response to every event")."""

    assertion_id: str | None
    outcome: str
    rule: str
    supersedes: list[str] = field(default_factory=list)
    conflict_id: str | None = None
    prompt_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_body(self) -> dict:
        body = {
            "assertion_id": self.assertion_id, "outcome": self.outcome, "rule": self.rule,
            "supersedes": self.supersedes, "conflict_id": self.conflict_id, "prompt_id": self.prompt_id,
        }
        body.update(self.extra)
        return body


@dataclass
class KeyState:
    """A key's resolution at one moment, with the claims it was computed from."""

    key: FactKey
    claims: list[Claim]
    resolution: Resolution
    # Set on a multi-valued key loaded for some values only: those value keys.
    values: set[str] | None = None

    @cached_property
    def by_id(self) -> dict[Any, Claim]:
        return {c.id: c for c in self.claims}

    @cached_property
    def _extents(self) -> dict[Any, list[tuple]]:
        out: dict[Any, list[tuple]] = {}
        for s in self.resolution.segments:
            if s.status == SEGMENT_VALUE:
                for c in s.sources:
                    out.setdefault(c.id, []).append((s.valid_from, s.valid_to))
        return out

    def extent(self, claim_id: Any) -> list[tuple]:
        """Valid-time stretches where ``claim_id`` is a source of the answer
        (indexed once per state: a key with a thousand claims asks a
        thousand times per write)."""
        return self._extents.get(claim_id, [])


# --------------------------------------------------------------------------- keys and locks


def _lock_keys(key_ids: Iterable[int]) -> list[FactKey]:
    """Lock several keys in id order (a consistent order avoids deadlocks)."""
    return list(FactKey.objects.select_for_update().filter(pk__in=set(key_ids)).order_by("pk"))


# --------------------------------------------------------------------------- recording


def _event(key: FactKey | None, *, tenant_id: int, subject_id: int | None, type: str, at: datetime, actor: str,
           assertion_id: Any = None, rule: str = "", before: list | None = None, after: list | None = None,
           payload_hash: str = "", data: dict | None = None, fact_key_id: int | None = None) -> SimpleNamespace:
    """An event-log row, light (see :func:`facts.bulk.insert_rows`), for ``log``."""
    return SimpleNamespace(
        tenant_id=tenant_id, subject_id=subject_id, fact_key_id=key.id if key else fact_key_id,
        assertion_id=assertion_id, type=type, rule=rule,
        actor=actor, before=before or [], after=after or [], payload_hash=payload_hash, data=data or {}, at=at,
    )


def _transition(before: KeyState, after: KeyState, *, now: datetime, actor: str, cause_id: Any = None,
                log: list[SimpleNamespace], book: ConflictBook) -> dict:
    """What changed on one key between two states: status-change and
    supersession events (appended to ``log``, stored by the caller),
    conflicts opened or resolved (kept in ``book``), domain events. Returns ``{"conflict_ids": {valid_from: id},
    "supersedes": {claim_id: [ids]}}``."""
    key = after.key
    before_ids = before.by_id
    supersedes: dict[Any, list] = {}
    for claim in after.claims:
        old_fate = before.resolution.fate.get(claim.id)
        new_fate = after.resolution.fate[claim.id]
        if claim.id in before_ids and old_fate == FATE_WINNING and before.extent(claim.id) != after.extent(claim.id):
            closer = _closer(before, after, claim, cause_id)
            if closer is not None:
                supersedes.setdefault(closer, []).append(claim.id)
                rule = _supersession_rule(after, claim, closer)
                log.append(_event(key, tenant_id=key.tenant_id, subject_id=key.subject_id, type=ev.FACT_SUPERSEDED,
                                  at=now, actor=actor, assertion_id=claim.id, rule=rule, before=[str(claim.id)],
                                  after=[str(closer)], data={"fate": new_fate}))
                ev.publish(ev.DomainEvent(ev.FACT_SUPERSEDED, key.tenant_id, key.subject_id, key.id, {
                    **_fact_payload(key), "assertion_id": str(claim.id), "superseded_by": str(closer),
                    "old": _claim_payload(claim), "new": _claim_payload(after.by_id[closer]), "rule": rule,
                }))
        if claim.id in before_ids and old_fate != new_fate:
            log.append(_event(key, tenant_id=key.tenant_id, subject_id=key.subject_id, type="fact.status_changed",
                              at=now, actor=actor, assertion_id=claim.id, rule=_fate_rule(after, claim),
                              data={"from": old_fate, "to": new_fate}))
            if (new_fate == FATE_OVERRULED and claim.source_kind in FOLLOWUP_KINDS
                    and _fate_rule(after, claim) == RULE_SYSTEM_OF_RECORD):
                # Write rule step 4, whatever the arrival order: a user's
                # word that now loses to the system owning the predicate is
                # followed up (assert_fact covers the user's word arriving
                # last).
                _publish_followup(after, claim)
        if new_fate == FATE_PROPOSED and old_fate != FATE_PROPOSED:
            current = _answer_before(after, claim)
            ev.publish(ev.DomainEvent(ev.PROPOSAL_OPENED, key.tenant_id, key.subject_id, key.id, {
                **_fact_payload(key), "assertion_id": str(claim.id), "new": _claim_payload(claim),
                "old": _claim_payload(current) if current else None,
            }))
    for claim in before.claims:
        if before.resolution.fate.get(claim.id) == FATE_PROPOSED and after.resolution.fate.get(claim.id) != FATE_PROPOSED:
            ev.publish(ev.DomainEvent(ev.PROPOSAL_CLOSED, key.tenant_id, key.subject_id, key.id, {
                **_fact_payload(key), "assertion_id": str(claim.id),
                "fate": after.resolution.fate.get(claim.id, "retracted"),
            }))
    conflict_ids = _sync_conflicts(after, now=now, actor=actor, book=book, log=log)
    return {"conflict_ids": conflict_ids, "supersedes": supersedes}


def _closer(before: KeyState, after: KeyState, claim: Claim, cause_id: Any) -> Any:
    """Who took (part of) ``claim``'s place: the cause of this write when it
    now wins where ``claim`` did, else the claim that closed it by valid
    time (a tie that turned ``claim``'s stretch into a conflict replaced
    nothing). The cause comes first: a correction that takes over a stretch
    a later value had already closed is what replaced it now, not that
    later value again."""
    if cause_id is not None and cause_id != claim.id and after.resolution.fate.get(cause_id) == FATE_WINNING:
        if after.by_id[cause_id].value_key != claim.value_key and _stretches_meet(
                before.extent(claim.id), after.extent(cause_id)):
            return cause_id
    return after.resolution.superseded_by.get(claim.id)


def _supersession_rule(state: KeyState, claim: Claim, closer_id: Any) -> str:
    """The write rule step that put ``closer_id`` in ``claim``'s place:
    valid time when it closed ``claim`` (step 5); a higher rank (step 4:
    the system of record's authority, or the source ranking); else the two
    tied at equal rank and the rule that settled the tie (step 6)."""
    if state.resolution.superseded_by.get(claim.id) == closer_id:
        return RULE_VALID_TIME
    policy, closer = state.resolution.policy, state.by_id[closer_id]
    if policy.rank(closer.source_kind) > policy.rank(claim.source_kind):
        if policy.authority == AUTHORITY_SYSTEM_RECORD and closer.source_kind == "system_record":
            return RULE_SYSTEM_OF_RECORD
        return RULE_SOURCE_RANK
    for _start, rule, tied in state.resolution.ties:
        if {claim.id, closer_id} <= {c.id for c in tied}:
            return rule
    return RULE_SOURCE_RANK


def _stretches_meet(a: list[tuple], b: list[tuple]) -> bool:
    """Whether two lists of ``[start, stop)`` stretches (``None`` = open) overlap."""
    return any((stop_a is None or start_b < stop_a) and (stop_b is None or start_a < stop_b)
               for start_a, stop_a in a for start_b, stop_b in b)


def _fate_rule(state: KeyState, claim: Claim) -> str:
    fate = state.resolution.fate[claim.id]
    if fate == FATE_PROPOSED:
        return RULE_HIGH_STAKES
    if fate == FATE_CONFLICT:
        return RULE_TIE_CONFLICT
    covering = [s for s in state.resolution.segments if s.contains(claim.valid_from)]
    return covering[0].rule if covering else RULE_NO_OVERLAP


def _answer_before(state: KeyState, claim: Claim) -> Claim | None:
    for seg in state.resolution.segments:
        if seg.status == SEGMENT_VALUE and seg.valid_from < claim.valid_from and (
            seg.valid_to is None or claim.valid_from <= seg.valid_to
        ):
            return seg.winner
    return None


def _fact_payload(key: FactKey) -> dict:
    return {"subject_id": key.subject_id, "entity": key.entity, "predicate": key.predicate, "scope": key.scope}


def _claim_payload(claim: Claim) -> dict:
    return {
        "assertion_id": str(claim.id), "value": claim.value, "valid_from": iso(claim.valid_from),
        "valid_to": iso(claim.valid_to), "stated_at": iso(claim.stated_at), "recorded_at": iso(claim.recorded_at),
        "source": {"kind": claim.source_kind, "id": claim.source_id},
    }


class ConflictBook:
    """The conflict rows of the keys one write touches, loaded in one query
    and kept current by that write: key id -> ``valid_from`` -> the latest
    opened :class:`~facts.models.Conflict` there.

    A book that ``defers`` (the batch path, whose domain events wait for its
    rows) keeps the conflicts it opens and changes and writes them with the
    rest of the write (:meth:`write_to`): one round trip for a batch instead
    of one per conflict. Otherwise each is written at once, since
    subscribers hear of it before the write ends."""

    def __init__(self, conflicts: Iterable[Conflict]) -> None:
        """``conflicts``: every conflict row of the keys, oldest opened first."""
        self.by_key: dict[int, dict[datetime, Conflict]] = {}
        for c in conflicts:
            self.by_key.setdefault(c.fact_key_id, {})[c.valid_from] = c
        self.defers = False  # the batch path sets it (facts.ledger._record)
        self._new: dict[Any, Conflict] = {}  # opened by this write, not written yet
        self._changed: dict[Any, Conflict] = {}  # stored before, changed by this write

    def has(self, key_id: int) -> bool:
        return key_id in self.by_key

    def of(self, key_id: int) -> dict[datetime, Conflict]:
        return self.by_key.setdefault(key_id, {})

    def open(self, **fields) -> Conflict:
        """A new conflict row (written now, or by :meth:`write_to`)."""
        if not self.defers:
            return Conflict.objects.create(**fields)
        conflict = Conflict(**fields)
        self._new[conflict.id] = conflict
        return conflict

    def change(self, conflict: Conflict, **fields) -> None:
        """Set ``fields`` on ``conflict`` (written now, or by :meth:`write_to`)."""
        for name, value in fields.items():
            setattr(conflict, name, value)
        if conflict.id in self._new:
            return
        if self.defers:
            self._changed[conflict.id] = conflict
        else:
            Conflict.objects.filter(pk=conflict.pk).update(**fields)

    def write_to(self, writes: Writes) -> None:
        """Add the deferred rows to ``writes``: the changed ones first (a
        tie resolved and opened again at the same valid time must leave the
        one open row the unique constraint allows), then the new ones."""
        changed = list(self._changed.values())
        if changed:
            writes.execute(
                f"UPDATE {_CONFLICTS} c SET status = u.status, candidate_ids = u.candidate_ids, "
                f"resolved_at = u.resolved_at, resolution_rule = u.resolution_rule, resolved_by = u.resolved_by "
                f"FROM unnest(%s::uuid[], %s::text[], %s::text[]::jsonb[], %s::timestamptz[], %s::text[], %s::text[]) "
                f"AS u(id, status, candidate_ids, resolved_at, resolution_rule, resolved_by) WHERE c.id = u.id",
                [[c.id for c in changed], [c.status for c in changed], [json_text(c.candidate_ids) for c in changed],
                 [c.resolved_at for c in changed], [c.resolution_rule for c in changed],
                 [c.resolved_by for c in changed]])
        writes.insert(Conflict, [c.__dict__ for c in self._new.values()])
        self._new, self._changed = {}, {}


_CONFLICTS = Conflict._meta.db_table


def _sync_conflicts(state: KeyState, *, now: datetime, actor: str, book: ConflictBook,
                    log: list[SimpleNamespace]) -> dict[datetime, Any]:
    """Open a conflict for each new high-stakes tie, record low-stakes ties as
    resolved by rule, resolve open conflicts whose tie is gone (step 6).
    Events go to ``log``; a key that has never had a conflict and has no tie
    costs nothing. Returns ``{valid_from: conflict id}`` of the key's ties."""
    key = state.key
    if not book.has(key.id) and not state.resolution.ties:
        return {}
    policy_stakes = state.resolution.policy.stakes
    existing = book.of(key.id)
    open_now = {start: c for start, c in existing.items() if c.status == Conflict.OPEN}
    ids: dict[datetime, Any] = {}
    where = dict(tenant_id=key.tenant_id, subject_id=key.subject_id, fact_key_id=key.id)
    for start, rule, tied in state.resolution.ties:
        candidate_ids = sorted(str(c.id) for c in tied)
        if rule == RULE_TIE_CONFLICT:
            conflict = open_now.get(start)
            if conflict is None:
                conflict = book.open(
                    **where, valid_from=start, status=Conflict.OPEN, stakes=policy_stakes,
                    candidate_ids=candidate_ids, opened_at=now,
                )
                existing[start] = conflict
                log.append(_event(None, **where, type=ev.CONFLICT_OPENED, rule=rule, actor=actor,
                                  after=candidate_ids, at=now, data={"conflict_id": str(conflict.id)}))
                ev.publish(ev.DomainEvent(ev.CONFLICT_OPENED, key.tenant_id, key.subject_id, key.id, {
                    **_fact_payload(key), "conflict_id": str(conflict.id), "valid_from": iso(start),
                    "candidates": [_claim_payload(c) for c in tied], "stakes": policy_stakes,
                }))
            elif conflict.candidate_ids != candidate_ids:
                book.change(conflict, candidate_ids=candidate_ids)
            ids[start] = conflict.id
        elif start not in existing:
            conflict = book.open(
                **where, valid_from=start, status=Conflict.RESOLVED, stakes=policy_stakes,
                candidate_ids=candidate_ids, opened_at=now, resolved_at=now, resolution_rule=rule, resolved_by="rule",
            )
            existing[start] = conflict
            log.append(_event(None, **where, type="conflict.auto_resolved", rule=rule, actor=actor,
                              after=candidate_ids, at=now, data={"conflict_id": str(conflict.id)}))
    open_ties = {start for start, rule, _ in state.resolution.ties if rule == RULE_TIE_CONFLICT}
    for start, conflict in open_now.items():
        if start in open_ties:
            continue
        rule = next((r for s, r, _ in state.resolution.ties if s == start), "tie-gone")
        book.change(conflict, status=Conflict.RESOLVED, resolved_at=now, resolution_rule=rule, resolved_by=actor)
        log.append(_event(None, **where, type=ev.CONFLICT_RESOLVED, rule=rule, actor=actor, at=now,
                          data={"conflict_id": str(conflict.id)}))
        answer = state.resolution.at(start)
        ev.publish(ev.DomainEvent(ev.CONFLICT_RESOLVED, key.tenant_id, key.subject_id, key.id, {
            **_fact_payload(key), "conflict_id": str(conflict.id), "valid_from": iso(start), "rule": rule,
            "resolved_by": actor,
            "value": answer[0].value if answer and answer[0].status == SEGMENT_VALUE else None,
        }))
    return ids


_PROJECTION = CurrentFact._meta.db_table


def _store_projections(states: dict[int, tuple[KeyState, dict]], info: dict,
                       writes: Writes | None = None) -> None:
    """Replace the projection rows of the given keys (key id -> (state,
    conflict ids)) in bulk. A partial state (``KeyState.values`` set)
    replaces only the rows of its values. ``info`` maps assertion id to
    extractor and evidence. The statements go to
    ``writes`` (sent by the caller with the rest of the write), or are sent
    now."""
    out = writes if writes is not None else Writes()
    whole = [kid for kid, (state, _) in states.items() if state.values is None]
    pairs = [(kid, vk) for kid, (state, _) in states.items() if state.values is not None for vk in state.values]
    if whole:
        out.execute(f"DELETE FROM {_PROJECTION} WHERE fact_key_id = ANY(%s)", [whole])
    if pairs:
        out.execute(f"DELETE FROM {_PROJECTION} WHERE (fact_key_id, value_key) IN "
                    f"(SELECT * FROM unnest(%s::bigint[], %s::text[]))", [[k for k, _ in pairs], [v for _, v in pairs]])
    out.insert(CurrentFact, [row for state, conflict_ids in states.values()
                             for row in rows_for_key(state.key, state.resolution, state.claims, info, conflict_ids)])
    if writes is None:
        out.send()


# --------------------------------------------------------------------------- assert


def _register_unclassified(tenant: Tenant, predicates: set[str], now: datetime) -> None:
    """A predicate nobody registered is admitted as ``many``/``low`` and
    marked unclassified, so staff see it (DESIGN.md, "Predicate policy").
    ``predicates`` are those the write's :class:`PolicyCache` found with no
    stored row (:attr:`PolicyCache.unregistered`)."""
    if predicates:
        PredicatePolicy.objects.bulk_create([
            PredicatePolicy(tenant=tenant, predicate=p, cardinality="many", stakes="low", authority="user",
                            classified=False, recorded_at=now, recorded_by="admission")
            for p in sorted(predicates)
        ])


# The largest TTL the policy column holds (a PostgreSQL integer).
MAX_TTL_SECONDS = 2**31 - 1
_ASSERTIONS = Assertion._meta.db_table
_SUBJECTS = Subject._meta.db_table
_KEYS = FactKey._meta.db_table


@dataclass
class Locked:
    """What :func:`_lock` found, with the keys row-locked: the payloads
    already held (payload hash -> assertion id), the subjects named
    (external id -> id), and the keys by ident (subject id, entity,
    predicate, scope kind, scope key) and by id."""

    held: dict[str, Any]
    subjects: dict[str, int]
    by_ident: dict[tuple, FactKey]
    by_id: dict[int, FactKey]


def _key_ident(subject_id: int, d: AssertionInput) -> tuple:
    return (subject_id, d.entity, d.predicate, d.scope_kind, d.scope_key)


def _lock(tenant: Tenant, asserted: list[AssertionInput], extra_ids: set[int], *, policies: PolicyCache) -> Locked:
    """Write rule step 2's lock, on a fresh ``policies``. One round trip
    row-locks, in id order, the
    keys ``asserted`` name and the keys ``extra_ids`` (the same ``SELECT …
    FOR UPDATE`` may also lock other keys of the same subjects and
    predicates) and then, the locks held, reads the policies of the
    predicates (into ``policies``: the newest committed, since a policy
    change takes the same locks before it commits), the subjects and the
    payloads already held. Only when a subject or key does not exist yet
    does :func:`_create_keys` create what is missing.

    Subjects whose stored display name is empty take the one given (one
    statement, then only)."""
    names = {d.subject: d.subject_name for d in asserted}
    idents = {(d.subject, d.entity, d.predicate, d.scope_kind, d.scope_key) for d in asserted}
    predicates = {d.predicate for d in asserted}
    externals = list(names)
    policy_statement = policies.prefetch_statement(predicates)
    prefetched = ev.prefetches(tenant.id)  # subscribers' lookups (events.prefetch_with_writes)
    keys, subject_rows, held_rows, *more_rows = fetch_together(
        _key_lock(tenant, externals, predicates, extra_ids),
        Select(Subject, ("external_id", "id", "display_name"), "tenant_id = %s AND external_id = ANY(%s)",
               [tenant.id, externals]) if asserted else Select.NOTHING,
        Select(Assertion, ("payload_hash", "id"), "tenant_id = %s AND payload_hash = ANY(%s) AND erased_at IS NULL",
               [tenant.id, list({d.payload_hash for d in asserted})]) if asserted else Select.NOTHING,
        *([policy_statement] if policy_statement else []),
        *(query for _, query in prefetched),
    )
    if policy_statement:
        policies.load(predicates, more_rows.pop(0))
    for (memo_key, _), rows in zip(prefetched, more_rows):
        ev.remember(memo_key, rows)
    subjects = {r["external_id"]: r["id"] for r in subject_rows}
    unnamed = {r["id"]: names[r["external_id"]] for r in subject_rows
               if names[r["external_id"]] and not r["display_name"]}
    if unnamed:
        writes = Writes()
        writes.execute(f"UPDATE {_SUBJECTS} s SET display_name = u.n FROM unnest(%s::bigint[], %s::text[]) AS u(id, n) "
                       f"WHERE s.id = u.id AND s.display_name = ''", [list(unnamed), list(unnamed.values())])
        writes.send()
    found = {(k.subject_id, k.entity, k.predicate, k.scope_kind, k.scope_key): k for k in keys}
    missing = sorted(i for i in idents if (subjects.get(i[0]), *i[1:]) not in found)
    if missing:
        new_subjects = [x for x in externals if x not in subjects]
        new_keys, subjects = _create_keys(tenant, missing, {x: names[x] for x in new_subjects}, subjects)
        found.update({(k.subject_id, k.entity, k.predicate, k.scope_kind, k.scope_key): k for k in new_keys})
    by_ident = {(subjects[x], e, p, k, sk): found[(subjects[x], e, p, k, sk)] for x, e, p, k, sk in idents}
    by_id = {k.id: k for k in by_ident.values()}
    by_id.update({k.id: k for k in keys if k.id in extra_ids})
    return Locked({r["payload_hash"]: r["id"] for r in held_rows}, subjects, by_ident, by_id)


def _key_lock(tenant: Tenant, externals: list[str], predicates: set[str], extra_ids: set[int]) -> Select:
    """``SELECT … FOR UPDATE`` of the keys of subjects ``externals`` (external
    ids) and ``predicates``, and of the keys ``extra_ids``, in id order.

    Two texts, each written so that its generic plan (the one a prepared
    statement runs: see :class:`facts.bulk.PreparedStatements`) reaches the
    keys through the subjects' rows, whatever the store holds. With no
    ``extra_ids`` (every write but a retraction), the subjects' key index
    and a filter. With some, a union of the two lists of ids, each looked
    up by primary key: written as one ``OR``, the plan would AND the
    subject index with the tenant's predicate index, whose entries grow
    with the store."""
    if not extra_ids:
        return Select(FactKey, where=f"tenant_id = %s AND subject_id = ANY(ARRAY(SELECT id FROM {_SUBJECTS} "
                                     f"WHERE tenant_id = %s AND external_id = ANY(%s))) AND predicate = ANY(%s)",
                      params=[tenant.id, tenant.id, externals, list(predicates)],
                      order_by="id", for_update=True, as_model=True)
    return Select(FactKey, where=f"tenant_id = %s AND id IN (SELECT unnest(%s::bigint[]) UNION ALL "
                                 f"SELECT k.id FROM {_KEYS} k JOIN {_SUBJECTS} s ON s.id = k.subject_id "
                                 f"WHERE s.tenant_id = %s AND s.external_id = ANY(%s) AND k.tenant_id = %s "
                                 f"AND k.predicate = ANY(%s))",
                  params=[tenant.id, list(extra_ids), tenant.id, externals, tenant.id, list(predicates)],
                  order_by="id", for_update=True, as_model=True)


_KEY_FIELDS = [f.attname for f in FactKey._meta.concrete_fields]
_KEY_COLUMNS = ", ".join(f.column for f in FactKey._meta.concrete_fields)


def _create_keys(tenant: Tenant, idents: list[tuple], new_subjects: dict[str, str],
                 subjects: dict[str, int]) -> tuple[list[FactKey], dict[str, int]]:
    """Create the subjects ``new_subjects`` (external id -> display name;
    one round trip, only when there are some) and the keys ``idents``
    (external id, entity, predicate, scope kind, scope key): one round
    trip. A key this transaction inserts needs no row lock: until it
    commits no other writer sees the row, and one inserting the same key
    waits on the unique index. A key another writer created meanwhile is
    locked (a round trip, then only). ``subjects``: the ids of the subjects
    that exist. Returns the keys and ``{external id: id}`` of every subject
    of ``idents``."""
    subjects = dict(subjects)
    if new_subjects:
        _, rows = fetch_together(
            (f"INSERT INTO {_SUBJECTS} (tenant_id, external_id, display_name, created_at) "
             f"SELECT %s, u.x, u.n, %s FROM unnest(%s::text[], %s::text[]) AS u(x, n) ORDER BY u.x "
             f"ON CONFLICT DO NOTHING RETURNING id",
             [tenant.id, timezone.now(), list(new_subjects), list(new_subjects.values())]),
            (f"SELECT external_id, id FROM {_SUBJECTS} WHERE tenant_id = %s AND external_id = ANY(%s)",
             [tenant.id, list(new_subjects)]),
        )
        subjects.update(rows)
    wanted = sorted({(subjects[x], e, p, k, sk) for x, e, p, k, sk in idents})
    columns = [list(c) for c in zip(*wanted)]
    inserted, = fetch_together((
        f"INSERT INTO {_KEYS} (tenant_id, subject_id, entity, predicate, scope_kind, scope_key) "
        f"SELECT %s, u.* FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[]) "
        f"AS u(s, e, p, k, sk) ORDER BY u.s, u.e, u.p, u.k, u.sk "
        f"ON CONFLICT DO NOTHING RETURNING {_KEY_COLUMNS}", [tenant.id, *columns]))
    keys = [FactKey.from_db(DEFAULT_DB_ALIAS, _KEY_FIELDS, row) for row in inserted]
    if len(keys) < len(wanted):
        keys += Select(FactKey, where="tenant_id = %s AND subject_id = ANY(%s) AND predicate = ANY(%s)",
                       params=[tenant.id, list(set(columns[0])), list(set(columns[2]))],
                       order_by="id", for_update=True, as_model=True).fetch()
    return keys, subjects


def _states(keys: Iterable[FactKey], *, now: datetime, policies: PolicyCache,
            values: dict[int, set[str]] | None = None) -> tuple[dict[int, KeyState], dict, ConflictBook]:
    """Live claims of many keys: key id -> state, the extractor and evidence
    of every claim loaded (for the projection), and the keys' conflict rows;
    claims and conflicts in one round trip.

    On a multi-valued key each value resolves on its own (write rule step
    3), so only the claims with the values being written (``values``: key id
    -> value keys) are loaded; such a state is partial and its projection is
    stored per value (see :func:`_store_projections`).
    """
    keys = {k.id: k for k in keys}
    policies.prefetch({k.predicate for k in keys.values()})
    many = {kid for kid, k in keys.items()
            if values is not None and policies.get(k.predicate).cardinality == CARDINALITY_MANY}
    grouped: dict[int, list[Claim]] = {kid: [] for kid in keys}
    info: dict[Any, dict] = {}
    wanted = {vk for kid in many for vk in values[kid]}
    fields = (*CLAIM_FIELDS, "extractor", "evidence")
    whole_keys = [k for k in keys if k not in many]
    whole, per_value, conflict_rows = fetch_together(
        Select(Assertion, fields, f"fact_key_id = ANY(%s) AND {LIVE_SQL}", [whole_keys, now, now])
        if whole_keys else Select.NOTHING,
        Select(Assertion, fields, f"fact_key_id = ANY(%s) AND value_key = ANY(%s) AND {LIVE_SQL}",
               [list(many), list(wanted), now, now]) if many else Select.NOTHING,
        Select(Conflict, where="fact_key_id = ANY(%s)", params=[list(keys)], order_by="opened_at", as_model=True)
        if keys else Select.NOTHING,
    )
    for row in [*whole, *per_value]:
        kid = row["fact_key_id"]
        if kid in many and row["value_key"] not in values[kid]:
            continue
        grouped[kid].append(to_claim(row))
        info[row["id"]] = {"extractor": row["extractor"], "evidence": row["evidence"]}
    states = {kid: KeyState(keys[kid], claims, resolve(claims, policies.get(keys[kid].predicate)),
                            values=values[kid] if kid in many else None)
              for kid, claims in grouped.items()}
    return states, info, ConflictBook(conflict_rows)


@dataclass(frozen=True)
class Retraction:
    """One retraction in a write batch (DESIGN.md, "retract": the claim was
    never true): the assertions ``assertion_ids``, or every assertion of
    ``subject`` (external id) from ``source_id``. ``batch_id`` tags a
    console revocation so that it can be undone."""

    assertion_ids: tuple[str, ...] | None = None
    subject: str | None = None
    source_id: str | None = None
    reason: str = ""
    batch_id: uuid.UUID | None = None


Item = AssertionInput | Retraction


def assert_fact(*, tenant: Tenant, data: AssertionInput, actor: str) -> WriteResult:
    """Record one assertion and resolve its key (write rule steps 1-8).

    Returns a :class:`WriteResult` whose ``outcome`` is one of ``created``,
    ``corroborated``, ``duplicate`` (same source id and payload already held:
    nothing written), ``superseded_existing``, ``overruled``, ``proposed``,
    ``conflict``. ``recorded_at`` is the server's clock after the key lock.
    """
    return write_batch(tenant=tenant, items=[data], actor=actor)[0]  # type: ignore[return-value]


@dataclass(frozen=True)
class Receipts:
    """Idempotency receipts a write stores with its rows (API.md: a replayed
    webhook id or batch event id gets its first answer again; see
    :mod:`facts.webhooks`). ``keys`` holds one idempotency key per item
    (``None``: no receipt for that item); each item answered with a
    :class:`WriteResult` gets a :class:`~facts.models.WebhookReceipt` of
    status 200 and the API body, in the write's last round trip. A key
    stored meanwhile by a concurrent request raises ``IntegrityError``
    (the caller rolls back and finds that receipt), or with
    ``skip_stored`` is left as it is."""

    keys: tuple[str | None, ...]
    skip_stored: bool = False

    def of(self, index: int) -> "Receipts":
        """The receipt of item ``index`` alone."""
        return Receipts((self.keys[index],), self.skip_stored)

    def add_to(self, writes: Writes, tenant: Tenant, results: list, now: datetime) -> None:
        """Add the receipts of ``results`` (one per key, in order) to ``writes``."""
        writes.insert(WebhookReceipt, [
            SimpleNamespace(tenant_id=tenant.id, webhook_id=key, status_code=200, response=r.as_body(), created_at=now)
            for key, r in zip(self.keys, results) if key is not None and isinstance(r, WriteResult)
        ], ignore_conflicts=self.skip_stored)

    def store(self, tenant: Tenant, results: list) -> None:
        """Store the receipts of ``results`` now, in a round trip of their own."""
        writes = Writes()
        self.add_to(writes, tenant, results, timezone.now())
        writes.send()


def write_batch(*, tenant: Tenant, items: list[Item], actor: str, savepoint: bool = True,
                receipts: Receipts | None = None) -> list[WriteResult | NotFound]:
    """Apply assertions and retractions in one transaction, in order (the
    batch import, API.md "Batch import"; every other write is a batch of one).

    Returns one result per item, in order: a :class:`WriteResult`, or a
    :class:`NotFound` for a retraction that matches nothing in the tenant
    (that item writes nothing; the others go ahead). Items on the same key
    are applied one after the other, so each outcome is named against the
    state its predecessors left, and a retraction sees the assertions
    recorded before it in the same batch. The work is done in bulk: one
    query each for duplicates, retraction targets, subjects, keys (locked
    in id order), live claims, conflicts; one ``COPY`` each for assertions,
    events and projection rows. When a concurrent writer stores one of the
    same payloads first, the items are taken one at a time so that one
    answers ``duplicate``. With ``savepoint=False``, inside a caller's
    transaction, no savepoint is taken (two statements fewer); the
    ``IntegrityError`` of such a race then goes to the caller, which rolls
    back and tries again (as :func:`facts.webhooks.dispatch_once` does).
    ``receipts``: the items' idempotency receipts, stored in the same round
    trip as the rows (see :class:`Receipts`).
    """
    if not items:
        return []
    try:
        with transaction.atomic(savepoint=savepoint), ev.write_scope():
            return _apply_many(tenant, items, actor, receipts)
    except IntegrityError:
        if not savepoint and transaction.get_connection().in_atomic_block:
            raise
        if len(items) > 1:
            return [r for i, d in enumerate(items) for r in write_batch(
                tenant=tenant, items=[d], actor=actor, receipts=receipts.of(i) if receipts else None)]
        found = _find_duplicate(tenant, items[0]) if isinstance(items[0], AssertionInput) else None
        if found is None:
            raise
        if receipts:
            receipts.store(tenant, [found])
        return [found]


def _apply_many(tenant: Tenant, items: list[Item], actor: str,
                receipts: Receipts | None = None) -> list[WriteResult | NotFound]:
    results: list[WriteResult | NotFound | None] = [None] * len(items)
    asserted = [d for d in items if isinstance(d, AssertionInput)]
    stored = _retraction_targets(tenant, {i: d for i, d in enumerate(items) if isinstance(d, Retraction)})
    extra_ids = {t["fact_key_id"] for rows in stored.values() for t in rows}
    policies = PolicyCache(tenant_id=tenant.id, at=None)
    locked = (_lock(tenant, asserted, extra_ids, policies=policies) if asserted or extra_ids
              else Locked({}, {}, {}, {}))
    held = locked.held
    first_of: dict[str, int] = {}
    todo: list[int] = []
    for i, d in enumerate(items):
        if isinstance(d, Retraction):
            todo.append(i)
        elif d.payload_hash in held:
            results[i] = WriteResult(str(held[d.payload_hash]), "duplicate", "duplicate-payload")
        elif d.payload_hash not in first_of:
            first_of[d.payload_hash] = i
            todo.append(i)

    def finish(writes: Writes, now: datetime) -> None:
        """Once every item written has its result, before the last round trip."""
        for i, d in enumerate(items):
            if results[i] is None:  # the same payload twice in one batch: the second is a duplicate
                results[i] = WriteResult(results[first_of[d.payload_hash]].assertion_id, "duplicate",
                                         "duplicate-payload")
        if receipts:
            receipts.add_to(writes, tenant, results, now)

    if todo:
        _record(tenant, items, todo, actor, results, locked, stored, policies, finish)
    else:
        writes = Writes()  # every item a duplicate: only receipts, if any
        finish(writes, timezone.now())
        writes.send()
    return results


def _retraction_targets(tenant: Tenant, retractions: dict[int, Retraction]) -> dict[int, list[dict]]:
    """Stored, unerased assertions each retraction names (item index ->
    rows with ``id``, ``fact_key_id``, ``subject_id``, ``value_key``,
    ``retracted_at``); two queries at most, whatever the batch size."""
    out: dict[int, list[dict]] = {i: [] for i in retractions}
    fields = ("id", "fact_key_id", "subject_id", "value_key", "retracted_at")
    ids = {a for r in retractions.values() if r.assertion_ids is not None for a in r.assertion_ids}
    if ids:
        by_id = {str(row["id"]): row for row in Assertion.objects.filter(
            tenant=tenant, erased_at__isnull=True, id__in=ids).values(*fields)}
        for i, r in retractions.items():
            if r.assertion_ids is not None:
                out[i] = [by_id[a] for a in dict.fromkeys(r.assertion_ids) if a in by_id]
    pairs = {(r.subject, r.source_id) for r in retractions.values() if r.assertion_ids is None}
    if pairs:
        rows = Assertion.objects.filter(
            tenant=tenant, erased_at__isnull=True, subject__external_id__in={p[0] for p in pairs},
            source_id__in={p[1] for p in pairs},
        ).values(*fields, "source_id", "subject__external_id")
        by_pair: dict[tuple, list[dict]] = {}
        for row in rows:
            by_pair.setdefault((row["subject__external_id"], row["source_id"]), []).append(row)
        for i, r in retractions.items():
            if r.assertion_ids is None:
                out[i] = by_pair.get((r.subject, r.source_id), [])
    return out


def _record(tenant: Tenant, items: list[Item], todo: list[int], actor: str,
            results: list[WriteResult | NotFound | None], locked: Locked, stored: dict[int, list[dict]],
            policies: PolicyCache, finish: Callable[[Writes, datetime], None]) -> None:
    """Write rule steps 3-8 for the items ``todo`` (indexes into ``items``:
    new assertions and retractions, in order), with the keys ``locked``
    and the retractions' targets ``stored`` (see :func:`_retraction_targets`);
    fills ``results``, then calls ``finish(writes, now)`` to add what goes
    in the same last round trip."""
    fresh = [i for i in todo if isinstance(items[i], AssertionInput)]
    subjects, keys = locked.subjects, locked.by_ident
    now = timezone.now()
    _register_unclassified(tenant, policies.unregistered & {items[i].predicate for i in fresh}, now)
    values: dict[int, set[str]] = {}
    for i in fresh:
        d = items[i]
        values.setdefault(keys[_key_ident(subjects[d.subject], d)].id, set()).add(d.value_key)
    for targets in stored.values():
        for t in targets:
            values.setdefault(t["fact_key_id"], set()).add(t["value_key"])
    states, info, book = _states([locked.by_id[kid] for kid in values], now=now, policies=policies, values=values)
    book.defers = True  # domain events wait for the rows below: conflicts go with them
    steps: list[tuple] = []
    rows: dict[Any, Assertion] = {}  # new assertions by id, in order
    batch_claims: list[tuple[AssertionInput, Claim, int]] = []  # (input, claim, key id) recorded so far
    retracted: set = set()  # assertion ids retracted so far in this batch
    updates: list[tuple[list, Retraction]] = []  # stored assertions to mark retracted
    for i in todo:
        d = items[i]
        if isinstance(d, Retraction):
            named = _named_in_batch(d, batch_claims) + [
                (t["id"], t["fact_key_id"], t["retracted_at"] is not None) for t in stored[i]]
            if not named:
                results[i] = NotFound("no such assertion")
                continue
            fresh_ids = [(aid, kid) for aid, kid, done in named if not done and aid not in retracted]
            retracted.update(aid for aid, _ in fresh_ids)
            changed = []
            for kid in dict.fromkeys(kid for _, kid in fresh_ids):
                before = states[kid]
                gone = {aid for aid, k in fresh_ids if k == kid}
                claims = [c for c in before.claims if c.id not in gone]
                states[kid] = KeyState(before.key, claims, resolve(claims, before.resolution.policy),
                                       values=before.values)
                changed.append((before, states[kid]))
            for aid, _ in fresh_ids:
                if aid in rows:
                    row = rows[aid]
                    row.retracted_at, row.retraction_reason, row.retracted_by = now, d.reason, actor
                    row.revocation_batch = d.batch_id
            stored_ids = [aid for aid, _ in fresh_ids if aid not in rows]
            if stored_ids:
                updates.append((stored_ids, d))
            steps.append((i, "retract", changed, fresh_ids, [str(aid) for aid, *_ in named]))
            continue
        key = keys[_key_ident(subjects[d.subject], d)]
        claim = Claim(new_assertion_id(), d.value, d.value_key, d.valid_from, d.valid_to, d.stated_at, now,
                      d.source_kind, d.source_id, d.content_hash)
        rows[claim.id] = SimpleNamespace(
            id=claim.id, tenant_id=tenant.id, subject_id=key.subject_id, fact_key_id=key.id, value=d.value,
            value_key=d.value_key, valid_from=d.valid_from, valid_to=d.valid_to,
            valid_from_precision=d.valid_from_precision, stated_at=d.stated_at, recorded_at=now,
            source_kind=d.source_kind, source_id=d.source_id, extractor=d.extractor, confidence=d.confidence,
            evidence=d.evidence, content_hash=d.content_hash, payload_hash=d.payload_hash, actor=actor,
            retracted_at=None, retraction_reason="", retracted_by="", revocation_batch=None, erased_at=None,
        )
        batch_claims.append((d, claim, key.id))
        info[claim.id] = {"extractor": d.extractor, "evidence": d.evidence}
        before = states[key.id]
        claims = before.claims + [claim]
        states[key.id] = KeyState(key, claims, resolve(claims, before.resolution.policy), values=before.values)
        steps.append((i, "assert", before, states[key.id], claim))
    log: list[SimpleNamespace] = []
    conflict_ids: dict[int, dict] = {}
    # Domain events wait until the rows are written (subscribers read them);
    # the rows then go in one round trip: assertions, retractions, events,
    # projection.
    with ev.held() as release:
        for step in steps:
            if step[1] == "retract":
                results[step[0]] = _commit_retraction(tenant, items[step[0]], *step[2:], now=now, actor=actor,
                                                      log=log, book=book, conflict_ids=conflict_ids)
            else:
                i, _, before, after, claim = step
                results[i] = _commit_assertion(tenant, items[i], before, after, claim, now=now, actor=actor, log=log,
                                               book=book, conflict_ids=conflict_ids)
        writes = Writes()
        writes.insert(Assertion, list(rows.values()))
        for ids, d in updates:
            writes.execute(f"UPDATE {_ASSERTIONS} SET retracted_at = %s, retraction_reason = %s, retracted_by = %s, "
                           f"revocation_batch = %s WHERE id = ANY(%s)", [now, d.reason, actor, d.batch_id, ids])
        book.write_to(writes)
        writes.insert(Event, log)
        _store_projections({kid: (state, conflict_ids.get(kid, {})) for kid, state in states.items()
                            if kid in conflict_ids}, info, writes)
        finish(writes, now)
        writes.send()
        release()
    logger.info("ledger.batch", extra={"tenant": tenant.slug, "assertions": len(rows),
                                       "retracted": len(retracted)})


def _named_in_batch(d: Retraction, batch_claims: list[tuple[AssertionInput, Claim, int]]) -> list[tuple]:
    """Assertions recorded earlier in this batch that retraction ``d``
    names, as ``(id, key id, already retracted)``; whether one was retracted
    earlier in the batch is the caller's to check."""
    if d.assertion_ids is not None:
        wanted = set(d.assertion_ids)
        return [(c.id, kid, False) for _, c, kid in batch_claims if str(c.id) in wanted]
    return [(c.id, kid, False) for a, c, kid in batch_claims if a.subject == d.subject and a.source_id == d.source_id]


def _commit_assertion(tenant: Tenant, d: AssertionInput, before: KeyState, after: KeyState, claim: Claim, *,
                      now: datetime, actor: str, log: list[SimpleNamespace], book: ConflictBook,
                      conflict_ids: dict[int, dict]) -> WriteResult:
    """Events, conflicts and domain events of one new assertion (write rule
    steps 5-8); returns its result."""
    key = after.key
    result = _outcome(before, after, claim)
    asserted_at = len(log)
    committed = _transition(before, after, now=now, actor=actor, cause_id=claim.id, log=log, book=book)
    conflict_ids[key.id] = committed["conflict_ids"]
    result.supersedes = sorted({*result.supersedes, *map(str, committed["supersedes"].get(claim.id, []))})
    if result.outcome == "conflict":
        start = next(s for s, r, tied in after.resolution.ties if any(c.id == claim.id for c in tied))
        result.conflict_id = str(committed["conflict_ids"][start])
    if result.outcome == "superseded_existing" and not result.supersedes:
        result.outcome = "created"
    log.insert(asserted_at, _event(
        key, tenant_id=tenant.id, subject_id=key.subject_id, assertion_id=claim.id, type=ev.FACT_ASSERTED,
        rule=result.rule, actor=actor, before=result.supersedes, after=[str(claim.id)],
        payload_hash=d.payload_hash, data={"outcome": result.outcome, "source_kind": d.source_kind}, at=now,
    ))
    ev.publish(ev.DomainEvent(ev.FACT_ASSERTED, tenant.id, key.subject_id, key.id, {
        **_fact_payload(key), **result.as_body(), "assertion": _claim_payload(claim),
    }))
    if result.rule == RULE_SYSTEM_OF_RECORD and d.source_kind in FOLLOWUP_KINDS:
        _publish_followup(after, claim)
    return result


def _commit_retraction(tenant: Tenant, d: Retraction, changed: list[tuple[KeyState, KeyState]], fresh: list[tuple],
                       named: list[str], *, now: datetime, actor: str, log: list[SimpleNamespace], book: ConflictBook,
                       conflict_ids: dict[int, dict]) -> WriteResult:
    """Events, conflicts and domain events of one retraction; ``fresh``
    holds ``(assertion id, key id)`` of the assertions it retracted now, ``named`` every id it matched (already retracted ones
    included). Returns its result."""
    subject_of = {after.key.id: after.key.subject_id for _, after in changed}
    data = {"reason_given": bool(d.reason), "batch_id": str(d.batch_id) if d.batch_id else None}
    for aid, kid in fresh:
        log.append(_event(None, tenant_id=tenant.id, subject_id=subject_of[kid], type=ev.FACT_RETRACTED, at=now,
                          actor=actor, assertion_id=aid, rule="retraction", data=data, fact_key_id=kid))
    for before, after in changed:
        conflict_ids[after.key.id] = _transition(before, after, now=now, actor=actor, log=log,
                                                 book=book)["conflict_ids"]
    for aid, kid in fresh:
        ev.publish(ev.DomainEvent(ev.FACT_RETRACTED, tenant.id, subject_of[kid], kid, {
            "assertion_id": str(aid), "reason": d.reason, "retracted_at": iso(now), "actor": actor,
        }))
    return WriteResult(named[0], "retracted", "retraction", extra={"retracted": named})


def _publish_followup(state: KeyState, claim: Claim) -> None:
    """Write rule step 4: ``claim`` (the user's word) is kept but loses to
    the system of record that owns the predicate; ask for a follow-up."""
    key = state.key
    ev.publish(ev.DomainEvent(ev.FOLLOWUP_NEEDED, key.tenant_id, key.subject_id, key.id, {
        **_fact_payload(key), "assertion_id": str(claim.id), "new": _claim_payload(claim),
        "system_record": _claim_payload(_winner_at(state, claim.valid_from)),
    }))


def _winner_at(state: KeyState, t: datetime) -> Claim | None:
    segs = [s for s in state.resolution.at(t) if s.status == SEGMENT_VALUE]
    return segs[0].winner if segs else None


def _find_duplicate(tenant: Tenant, data: AssertionInput) -> WriteResult | None:
    existing = (
        Assertion.objects.filter(tenant=tenant, payload_hash=data.payload_hash, erased_at__isnull=True)
        .values_list("id", flat=True).first()
    )
    if existing is None:
        return None
    return WriteResult(str(existing), "duplicate", "duplicate-payload")


def _outcome(before: KeyState, after: KeyState, claim: Claim) -> WriteResult:
    """Name what happened to ``claim`` (API.md outcomes) by comparing the
    key's resolution before and after it arrived."""
    fate = after.resolution.fate[claim.id]
    aid = str(claim.id)
    if fate == FATE_PROPOSED:
        return WriteResult(aid, "proposed", RULE_HIGH_STAKES)
    if fate == FATE_CONFLICT or any(seg.status == SEGMENT_CONFLICT and claim in seg.candidates
                                    for seg in after.resolution.segments):
        # In an open tie from its start, even if it holds alone later on.
        return WriteResult(aid, "conflict", RULE_TIE_CONFLICT)
    if fate == FATE_OVERRULED:
        rule = _fate_rule(after, claim)
        if rule != RULE_SYSTEM_OF_RECORD and not rule.startswith("tie-"):
            rule = RULE_SOURCE_RANK
        return WriteResult(aid, "overruled", rule)
    if after.resolution.policy.cardinality == CARDINALITY_MANY:
        corroborates = any(c.value_key == claim.value_key and _overlaps(c, claim, before) for c in before.claims)
        return WriteResult(aid, "corroborated" if corroborates else "created",
                           RULE_CORROBORATION if corroborates else RULE_CARDINALITY_MANY)
    superseded = [
        str(c.id) for c in before.claims
        if before.resolution.fate.get(c.id) == FATE_WINNING and c.value_key != claim.value_key
        and _stretches_meet(before.extent(c.id), after.extent(claim.id))
    ]
    if superseded:
        rule = RULE_VALID_TIME if any(after.resolution.superseded_by.get(c) == claim.id for c in
                                      (x.id for x in before.claims)) else _fate_rule(after, claim)
        return WriteResult(aid, "superseded_existing", rule, supersedes=sorted(superseded))
    corroborates = any(c.value_key == claim.value_key and after.resolution.fate.get(c.id) == FATE_WINNING
                       and _overlaps(c, claim, after) for c in before.claims)
    if corroborates:
        return WriteResult(aid, "corroborated", RULE_CORROBORATION)
    return WriteResult(aid, "created", _fate_rule(after, claim))


def _overlaps(a: Claim, b: Claim, state: KeyState) -> bool:
    end_a = state.resolution.end.get(a.id, a.valid_to)
    end_b = b.valid_to
    return (end_b is None or a.valid_from < end_b) and (end_a is None or b.valid_from < end_a)


# --------------------------------------------------------------------------- retract and erase


def _recompute(key_ids: Iterable[int], *, now: datetime, actor: str, mutate) -> None:
    """Lock ``key_ids`` in order, take their state, run ``mutate()`` (the
    lifecycle update), then commit every key's new state in bulk."""
    keys = _lock_keys(key_ids)
    if not keys:
        mutate()
        return
    policies = PolicyCache(tenant_id=keys[0].tenant_id, at=now)
    before, _, _ = _states(keys, now=now, policies=policies)
    mutate()
    after, info, book = _states(keys, now=now, policies=policies)
    log: list[SimpleNamespace] = []
    conflict_ids = {}
    for key in keys:
        out = _transition(before[key.id], after[key.id], now=now, actor=actor, log=log, book=book)
        conflict_ids[key.id] = out["conflict_ids"]
    writes = Writes()
    writes.insert(Event, log)
    _store_projections({kid: (state, conflict_ids[kid]) for kid, state in after.items()}, info, writes)
    writes.send()


def retract(*, tenant: Tenant, assertion_ids: list[str] | None = None, subject: str | None = None,
            source_id: str | None = None, reason: str = "", actor: str, batch_id: uuid.UUID | None = None) -> WriteResult:
    """Retract (DESIGN.md: "the claim was never true") the assertions
    ``assertion_ids``, or every assertion of ``subject`` from ``source_id``.
    The rows stay; from now on no answer for any valid time contains them.
    Already retracted assertions are left as they are. A batch of one for
    :func:`write_batch`. Raises :class:`NotFound` when nothing matches in
    the tenant."""
    item = Retraction(assertion_ids=tuple(str(a) for a in assertion_ids) if assertion_ids is not None else None,
                      subject=subject, source_id=source_id, reason=reason, batch_id=batch_id)
    result = write_batch(tenant=tenant, items=[item], actor=actor)[0]
    if isinstance(result, NotFound):
        raise result
    return result


def unretract(*, tenant: Tenant, batch_id: uuid.UUID, actor: str) -> int:
    """Undo a revocation batch: the batch's retractions stop counting from
    now on (new ``fact.restored`` events; history keeps both). Returns how
    many assertions were restored."""
    with transaction.atomic():
        originals = list(Assertion.objects.filter(tenant=tenant, revocation_batch=batch_id, erased_at__isnull=True,
                                                  retracted_at__isnull=False))
        now = timezone.now()

        def mutate() -> None:
            # A restored assertion is a new belief from now: the original row
            # keeps its retraction; a copy is recorded now (payload unchanged).
            copies, log = [], []
            for original in originals:
                copy = Assertion(**{f.attname: getattr(original, f.attname) for f in Assertion._meta.concrete_fields})
                copy.id, copy.recorded_at, copy.actor = new_assertion_id(), now, actor
                copy.retracted_at, copy.retraction_reason, copy.retracted_by = None, "", ""
                copy.revocation_batch, copy.payload_hash = None, f"restored:{original.id}"
                copies.append(copy)
                log.append(_event(None, tenant_id=tenant.id, subject_id=original.subject_id, type="fact.restored",
                                  at=now, actor=actor, assertion_id=copy.id, rule="revocation-undo",
                                  before=[str(original.id)], after=[str(copy.id)], data={"batch_id": str(batch_id)},
                                  fact_key_id=original.fact_key_id))
            Assertion.objects.filter(id__in=[o.id for o in originals]).update(revocation_batch=None)
            insert_rows(Assertion, copies)
            insert_rows(Event, log)

        _recompute({o.fact_key_id for o in originals}, now=now, actor=actor, mutate=mutate)
        return len(originals)


def erase(*, tenant: Tenant, assertion_id: str, actor: str) -> WriteResult:
    """Erase one assertion (right to be forgotten): value and evidence are
    destroyed, a tombstone without personal data stays. Erasing a tombstone
    again answers the same and writes nothing (the erasure time stays the
    first). Raises :class:`NotFound`."""
    with transaction.atomic():
        row = (Assertion.objects.filter(tenant=tenant, id=assertion_id)
               .values("id", "fact_key_id", "subject_id", "erased_at").first())
        if row is None:
            raise NotFound("no such assertion")
        if row["erased_at"] is None:
            _erase_rows(tenant, [row], actor=actor)
        return WriteResult(str(row["id"]), "erased", "erasure")


def _erase_rows(tenant: Tenant, rows: list[dict], *, actor: str) -> None:
    now = timezone.now()
    ids = [r["id"] for r in rows]

    def mutate() -> None:
        # The hashes go too: a hash of a short value under a known source id
        # gives the value back to anyone who hashes guesses (DESIGN.md,
        # "erasure": a tombstone without personal data).
        Assertion.objects.filter(id__in=ids).update(
            value=None, value_key="", evidence="", retraction_reason="", erased_at=now, confidence=None,
            content_hash="", payload_hash="",
        )
        Event.objects.filter(tenant=tenant, assertion_id__in=ids).exclude(payload_hash="").update(payload_hash="")
        insert_rows(Event, [
            _event(None, tenant_id=tenant.id, subject_id=r["subject_id"], type=ev.FACT_ERASED, at=now, actor=actor,
                   assertion_id=r["id"], rule="erasure", fact_key_id=r["fact_key_id"]) for r in rows
        ])

    _recompute({r["fact_key_id"] for r in rows}, now=now, actor=actor, mutate=mutate)
    for r in rows:
        ev.publish(ev.DomainEvent(ev.FACT_ERASED, tenant.id, r["subject_id"], r["fact_key_id"],
                                  {"assertion_id": str(r["id"]), "erased_at": iso(now)}))


def erase_subject(*, tenant: Tenant, external_id: str, actor: str) -> int:
    """Erase everything about a person (API.md ``DELETE /subjects/<id>``).
    Returns the number of assertions erased. Raises :class:`NotFound`."""
    with transaction.atomic():
        subject = Subject.objects.filter(tenant=tenant, external_id=external_id).first()
        if subject is None:
            raise NotFound("no such subject")
        rows = list(Assertion.objects.filter(subject=subject, erased_at__isnull=True)
                    .values("id", "fact_key_id", "subject_id"))
        if rows:
            _erase_rows(tenant, rows, actor=actor)
        now = timezone.now()
        Subject.objects.filter(pk=subject.pk).update(display_name="", erased_at=now)
        Event.objects.create(tenant=tenant, subject=subject, type=ev.SUBJECT_ERASED, rule="erasure", actor=actor,
                             at=now, data={"assertions": len(rows)})
        ev.publish(ev.DomainEvent(ev.SUBJECT_ERASED, tenant.id, subject.id, None, {"erased_at": iso(now)}))
        return len(rows)


# --------------------------------------------------------------------------- policy


def set_predicate_policy(*, tenant: Tenant, predicate: str, cardinality: str | None, stakes: str | None,
                         authority: str, ttl_seconds: int | None, actor: str) -> dict:
    """Record a new version of a predicate's policy and re-run detection over
    every key of that predicate (API.md, "Predicate policy"). Returns a
    summary ``{"predicate", "keys", "changed", "conflicts_opened",
    "proposals"}``. Raises :class:`InputError` for a bad or missing
    (``None``) field."""
    parse_name(predicate, "predicate")
    if cardinality not in ("one", "many"):
        raise InputError("is required: 'one' or 'many'" if cardinality is None else "must be 'one' or 'many'",
                         "cardinality")
    if stakes not in ("low", "high"):
        raise InputError("is required: 'low' or 'high'" if stakes is None else "must be 'low' or 'high'", "stakes")
    if authority not in ("user", "system_record"):
        raise InputError("must be 'user' or 'system_record'", "authority")
    if ttl_seconds is not None and (isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int)
                                    or not 0 < ttl_seconds <= MAX_TTL_SECONDS):
        raise InputError(f"must be a number of seconds from 1 to {MAX_TTL_SECONDS:,} (68 years), or null",
                         "ttl_seconds")
    with transaction.atomic():
        now = timezone.now()
        PredicatePolicy.objects.create(
            tenant=tenant, predicate=predicate, cardinality=cardinality, stakes=stakes, authority=authority,
            ttl_seconds=ttl_seconds, classified=True, recorded_at=now, recorded_by=actor,
        )
        Event.objects.create(tenant=tenant, type=ev.POLICY_CHANGED, rule="policy", actor=actor, at=now,
                             data={"predicate": predicate, "cardinality": cardinality, "stakes": stakes,
                                   "authority": authority, "ttl_seconds": ttl_seconds})
        summary = _rerun(tenant, FactKey.objects.filter(tenant=tenant, predicate=predicate), now=now, actor=actor)
        return {"predicate": predicate, **summary}


def set_source_ranking(*, tenant: Tenant, ranking: list[str], actor: str) -> dict:
    """Record a new version of the tenant's source ranking (highest first, a
    permutation of the five source kinds) and re-run every key. Raises
    :class:`InputError`."""
    if not isinstance(ranking, list) or sorted(ranking) != sorted(SOURCE_KINDS):
        raise InputError(f"must list each of {', '.join(SOURCE_KINDS)} once, highest first", "ranking")
    with transaction.atomic():
        now = timezone.now()
        SourceRanking.objects.create(tenant=tenant, ranking=ranking, recorded_at=now, recorded_by=actor)
        Event.objects.create(tenant=tenant, type=ev.POLICY_CHANGED, rule="ranking", actor=actor, at=now,
                             data={"ranking": ranking})
        return _rerun(tenant, FactKey.objects.filter(tenant=tenant), now=now, actor=actor)


def _rerun(tenant: Tenant, keys, *, now: datetime, actor: str) -> dict:
    """Recompute ``keys`` under the policy in force at ``now`` against the
    policy just before it, in bulk; returns the change summary."""
    locked = _lock_keys(keys.values_list("pk", flat=True))
    previous = PolicyCache(tenant_id=tenant.id, at=now - timezone.timedelta(microseconds=1))
    after, info, book = _states(locked, now=now, policies=PolicyCache(tenant_id=tenant.id, at=now))
    open_conflicts = Conflict.objects.filter(fact_key_id__in=list(after), status=Conflict.OPEN)
    opened_before = open_conflicts.count()
    log: list[SimpleNamespace] = []
    conflict_ids, changed = {}, 0
    for kid, state in after.items():
        before = KeyState(state.key, state.claims, resolve(state.claims, previous.get(state.key.predicate)))
        changed += before.resolution.segments != state.resolution.segments
        out = _transition(before, state, now=now, actor=actor, log=log, book=book)
        conflict_ids[kid] = out["conflict_ids"]
    writes = Writes()
    writes.insert(Event, log)
    _store_projections({kid: (state, conflict_ids[kid]) for kid, state in after.items()}, info, writes)
    writes.send()
    return {
        "keys": len(after), "changed": changed,
        "conflicts_opened": max(0, open_conflicts.count() - opened_before),
        "proposals": sum(1 for s in after.values() for f in s.resolution.fate.values() if f == FATE_PROPOSED),
    }


# --------------------------------------------------------------------------- projection maintenance


def rebuild_projection(*, tenant: Tenant | None = None, key_ids: Iterable[int] | None = None) -> int:
    """Recompute the projection of every key (or of ``key_ids``) from the
    log, under the current policy. Returns the number of keys rebuilt."""
    keys = FactKey.objects.all()
    if tenant is not None:
        keys = keys.filter(tenant=tenant)
    if key_ids is not None:
        keys = keys.filter(pk__in=list(key_ids))
    ids = list(keys.order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(ids), REBUILD_CHUNK):
        with transaction.atomic():
            locked = _lock_keys(ids[start:start + REBUILD_CHUNK])
            by_tenant: dict[int, list[FactKey]] = {}
            for key in locked:
                by_tenant.setdefault(key.tenant_id, []).append(key)
            now = timezone.now()
            for tenant_id, group in by_tenant.items():
                states, info, book = _states(group, now=now, policies=PolicyCache(tenant_id=tenant_id, at=now))
                open_ids = {kid: {start: c.id for start, c in book.of(kid).items() if c.status == Conflict.OPEN}
                            for kid in states}
                _store_projections({kid: (state, open_ids[kid]) for kid, state in states.items()}, info)
    return len(ids)


__all__ = [
    "NotFound", "WriteResult", "Retraction", "write_batch", "assert_fact", "retract", "unretract",
    "erase", "erase_subject", "set_predicate_policy", "set_source_ranking", "rebuild_projection",
]
