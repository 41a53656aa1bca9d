"""The resolution function: assertions + policy -> the timeline of one fact key.

Pure and database-free (it imports nothing from Django), so that the write
path, the current-view projection and as-of reads all compute answers with
the same code. The rules are ``DESIGN.md``, "The write rule" and "The
resolution function"; each function below names the step it implements.

Shapes:

- A :class:`Claim` is one assertion as the rules see it. Datetimes are
  timezone-aware UTC. ``valid_to`` ``None`` means "until further notice".
- A :class:`Policy` is the predicate policy and source ranking in force at the
  transaction time being resolved.
- :func:`resolve` returns a :class:`Resolution`: the merged
  :class:`Segment` s over valid time (one value, or an open conflict), each
  claim's fate, and the supersession links.

Everything is ordered by content (valid time, stated time, a stable content
hash), never by arrival or by a server-made id, so any delivery order of the
same assertions resolves to the same timeline.
"""
from __future__ import annotations

import hashlib
import heapq
import json
from dataclasses import dataclass, field
from functools import cached_property
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Sequence

SOURCE_KINDS = ("correction", "system_record", "user_statement", "user_document", "agent_inference")
# DESIGN.md, write rule step 4: highest first.
DEFAULT_RANKING = ("correction", "user_statement", "system_record", "user_document", "agent_inference")

CARDINALITY_ONE = "one"
CARDINALITY_MANY = "many"
STAKES_LOW = "low"
STAKES_HIGH = "high"
AUTHORITY_USER = "user"
AUTHORITY_SYSTEM_RECORD = "system_record"

# Rule names, as recorded in the event log and returned by the API.
RULE_NO_OVERLAP = "no-overlap"
RULE_CORROBORATION = "corroboration"
RULE_CARDINALITY_MANY = "cardinality-many"
RULE_SOURCE_RANK = "source-rank"
RULE_SYSTEM_OF_RECORD = "system-of-record-authority"
RULE_VALID_TIME = "valid-time-supersession"
RULE_TIE_STATED_AT = "tie-stated-at"
RULE_TIE_CONTENT_HASH = "tie-content-hash"
RULE_TIE_CONFIRMED = "tie-confirmed-by-correction"
RULE_TIE_CONFLICT = "tie-open-conflict"
RULE_HIGH_STAKES = "high-stakes-confirmation"

# A claim's fate under one resolution.
FATE_WINNING = "winning"  # a source of at least one value segment
FATE_OVERRULED = "overruled"  # live, but loses wherever it holds
FATE_PROPOSED = "proposed"  # high-stakes change waiting for confirmation
FATE_CONFLICT = "conflict"  # a candidate of an open (high-stakes) tie

SEGMENT_VALUE = "value"
SEGMENT_CONFLICT = "conflict"

_FAR_FUTURE = datetime.max.replace(tzinfo=timezone.utc)


def normalise_value(value: Any) -> str:
    """Return the canonical comparison key of a value (DESIGN.md, "value").

    Strings are compared after Unicode NFC, trimming, collapsing inner
    whitespace and case-folding; objects by their sorted keys; numbers and
    booleans as JSON. The key is a JSON string, e.g. ``'"berlin"'``.
    """
    return json.dumps(_normalise(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _normalise(value: Any) -> Any:
    import unicodedata

    if isinstance(value, str):
        return " ".join(unicodedata.normalize("NFC", value).split()).casefold()
    if isinstance(value, dict):
        return {str(k): _normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def content_hash(*, source_id: str, value_key: str) -> str:
    """Stable tie-break hash of an assertion's content (DESIGN.md step 6).

    SHA-256 hex of the source id and the normalised value; never of arrival
    order or of a server-made id.
    """
    return hashlib.sha256(f"{source_id}\x1f{value_key}".encode()).hexdigest()


@dataclass(frozen=True)
class Policy:
    """Predicate policy and source ranking as they stood at one transaction time.

    ``ttl_seconds`` (seconds, or ``None``) makes a predicate ephemeral: a claim
    stops holding ``ttl_seconds`` after its ``valid_from``. ``ranking`` lists
    source kinds highest first.
    """

    cardinality: str = CARDINALITY_MANY
    stakes: str = STAKES_LOW
    authority: str = AUTHORITY_USER
    ttl_seconds: int | None = None
    ranking: tuple[str, ...] = DEFAULT_RANKING

    def rank(self, source_kind: str) -> int:
        """Rank of a source kind (higher wins). DESIGN.md write rule step 4:
        a predicate whose authority is ``system_record`` puts the system of
        record above everything for that predicate. Raises ``ValueError``
        for a kind the ranking does not list."""
        try:
            return self._ranks[source_kind]
        except KeyError:
            raise ValueError(f"{source_kind!r} is not in the source ranking") from None

    @cached_property
    def _ranks(self) -> dict[str, int]:
        """Source kind -> rank, computed once per policy (the resolution
        asks for a rank several times per claim)."""
        ranks: dict[str, int] = {}
        for i, kind in enumerate(self.ranking):
            ranks.setdefault(kind, len(self.ranking) - i)
        if self.authority == AUTHORITY_SYSTEM_RECORD:
            ranks["system_record"] = len(self.ranking) + 1
        return ranks


@dataclass(frozen=True)
class Claim:
    """One live assertion, as the rules see it.

    ``id`` refers back to the stored assertion and never takes part in
    ordering. ``value_key`` is :func:`normalise_value` of ``value``;
    ``content_hash`` is :func:`content_hash` of source id and value key.
    """

    id: Any
    value: Any
    value_key: str
    valid_from: datetime
    valid_to: datetime | None
    stated_at: datetime
    recorded_at: datetime
    source_kind: str
    source_id: str
    content_hash: str

    @property
    def order_key(self) -> tuple:
        """Content-only order: valid time, stated time, content hash, then the
        rest of the content, so that only claims with identical content tie."""
        return (self.valid_from, self.stated_at, self.content_hash, self.valid_to or _FAR_FUTURE,
                self.source_kind, self.source_id)


@dataclass(frozen=True)
class Segment:
    """One stretch of valid time ``[valid_from, valid_to)`` with one answer.

    ``status`` is ``"value"`` (``value``/``value_key`` hold the answer,
    ``winner`` is the primary source, ``sources`` every claim with that
    value that holds in the stretch, highest rank first) or ``"conflict"``
    (``candidates``: the tied claims at the highest rank). ``rule`` names the
    step that decided.
    """

    valid_from: datetime
    valid_to: datetime | None
    status: str
    value_key: str
    value: Any
    winner: Claim | None
    sources: tuple[Claim, ...]
    candidates: tuple[Claim, ...]
    rule: str

    def contains(self, t: datetime) -> bool:
        return self.valid_from <= t and (self.valid_to is None or t < self.valid_to)


@dataclass
class Resolution:
    """The timeline of one fact key at one transaction time.

    ``segments`` are sorted by ``(valid_from, value_key)``; for a
    single-valued predicate they never overlap, for a multi-valued one each
    value has its own. ``fate`` maps claim id to one of the ``FATE_*``
    names. ``end`` maps claim id to its effective end (DESIGN.md ``end(a)``);
    ``superseded_by`` maps a claim id to the id of the claim whose later
    valid time closed it. ``ties`` lists the valid times at which equal-rank
    claims tied, with the rule that settled each (or ``RULE_TIE_CONFLICT``).
    """

    policy: Policy
    segments: list[Segment] = field(default_factory=list)
    fate: dict[Any, str] = field(default_factory=dict)
    end: dict[Any, datetime | None] = field(default_factory=dict)
    superseded_by: dict[Any, Any] = field(default_factory=dict)
    ties: list[tuple[datetime, str, tuple[Claim, ...]]] = field(default_factory=list)

    def at(self, t: datetime) -> list[Segment]:
        """The segments that hold at valid time ``t`` (empty: unknown)."""
        return [s for s in self.segments if s.contains(t)]

    def conflicts(self) -> list[Segment]:
        return [s for s in self.segments if s.status == SEGMENT_CONFLICT]


def _distinct(claims: Iterable[Claim]) -> tuple[Claim, ...]:
    """``claims`` once each (by id), in valid-time order (``order_key``)."""
    return tuple(sorted({c.id: c for c in claims}.values(), key=lambda c: c.order_key))


def resolve(claims: Iterable[Claim], policy: Policy) -> Resolution:
    """Resolve one fact key: DESIGN.md, "The resolution function".

    ``claims`` must be the key's live assertions at the transaction time being
    answered (recorded at or before it, not retracted at or before it, not
    erased); ``policy`` the policy in force then. Raises ``ValueError`` for a
    source kind outside :data:`SOURCE_KINDS`.
    """
    claims = _distinct(claims)
    for c in claims:
        if c.source_kind not in SOURCE_KINDS:
            raise ValueError(f"unknown source kind {c.source_kind!r}")
    resolution = Resolution(policy=policy)
    if policy.cardinality == CARDINALITY_MANY:
        _resolve_many(claims, policy, resolution)
        return resolution
    accepted, proposals = _split_proposals(claims, policy)
    for p in proposals:
        resolution.fate[p.id] = FATE_PROPOSED
    _resolve_one(accepted, policy, resolution)
    return resolution


def _natural_end(claim: Claim, policy: Policy) -> datetime | None:
    ends = [e for e in (claim.valid_to, _ttl_end(claim, policy)) if e is not None]
    return min(ends) if ends else None


def _ttl_end(claim: Claim, policy: Policy) -> datetime | None:
    if policy.ttl_seconds is None:
        return None
    try:
        return claim.valid_from + timedelta(seconds=policy.ttl_seconds)
    except OverflowError:  # past the year 9999: the claim does not expire in any time we can name
        return None


def _resolve_many(claims: Sequence[Claim], policy: Policy, resolution: Resolution) -> None:
    """Cardinality ``many`` (write rule step 3): every value holds over the
    union of its claims' intervals; nothing conflicts, nothing is closed."""
    by_value: dict[str, list[Claim]] = {}
    for c in claims:
        resolution.end[c.id] = _natural_end(c, policy)
        resolution.fate[c.id] = FATE_WINNING
        by_value.setdefault(c.value_key, []).append(c)
    for value_key, group in sorted(by_value.items()):
        for start, stop, members in _union_intervals(group, resolution.end):
            sources = _rank_sorted(members, policy)
            resolution.segments.append(
                Segment(start, stop, SEGMENT_VALUE, value_key, sources[0].value, sources[0],
                        tuple(sources), (), RULE_CARDINALITY_MANY)
            )
    resolution.segments.sort(key=lambda s: (s.valid_from, s.value_key))


def _union_intervals(group: Sequence[Claim], ends: dict) -> list[tuple[datetime, datetime | None, list[Claim]]]:
    out: list[tuple[datetime, datetime | None, list[Claim]]] = []
    for c in sorted(group, key=lambda c: c.order_key):
        end = ends[c.id]
        if out and (out[-1][1] is None or c.valid_from <= out[-1][1]):
            start, stop, members = out[-1]
            merged_stop = None if stop is None or end is None else max(stop, end)
            out[-1] = (start, merged_stop, members + [c])
        else:
            out.append((c.valid_from, end, [c]))
    return out


def _rank_sorted(claims: Iterable[Claim], policy: Policy) -> list[Claim]:
    return sorted(claims, key=lambda c: (-policy.rank(c.source_kind), c.order_key))


def _split_proposals(claims: Sequence[Claim], policy: Policy) -> tuple[list[Claim], list[Claim]]:
    """High stakes (write rule step 7): separate proposals from accepted claims.

    Walking the non-correction claims by valid time, one whose value differs
    from the answer then in force, from a rank at least that answer's, is a
    proposal, unless a live correction with the same value covering its
    start confirms it. The answer then in force is computed from the claims
    accepted so far that start before it and from every correction that
    starts at or before it: a correction starting at the same instant
    decides that instant, so a claim it outranks is overruled there, not
    proposed (once one of two proposals with the same start is confirmed,
    the other is no longer a pending change). Low stakes: nothing is a
    proposal.
    """
    if policy.stakes != STAKES_HIGH:
        return list(claims), []
    corrections = [c for c in claims if c.source_kind == "correction"]
    accepted = list(corrections)
    proposals: list[Claim] = []
    for claim in claims:
        if claim.source_kind == "correction":
            continue
        earlier = [c for c in accepted if c.valid_from < claim.valid_from
                   or (c.source_kind == "correction" and c.valid_from == claim.valid_from)]
        prior = Resolution(policy=policy)
        _resolve_one(earlier, policy, prior)
        in_force = prior.at(claim.valid_from)
        if in_force and _is_change(claim, in_force[0], policy) and not _confirmed(claim, corrections):
            proposals.append(claim)
        else:
            accepted.append(claim)
    return accepted, proposals


def _is_change(claim: Claim, answer: Segment, policy: Policy) -> bool:
    if answer.status == SEGMENT_VALUE:
        return claim.value_key != answer.value_key and policy.rank(claim.source_kind) >= policy.rank(answer.winner.source_kind)
    values = {c.value_key for c in answer.candidates}
    top = max(policy.rank(c.source_kind) for c in answer.candidates)
    return claim.value_key not in values and policy.rank(claim.source_kind) >= top


def _confirmed(claim: Claim, corrections: Sequence[Claim]) -> bool:
    return any(
        c.value_key == claim.value_key
        and c.valid_from <= claim.valid_from
        and (c.valid_to is None or claim.valid_from < c.valid_to)
        for c in corrections
    )


def _resolve_one(claims: Sequence[Claim], policy: Policy, resolution: Resolution) -> None:
    """Cardinality ``one``: write rule steps 2, 4, 5, 6 via ``end(a)``.

    ``end(a)`` is the earliest of ``a.valid_to``, ``a.valid_from + ttl`` and the
    ``valid_from`` of any claim with a different value, a rank at least
    ``a``'s and a later start. At each valid time the highest rank wins; equal
    values corroborate; two values at the top rank tie.
    """
    claims = sorted(claims, key=lambda c: c.order_key)
    for a in claims:
        end = _natural_end(a, policy)
        closer = None
        rank_a = policy.rank(a.source_kind)
        for b in claims:  # sorted by valid_from: the first qualifying b is the earliest
            if b.valid_from > a.valid_from and b.value_key != a.value_key and policy.rank(b.source_kind) >= rank_a:
                if end is None or b.valid_from < end:
                    end, closer = b.valid_from, b
                break
        resolution.end[a.id] = end
        if closer is not None:
            resolution.superseded_by[a.id] = closer.id
    points = sorted({c.valid_from for c in claims} | {e for e in resolution.end.values() if e is not None})
    pieces: list[Segment] = []
    running_tie = None  # (stop, rule, tied values) of the piece just before, when it was a tie
    # A sweep over the points: claims join when they start and leave when
    # they end, so each piece costs the claims holding there, not all claims.
    active: dict[int, Claim] = {}  # index in ``claims`` (their order) -> claim
    ending: list[tuple[datetime, int]] = []  # heap of (end, index)
    joined = 0
    for i, start in enumerate(points):
        stop = points[i + 1] if i + 1 < len(points) else None
        while joined < len(claims) and claims[joined].valid_from <= start:
            active[joined] = claims[joined]
            if resolution.end[claims[joined].id] is not None:
                heapq.heappush(ending, (resolution.end[claims[joined].id], joined))
            joined += 1
        while ending and ending[0][0] <= start:
            active.pop(heapq.heappop(ending)[1], None)
        holding = [active[n] for n in sorted(active)]
        if not holding:
            running_tie = None
            continue
        piece, tie = _decide(start, stop, holding, policy)
        pieces.append(piece)
        # One tie is recorded once, at the start of the stretch over which
        # the same values stay tied, however many pieces other claims cut it
        # into (a second record would open a second conflict for one tie).
        # Its claims are every claim tied anywhere on the stretch, as the
        # merged conflict segment's candidates are.
        values = frozenset(c.value_key for c in tie[2]) if tie else None
        if tie and running_tie == (start, tie[1], values):
            first, rule, tied = resolution.ties[-1]
            resolution.ties[-1] = (first, rule, _distinct(tied + tie[2]))
        elif tie:
            resolution.ties.append(tie)
        running_tie = (stop, tie[1], values) if tie else None
    resolution.segments = _merge(pieces, policy, resolution)
    winners = {s.id for seg in resolution.segments if seg.status == SEGMENT_VALUE for s in seg.sources}
    in_conflict = {c.id for seg in resolution.segments if seg.status == SEGMENT_CONFLICT for c in seg.candidates}
    for c in claims:
        if c.id in winners:
            resolution.fate[c.id] = FATE_WINNING
        elif c.id in in_conflict:
            resolution.fate[c.id] = FATE_CONFLICT
        else:
            resolution.fate[c.id] = FATE_OVERRULED


def _decide(start: datetime, stop: datetime | None, holding: list[Claim],
            policy: Policy) -> tuple[Segment, tuple[datetime, str, tuple[Claim, ...]] | None]:
    """The answer over one piece ``[start, stop)`` where ``holding`` hold,
    and the tie ``(start, rule, tied claims)`` that decided it, if any."""
    top = max(policy.rank(c.source_kind) for c in holding)
    leaders = [c for c in holding if policy.rank(c.source_kind) == top]
    values = {c.value_key for c in leaders}
    tie = None
    if len(values) == 1:
        value_key = leaders[0].value_key
        rule = _precedence_rule(holding, value_key, policy)
    else:
        value_key, rule = _break_tie(leaders, holding, policy)
        tie = (start, rule, tuple(sorted(leaders, key=lambda c: c.order_key)))
        if rule == RULE_TIE_CONFLICT:
            return Segment(start, stop, SEGMENT_CONFLICT, "", None, None, (), tie[2], rule), tie
    sources = _rank_sorted((c for c in holding if c.value_key == value_key), policy)
    return Segment(start, stop, SEGMENT_VALUE, value_key, sources[0].value, sources[0], tuple(sources), (), rule), tie


def _precedence_rule(holding: list[Claim], value_key: str, policy: Policy) -> str:
    losers = [c for c in holding if c.value_key != value_key]
    if not losers:
        return RULE_CORROBORATION if len(holding) > 1 else RULE_NO_OVERLAP
    winner_kinds = {c.source_kind for c in holding if c.value_key == value_key}
    if policy.authority == AUTHORITY_SYSTEM_RECORD and "system_record" in winner_kinds:
        return RULE_SYSTEM_OF_RECORD
    return RULE_SOURCE_RANK


def _break_tie(leaders: list[Claim], holding: list[Claim], policy: Policy) -> tuple[str, str]:
    """Write rule step 6. A live correction among the holding claims that
    names one of the tied values settles the tie (a human answered). Else low
    stakes: the later ``stated_at`` wins, then the content hash; high stakes:
    an open conflict."""
    tied_values = {c.value_key for c in leaders}
    confirmed = sorted(
        (c for c in holding if c.source_kind == "correction" and c.value_key in tied_values),
        key=lambda c: (-c.valid_from.timestamp(), -c.stated_at.timestamp(), c.content_hash),
    )
    if confirmed:
        return confirmed[0].value_key, RULE_TIE_CONFIRMED
    if policy.stakes == STAKES_HIGH:
        return "", RULE_TIE_CONFLICT
    latest = max(c.stated_at for c in leaders)
    newest = [c for c in leaders if c.stated_at == latest]
    if len({c.value_key for c in newest}) == 1:
        return newest[0].value_key, RULE_TIE_STATED_AT
    return min(newest, key=lambda c: c.content_hash).value_key, RULE_TIE_CONTENT_HASH


def _merge(pieces: list[Segment], policy: Policy, resolution: Resolution) -> list[Segment]:
    """Join adjacent pieces with the same answer: the reported bounds are the
    longest interval over which the answer stays the same value."""
    merged: list[Segment] = []
    for piece in pieces:
        prev = merged[-1] if merged else None
        if prev is not None and prev.valid_to == piece.valid_from and _same_answer(prev, piece):
            sources = _rank_sorted({c.id: c for c in prev.sources + piece.sources}.values(), policy)
            candidates = _distinct(prev.candidates + piece.candidates)
            merged[-1] = Segment(
                prev.valid_from, piece.valid_to, prev.status, prev.value_key,
                sources[0].value if sources else None, sources[0] if sources else None,
                tuple(sources), candidates, _stronger_rule(prev.rule, piece.rule),
            )
        else:
            merged.append(piece)
    closings = _closings(resolution)
    return [_with_supersession_rule(s, closings) for s in merged]


def _same_answer(a: Segment, b: Segment) -> bool:
    if a.status != b.status:
        return False
    if a.status == SEGMENT_VALUE:
        return a.value_key == b.value_key
    return {c.value_key for c in a.candidates} == {c.value_key for c in b.candidates}


_RULE_STRENGTH = [
    RULE_NO_OVERLAP, RULE_CORROBORATION, RULE_VALID_TIME, RULE_SOURCE_RANK, RULE_SYSTEM_OF_RECORD,
    RULE_TIE_STATED_AT, RULE_TIE_CONTENT_HASH, RULE_TIE_CONFIRMED, RULE_TIE_CONFLICT,
]


def _stronger_rule(a: str, b: str) -> str:
    return max(a, b, key=_RULE_STRENGTH.index)


def _closings(resolution: Resolution) -> set[tuple[Any, datetime]]:
    """``(closer id, where it closed a claim)`` of every supersession."""
    return {(closer, resolution.end.get(closed)) for closed, closer in resolution.superseded_by.items()}


def _with_supersession_rule(segment: Segment, closings: set[tuple[Any, datetime]]) -> Segment:
    """A value segment that starts where it closed an earlier claim was
    decided by valid-time supersession (write rule step 5)."""
    if segment.status != SEGMENT_VALUE or segment.rule not in (RULE_NO_OVERLAP, RULE_CORROBORATION):
        return segment
    if any((c.id, segment.valid_from) in closings for c in segment.sources):
        return Segment(segment.valid_from, segment.valid_to, segment.status, segment.value_key, segment.value,
                       segment.winner, segment.sources, segment.candidates, RULE_VALID_TIME)
    return segment


def timeline_digest(segments: Iterable[Segment], *, with_ids: bool = False) -> str:
    """SHA-256 of a timeline's content: bounds, status, value, rule, sources.

    With ``with_ids`` false only content enters (source kind and id, content
    hash), so two stores fed the same assertions in any order agree; with it
    true the assertion ids enter too (used by reconciliation within one store).
    """
    rows = []
    for s in segments:
        members = s.sources if s.status == SEGMENT_VALUE else s.candidates
        rows.append([
            s.valid_from.isoformat(), s.valid_to.isoformat() if s.valid_to else None, s.status, s.value_key, s.rule,
            sorted([m.source_kind, m.source_id, m.content_hash] + ([str(m.id)] if with_ids else []) for m in members),
        ])
    rows.sort(key=lambda r: json.dumps(r, sort_keys=True))
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()
