"""Dashboard reads: the memory list with search, filters and pagination, a
memory's history, time travel with a diff against today, the activity feed.

Built on ``facts/queries.py``; every query is scoped by the signed-in
person's tenant and subject, so another person's id is simply not found
(:class:`~facts.errors.NotFound`). The memory list runs a fixed number of
queries whatever the number of memories: one count and one page of
projection rows (sources and evidence travel inside the row).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Case, Count, IntegerField, Q, QuerySet, Value, When
from django.utils import timezone

from dashboard.words import badge, decided_by, decision_text, entity_label, predicate_label, short, value_text
from facts import queries as facts_queries
from facts.errors import NotFound
from facts.models import Assertion, CurrentFact, Event, Subject
from facts.policy import PolicyCache
from facts.resolve import normalise_value

PAGE_SIZE = 50
SHOWN_STATUSES = ("value", "conflict", "proposed")


@dataclass(frozen=True)
class MemoryFilters:
    """What the person typed or picked above the list. ``kind`` is a source
    kind, ``entity`` an entity name, ``pending`` keeps what waits for them."""

    q: str = ""
    kind: str = ""
    entity: str = ""
    pending: bool = False

    @property
    def active(self) -> bool:
        return bool(self.q or self.kind or self.entity or self.pending)


@dataclass
class Memory:
    """One row of the list, ready for the template."""

    row: CurrentFact
    value: str
    badge: dict
    evidence: str
    others: list[dict]
    link_id: Any
    candidates: list[dict]
    decision: str | None = None  # what a person or support decided, shown instead of the evidence

    @property
    def status(self) -> str:
        return self.row.status


def memory_queryset(*, subject: Subject, filters: MemoryFilters, now: datetime) -> QuerySet[CurrentFact]:
    """Projection rows the person sees now: values and open conflicts that
    hold at ``now``, and proposals waiting for confirmation (any valid time).
    Ordered: things about the person first, then by entity, predicate and
    most recent valid time."""
    holds_now = Q(status__in=("value", "conflict"), valid_from__lte=now) & (Q(valid_to__isnull=True) | Q(valid_to__gt=now))
    qs = CurrentFact.objects.filter(tenant_id=subject.tenant_id, subject=subject).filter(holds_now | Q(status="proposed"))
    if filters.pending:
        qs = qs.filter(status__in=("conflict", "proposed"))
    if filters.kind:
        qs = qs.filter(source__kind=filters.kind)
    if filters.entity:
        qs = qs.filter(entity=filters.entity)
    if filters.q:
        needle = " ".join(filters.q.split()).casefold()
        qs = qs.filter(Q(value_key__icontains=needle) | Q(source__evidence__icontains=filters.q.strip())
                       | Q(predicate__icontains=needle.replace(" ", "_")) | Q(entity__icontains=needle)
                       | Q(candidates__icontains=filters.q.strip()))
    return qs.annotate(
        about_self=Case(When(entity="self", then=Value(0)), default=Value(1), output_field=IntegerField())
    ).order_by("about_self", "entity", "predicate", "-valid_from", "value_key", "id")


def _memory(row: CurrentFact) -> Memory:
    if row.status == "conflict":
        candidates = [{"value": value_text(c["value"]), "badge": badge(c["source"]),
                       "evidence": c["source"].get("evidence", "")} for c in row.candidates]
        link = row.candidates[0]["assertion_id"] if row.candidates else None
        return Memory(row, " or ".join(c["value"] for c in candidates), {"css": "conflict", "text": "undecided"},
                      "", [], link, candidates)
    sources = row.sources or [row.source]
    return Memory(row, value_text(row.value), badge(row.source), row.source.get("evidence", ""),
                  [{**s, "badge": badge(s)} for s in sources[1:]], row.assertion_id, [],
                  decision=decision_text(row.source, row.value))


def memory_page(*, subject: Subject, filters: MemoryFilters, page: int | str | None = 1,
                page_size: int = PAGE_SIZE, now: datetime | None = None) -> tuple[Page, list[dict]]:
    """One page of the memory list and its grouping: ``(page, groups)`` where
    ``groups`` is ``[{"entity", "label", "predicates": [{"predicate",
    "label", "memories": [Memory]}]}]`` in list order. Two queries."""
    now = now or timezone.now()
    paginator = Paginator(memory_queryset(subject=subject, filters=filters, now=now), page_size)
    current = paginator.get_page(page)
    groups: list[dict] = []
    for row in current.object_list:
        if not groups or groups[-1]["entity"] != row.entity:
            groups.append({"entity": row.entity, "label": entity_label(row.entity), "predicates": []})
        predicates = groups[-1]["predicates"]
        if not predicates or predicates[-1]["predicate"] != row.predicate:
            predicates.append({"predicate": row.predicate, "label": predicate_label(row.predicate, row.entity),
                               "memories": []})
        predicates[-1]["memories"].append(_memory(row))
    return current, groups


ENTITY_CHOICES = 40


def entity_choices(*, subject: Subject, selected: str = "", limit: int = ENTITY_CHOICES) -> list[tuple[str, str]]:
    """``(entity, label)`` for the entity filter: the person first, then the
    ``limit`` entities with most memories (alphabetically), plus the one
    currently ``selected``. A person with thousands of entities gets a
    short menu, and search finds the rest. One query."""
    top = (CurrentFact.objects.filter(tenant_id=subject.tenant_id, subject=subject)
           .values("entity").annotate(n=Count("id")).order_by("-n", "entity")[:limit])
    names = {row["entity"] for row in top} | ({selected} if selected else set())
    names = sorted(names, key=lambda e: (e != "self", e.casefold()))
    return [(e, "You" if e == "self" else e) for e in names]


# --------------------------------------------------------------------------- one memory


@dataclass
class MemoryHistory:
    """A memory (one value of a key, or a single-valued key's chain of
    values) with its versions, oldest first."""

    assertion: Assertion
    entity: str
    predicate: str
    scope: str
    single_valued: bool
    versions: list[dict]
    this_version: dict | None

    @property
    def erased(self) -> bool:
        return self.assertion.erased_at is not None

    @property
    def live_ids(self) -> list[str]:
        """Sources of this memory's version that can still be retracted."""
        if self.this_version is None:
            return []
        return [s["assertion_id"] for s in self.this_version["sources"]
                if not s.get("retracted_at") and not s.get("erased_at")]

    @property
    def is_current(self) -> bool:
        return bool(self.this_version) and self.this_version["status"] in ("current", "proposed", "conflict")


def owned_assertion(*, subject: Subject, assertion_id: Any) -> Assertion:
    """The subject's assertion with this id (and its key). Raises
    :class:`NotFound` for an id of anyone else, in any tenant."""
    found = (Assertion.objects.select_related("fact_key")
             .filter(tenant_id=subject.tenant_id, subject=subject, id=assertion_id).first())
    if found is None:
        raise NotFound("no such memory")
    return found


def memory_history(*, subject: Subject, assertion_id: Any, now: datetime | None = None) -> MemoryHistory:
    """History of the memory an assertion belongs to (API.md "history").

    For a single-valued predicate that is the whole key: the chain of values
    that replaced each other. For a multi-valued one (``note``, languages)
    it is the versions of this one value, since the key holds many
    unrelated memories. Raises :class:`NotFound`."""
    now = now or timezone.now()
    assertion = owned_assertion(subject=subject, assertion_id=assertion_id)
    key = assertion.fact_key
    single = PolicyCache(tenant_id=subject.tenant_id, at=now).get(key.predicate).cardinality == "one"
    versions = facts_queries.key_versions(key=key, now=now)
    mine = str(assertion.id)
    this = next((v for v in versions if any(s["assertion_id"] == mine for s in v["sources"])), None)
    if not single:
        if assertion.erased_at is not None:
            versions = [this] if this else []
        else:
            versions = [v for v in versions if v["status"] != "erased"
                        and normalise_value(v["value"]) == assertion.value_key]
    return MemoryHistory(assertion, key.entity, key.predicate, key.scope, single, versions, this)


def memory_events(*, history: MemoryHistory) -> list[dict]:
    """The event log of a memory in the order it was recorded (transaction
    time, then log order): for a single-valued predicate the whole key's,
    else the events of this value's assertions. Each ``{"type", "at",
    "rule", "actor", "assertion_id", "before", "after", "data"}`` (``at``
    aware UTC, ids as text), as :func:`dashboard.words.history_sentences`
    tells them. One query, whatever the number of events."""
    key = history.assertion.fact_key
    qs = Event.objects.filter(tenant_id=key.tenant_id, subject_id=key.subject_id, fact_key_id=key.id)
    if not history.single_valued:
        qs = qs.filter(assertion_id__in=[s["assertion_id"] for v in history.versions for s in v["sources"]])
    rows = qs.order_by("at", "id").values("type", "at", "rule", "actor", "assertion_id", "before", "after", "data")
    return [{**row, "assertion_id": str(row["assertion_id"]) if row["assertion_id"] else None} for row in rows]


def same_value_ids(*, subject: Subject, assertion: Assertion) -> list[str]:
    """Every unerased assertion of the subject holding the same value on the
    same key (what "forget this" destroys, so the value is nowhere)."""
    if assertion.erased_at is not None:
        return []
    return [str(i) for i in Assertion.objects.filter(
        tenant_id=subject.tenant_id, subject=subject, fact_key_id=assertion.fact_key_id,
        value_key=assertion.value_key, erased_at__isnull=True).values_list("id", flat=True)]


# --------------------------------------------------------------------------- time travel


SHOWN_DIFF_ROWS = 200


@dataclass(frozen=True)
class DiffRow:
    entity: str
    predicate: str
    label: str
    then: str
    today: str
    change: str  # "same" | "changed" | "new" | "gone"
    link_id: str | None


def _values_by_key(items: list[dict]) -> dict[tuple, list[tuple[str, str | None]]]:
    out: dict[tuple, list[tuple[str, str | None]]] = defaultdict(list)
    for item in items:
        ident = (item["entity"], item["predicate"], item["scope"])
        if item["status"] == "conflict":
            text = "undecided: " + " or ".join(value_text(c["value"]) for c in item["candidates"])
            link = item["candidates"][0]["assertion_id"] if item["candidates"] else None
        else:
            text, link = value_text(item["value"]), item["assertion_id"]
        out[ident].append((text, link))
    return out


def _current_items(*, subject: Subject, valid_at: datetime) -> list[dict]:
    """The current view at ``valid_at`` as known now, reduced to what the
    diff needs (the projection rows' identity, value and candidates; not
    their sources), so a subject with thousands of keys reads fast."""
    rows = facts_queries.current_rows(subject=subject, valid_at=valid_at).values(
        "entity", "predicate", "scope_kind", "scope_key", "status", "value", "assertion_id", "candidates")
    return [{"entity": r["entity"], "predicate": r["predicate"],
             "scope": r["scope_kind"] if r["scope_kind"] == "global" else f"{r['scope_kind']}:{r['scope_key']}",
             "status": r["status"], "value": r["value"],
             "assertion_id": str(r["assertion_id"]) if r["assertion_id"] else None, "candidates": r["candidates"]}
            for r in rows]


def time_travel(*, subject: Subject, believed_on: datetime, about: datetime, now: datetime | None = None) -> dict:
    """What the assistant believed at transaction time ``believed_on`` about
    valid time ``about`` (exact as-of: ``facts_at`` with ``known_at``),
    beside what it believes today about that same ``about`` (valid time
    ``about``, transaction time now), as a diff: a row differs only where
    what was learned, retracted or erased since ``believed_on`` changed the
    answer, so ``believed_on`` = now gives "the same" for every row
    (README.md, "Dashboard").

    Returns ``{"then": [...], "today": [...], "rows": [DiffRow], "counts":
    {"same", "changed", "new", "gone"}, "differences", "same_rows",
    "more_differences", "more_same"}``: items are API.md fact items; the
    page shows the first 200 differences and unchanged rows and says how
    many more there are.
    A single-valued key is one row (same/changed/new/gone); a multi-valued
    key gives one row per value (same/new/gone)."""
    now = now or timezone.now()
    today = _current_items(subject=subject, valid_at=about)
    then = today if believed_on >= now else facts_queries.facts_at(
        tenant=subject.tenant, external_id=subject.external_id, valid_at=about, known_at=believed_on)["facts"]
    before, after = _values_by_key(then), _values_by_key(today)
    rows: list[DiffRow] = []
    for ident in sorted(before.keys() | after.keys(), key=lambda k: (k[0] != "self", k[0], k[1], k[2])):
        old, new = before.get(ident, []), after.get(ident, [])
        label = predicate_label(ident[1]) if ident[0] == "self" else f"{ident[0]}: {predicate_label(ident[1], ident[0]).lower()}"
        if len(old) <= 1 and len(new) <= 1:
            o_text, o_link = old[0] if old else ("", None)
            n_text, n_link = new[0] if new else ("", None)
            change = ("new" if not old else "gone" if not new
                      else "same" if normalise_value(o_text) == normalise_value(n_text) else "changed")
            rows.append(DiffRow(ident[0], ident[1], label, o_text, n_text, change, n_link or o_link))
            continue
        old_map = {normalise_value(t): (t, l) for t, l in old}
        new_map = {normalise_value(t): (t, l) for t, l in new}
        for norm in sorted(old_map.keys() | new_map.keys()):
            o = old_map.get(norm)
            n = new_map.get(norm)
            change = "same" if o and n else "gone" if o else "new"
            rows.append(DiffRow(ident[0], ident[1], label, o[0] if o else "", n[0] if n else "", change,
                                (n or o)[1]))
    counts = {k: sum(1 for r in rows if r.change == k) for k in ("same", "changed", "new", "gone")}
    differences = [r for r in rows if r.change != "same"]
    same = [r for r in rows if r.change == "same"]
    return {"then": then, "today": today, "rows": rows, "counts": counts,
            "differences": differences[:SHOWN_DIFF_ROWS], "more_differences": max(0, len(differences) - SHOWN_DIFF_ROWS),
            "same_rows": same[:SHOWN_DIFF_ROWS], "more_same": max(0, len(same) - SHOWN_DIFF_ROWS)}


# --------------------------------------------------------------------------- activity


ACTIVITY_TYPES = ("fact.asserted", "fact.superseded", "fact.retracted", "fact.erased", "conflict.opened",
                  "conflict.resolved", "subject.erased", "login_link.used", "clarification.requested",
                  "clarification.answered", "prompt.opened", "prompt.answered", "prompt.expired")


@dataclass(frozen=True)
class Activity:
    at: datetime
    kind: str
    text: str
    link_id: str | None
    event_id: int


def _what(fact: dict | None) -> str:
    """“Munich” (where you live) / “Globex” (Marc: employer) / “Paints…”."""
    if fact is None or fact["erased_at"] is not None:
        return "a memory"
    text = f"“{short(value_text(fact['value']), 48)}”"
    entity, predicate = fact["fact_key__entity"], fact["fact_key__predicate"]
    if entity != "self":
        return f"{text} ({entity}: {predicate_label(predicate, entity).lower()})"
    return text if predicate == "note" else f"{text} ({predicate_label(predicate).lower()})"


def _activity_text(event: Event, facts: dict) -> tuple[str, str, str | None]:
    """``(kind, sentence, memory link)`` for one event. Erased memories are
    never named, nor linked."""
    fact = facts.get(event.assertion_id)
    erased = fact is not None and fact["erased_at"] is not None
    what = _what(fact)
    link = str(event.assertion_id) if fact is not None and not erased else None
    outcome = (event.data or {}).get("outcome", "")
    if event.type == "fact.asserted":
        if erased or fact is None:
            return "learned", "Learned something that has since been forgotten.", None
        source = {"kind": fact["source_kind"], "id": fact["source_id"], "extractor": fact["extractor"]}
        how = badge(source)["text"]
        if outcome == "proposed":
            return "asked", f"Learned {what}, {how}; it waits for your confirmation.", link
        if outcome == "conflict":
            return "asked", f"Learned {what}, {how}, which disagrees with what I knew.", link
        if outcome == "corroborated":
            return "learned", f"Heard {what} again, {how}.", link
        if outcome == "overruled":
            return "learned", f"Heard {what}, {how}, but kept a more reliable answer.", link
        if who := decided_by(source):
            return "changed", f"{who.capitalize()} confirmed this: {what}.", link
        if fact["source_kind"] == "correction":
            return "changed", f"You corrected this: {what}.", link
        return "learned", f"Learned {what}, {how}.", link
    if event.type == "fact.superseded":
        new = facts.get(_uuid(event.after[0])) if event.after else None
        if new is not None and new["erased_at"] is None and fact is not None and not erased:
            return "changed", f"“{short(value_text(new['value']), 40)}” replaced {what}.", link
        return "changed", "A memory was replaced by a newer answer.", link
    if event.type == "fact.retracted":
        return "changed", f"{what[0].upper()}{what[1:]} was marked as never true.", link
    if event.type == "fact.erased":
        return "forgotten", "A memory was forgotten. Nothing of it is kept.", None
    if event.type == "conflict.opened":
        return "asked", "Two sources disagreed about something important; I asked you.", None
    if event.type == "conflict.resolved":
        return "changed", "A disagreement was settled.", None
    if event.type == "subject.erased":
        return "forgotten", "Everything about you was forgotten.", None
    if event.type == "login_link.used":
        return "signin", "You signed in with a link from your assistant.", None
    if event.type in ("clarification.requested", "prompt.opened"):
        return "asked", "I asked you a question.", None
    if event.type in ("clarification.answered", "prompt.answered"):
        return "changed", "Your answer to a question was recorded.", None
    return "other", "A question expired without an answer; I kept the earlier value.", None


def _uuid(text: str):
    import uuid

    try:
        return uuid.UUID(str(text))
    except ValueError:
        return None


def activity(*, subject: Subject, limit: int = 50, before_id: int | None = None) -> tuple[list[Activity], int | None]:
    """The subject's recent activity, newest first, in words:
    ``(items, next_before_id)``. Two queries: the events, and the values of
    the assertions they name (erased ones stay nameless)."""
    qs = Event.objects.filter(tenant_id=subject.tenant_id, subject=subject, type__in=ACTIVITY_TYPES)
    if before_id is not None:
        qs = qs.filter(id__lt=before_id)
    events = list(qs.order_by("-id")[: limit + 1])
    more = len(events) > limit
    events = events[:limit]
    ids = {e.assertion_id for e in events if e.assertion_id} | {
        u for e in events if e.type == "fact.superseded" for u in map(_uuid, e.after[:1]) if u}
    facts = {r["id"]: r for r in Assertion.objects.filter(tenant_id=subject.tenant_id, subject=subject, id__in=ids)
             .values("id", "value", "source_kind", "source_id", "extractor", "erased_at", "fact_key__entity",
                     "fact_key__predicate")}
    items: list[Activity] = []
    for e in events:
        kind, text, link = _activity_text(e, facts)
        if items and items[-1].text == text and items[-1].link_id == link and items[-1].at - e.at < timedelta(minutes=1):
            continue  # one action that touched several records reads as one line
        items.append(Activity(e.at, kind, text, link, e.id))
    return items, (events[-1].id if more else None)


def export(*, subject: Subject) -> dict:
    """Everything held about the person (API.md ``export``), plus their
    pending questions when the conflicts app is installed."""
    from dashboard import prompts

    body = facts_queries.export(tenant=subject.tenant, external_id=subject.external_id)
    body["questions"] = prompts.export_prompts(subject=subject)
    return body
