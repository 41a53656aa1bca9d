"""Business logic of the support console (issue 5). Reads and writes for
the views, each scoped by the staff member's tenant: an id that belongs to
another tenant is simply not found (:class:`~facts.errors.NotFound`).

Every change to memory goes through the ledger (``facts.ledger``) or the
conflicts actions (``conflicts.actions``, ``conflicts.outbox``); nothing
here edits an assertion, an event or the projection.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from conflicts import queries as conflict_queries
from conflicts.models import ClarificationPrompt, Delivery, ReviewTask, WebhookEndpoint
from conflicts.scheduling import enqueue_on_commit
from console.models import Revocation
from facts import ledger
from facts.claims import live_claims_by_key
from facts.errors import NotFound, StateConflict
from facts.inputs import InputError
from facts.models import ApiKey, Assertion, Event, FactKey, Subject, Tenant, WebhookSecret
from facts.policy import PolicyCache, policy_views_at, ranking_at
from facts.queries import facts_at, get_subject
from facts.resolve import SEGMENT_VALUE, resolve
from facts.tenants import create_api_key, rotate_webhook_secret

SAMPLE_SIZE = 10
CHANGES_SHOWN = 50


def staff_actor(username: str) -> str:
    """The actor recorded in the ledger for a staff action (``staff:<username>``)."""
    return f"staff:{username}"


# --------------------------------------------------------------------------- subjects


def search_subjects(*, tenant: Tenant, q: str, limit: int = 50) -> list[Subject]:
    """Subjects of ``tenant`` whose external id or name contains ``q``, or
    who currently hold a value containing ``q`` (case-insensitive). Empty
    ``q``: the most recently created subjects."""
    qs = Subject.objects.filter(tenant=tenant, erased_at__isnull=True)
    q = q.strip()
    if q:
        holders = FactKey.objects.filter(tenant=tenant, current_facts__value_key__icontains=q).values("subject_id")
        qs = qs.filter(Q(external_id__icontains=q) | Q(display_name__icontains=q) | Q(pk__in=holders))
    return list(qs.annotate(keys=Count("fact_keys", distinct=True)).order_by("-created_at", "pk")[:limit])


@dataclass
class SubjectFile:
    """Everything the console shows about one person."""

    subject: Subject
    facts: list[dict]
    prompts: list[ClarificationPrompt]
    tasks: list[ReviewTask]
    events: list[dict]
    deliveries: list[Delivery]


def subject_file(*, tenant: Tenant, external_id: str, events_limit: int = 200) -> SubjectFile:
    """What the person sees (current facts, pending questions), plus the raw
    event log with actor, rule and the source of each assertion, and the
    outgoing deliveries about them. Raises :class:`NotFound`."""
    subject = get_subject(tenant=tenant, external_id=external_id)
    facts = facts_at(tenant=tenant, external_id=external_id)["facts"] if subject.erased_at is None else []
    events = list(Event.objects.filter(tenant=tenant, subject=subject).select_related("fact_key")
                  .order_by("-at", "-id")[:events_limit])
    sources = {a["id"]: a for a in Assertion.objects.filter(tenant=tenant, id__in=[e.assertion_id for e in events if e.assertion_id])
               .values("id", "source_kind", "source_id", "extractor")}
    rows = [{"event": e, "source": sources.get(e.assertion_id), "key": e.fact_key} for e in events]
    prompts = list(ClarificationPrompt.objects.filter(tenant=tenant, subject=subject)
                   .select_related("fact_key").order_by("-created_at")[:20])
    tasks = list(ReviewTask.objects.filter(tenant=tenant, subject=subject).order_by("-created_at")[:20])
    deliveries = list(Delivery.objects.filter(tenant=tenant, message__subject=subject)
                      .select_related("message", "endpoint").order_by("-created_at")[:50])
    return SubjectFile(subject, facts, prompts, tasks, rows, deliveries)


# --------------------------------------------------------------------------- review queue


def get_task(*, tenant: Tenant, task_id: uuid.UUID) -> ReviewTask:
    """One review task of ``tenant``. Raises :class:`NotFound`."""
    task = (ReviewTask.objects.filter(tenant=tenant, pk=task_id)
            .select_related("subject", "fact_key", "prompt").first())
    if task is None:
        raise NotFound("no such review task")
    return task


def task_evidence(*, task: ReviewTask) -> list[Assertion]:
    """The assertions the task is about, oldest statement first, for a
    side-by-side view (scoped by the task's tenant)."""
    ids = [i for i in task.assertion_ids if i]
    return list(Assertion.objects.filter(tenant_id=task.tenant_id, id__in=ids).order_by("stated_at", "id"))


def task_candidates(*, task: ReviewTask) -> list[dict]:
    """The options staff can choose among for an escalated conflict."""
    if task.prompt is None:
        return []
    return [o for o in task.prompt.options if o.get("kind") == "candidate"]


# --------------------------------------------------------------------------- bulk revocation


@dataclass(frozen=True)
class Selection:
    """What a bulk revocation selects: live (not retracted, not erased)
    assertions matching every given criterion. Times are UTC; the window is
    ``[recorded_from, recorded_to)``."""

    extractor: str = ""
    source_kind: str = ""
    source_id_prefix: str = ""
    recorded_from: datetime | None = None
    recorded_to: datetime | None = None

    def as_json(self) -> dict:
        return {"extractor": self.extractor, "source_kind": self.source_kind,
                "source_id_prefix": self.source_id_prefix,
                "recorded_from": self.recorded_from.isoformat() if self.recorded_from else None,
                "recorded_to": self.recorded_to.isoformat() if self.recorded_to else None}


def selected(*, tenant: Tenant, selection: Selection) -> QuerySet[Assertion]:
    """The tenant's live assertions matching ``selection``."""
    qs = Assertion.objects.filter(tenant=tenant, retracted_at__isnull=True, erased_at__isnull=True)
    if selection.extractor:
        qs = qs.filter(extractor=selection.extractor)
    if selection.source_kind:
        qs = qs.filter(source_kind=selection.source_kind)
    if selection.source_id_prefix:
        qs = qs.filter(source_id__startswith=selection.source_id_prefix)
    if selection.recorded_from:
        qs = qs.filter(recorded_at__gte=selection.recorded_from)
    if selection.recorded_to:
        qs = qs.filter(recorded_at__lt=selection.recorded_to)
    return qs


@dataclass
class Change:
    """One current answer a revocation would change."""

    subject: str
    entity: str
    predicate: str
    scope: str
    before: list[str]
    after: list[str]


@dataclass
class Preview:
    count: int
    keys: int
    sample: list[Assertion]
    changes: list[Change] = field(default_factory=list)
    changes_total: int = 0


def _answer_now(resolution, now: datetime) -> list[str]:
    """The current answer of a key in words: values, or a conflict."""
    out = []
    for segment in resolution.at(now):
        if segment.status == SEGMENT_VALUE:
            out.append(_text(segment.value))
        else:
            out.append("conflict: " + " / ".join(sorted(_text(c.value) for c in segment.candidates)))
    return sorted(out)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def preview_revocation(*, tenant: Tenant, selection: Selection, now: datetime | None = None) -> Preview:
    """Count, a sample, and which current answers would change if the
    selection were retracted: each affected key resolved now with and
    without the selected assertions (DESIGN.md, "The resolution
    function"). Reads only."""
    now = now or timezone.now()
    rows = list(selected(tenant=tenant, selection=selection).values_list("id", "fact_key_id"))
    ids = {r[0] for r in rows}
    key_ids = {r[1] for r in rows}
    sample = list(selected(tenant=tenant, selection=selection).select_related("subject", "fact_key")
                  .order_by("-recorded_at", "id")[:SAMPLE_SIZE])
    preview = Preview(count=len(ids), keys=len(key_ids), sample=sample)
    if not ids:
        return preview
    claims = live_claims_by_key(Assertion.objects.filter(tenant=tenant, fact_key_id__in=key_ids), known_at=now)
    keys = FactKey.objects.filter(tenant=tenant, pk__in=key_ids).select_related("subject").order_by("subject__external_id", "predicate", "pk")
    policies = PolicyCache(tenant_id=tenant.id, at=now)
    policies.prefetch({k.predicate for k in keys})
    for key in keys:
        policy = policies.get(key.predicate)
        key_claims = claims.get(key.id, [])
        before = _answer_now(resolve(key_claims, policy), now)
        after = _answer_now(resolve([c for c in key_claims if c.id not in ids], policy), now)
        if before != after:
            preview.changes_total += 1
            if len(preview.changes) < CHANGES_SHOWN:
                preview.changes.append(Change(key.subject.external_id, key.entity, key.predicate, key.scope, before, after))
    return preview


def revoke(*, tenant: Tenant, selection: Selection, reason: str, actor: str, expected: int | None = None) -> Revocation:
    """Retract every selected assertion through the ledger under one batch
    id (DESIGN.md, "revocation"). ``expected``: the count the preview
    showed; if the selection now matches a different number, raises
    :class:`StateConflict` and writes nothing. Raises :class:`InputError`
    when nothing matches."""
    with transaction.atomic():
        rows = list(selected(tenant=tenant, selection=selection).values_list("id", "fact_key_id"))
        ids = [str(i) for i, _ in rows]
        if not ids:
            raise InputError("nothing matches this selection", "selection")
        if expected is not None and expected != len(ids):
            raise StateConflict("the selection changed since the preview", {"count": len(ids), "expected": expected})
        batch = uuid.uuid4()
        keys = len({k for _, k in rows})
        ledger.retract(tenant=tenant, assertion_ids=ids, reason=reason or "bulk revocation", actor=actor, batch_id=batch)
        return Revocation.objects.create(id=batch, tenant=tenant, criteria=selection.as_json(), reason=reason,
                                         count=len(ids), keys=keys, created_by=actor, created_at=timezone.now())


def undo_revocation(*, tenant: Tenant, batch_id: uuid.UUID, actor: str) -> Revocation:
    """Undo a batch through the ledger: its assertions are believed again
    from now (new ``fact.restored`` events; history keeps the retraction
    and the restoration). Raises :class:`NotFound` and
    :class:`StateConflict` (already undone)."""
    with transaction.atomic():
        revocation = Revocation.objects.select_for_update().filter(tenant=tenant, pk=batch_id).first()
        if revocation is None:
            raise NotFound("no such revocation")
        if revocation.undone_at is not None:
            raise StateConflict("this revocation was already undone", {"undone_at": revocation.undone_at.isoformat()})
        restored = ledger.unretract(tenant=tenant, batch_id=batch_id, actor=actor)
        revocation.undone_at, revocation.undone_by, revocation.restored = timezone.now(), actor, restored
        revocation.save(update_fields=["undone_at", "undone_by", "restored"])
        return revocation


def revocations(*, tenant: Tenant) -> list[Revocation]:
    return list(Revocation.objects.filter(tenant=tenant).order_by("-created_at")[:50])


def get_revocation(*, tenant: Tenant, batch_id: uuid.UUID) -> Revocation:
    revocation = Revocation.objects.filter(tenant=tenant, pk=batch_id).first()
    if revocation is None:
        raise NotFound("no such revocation")
    return revocation


def revocation_history(*, tenant: Tenant, batch_id: uuid.UUID, limit: int = 20) -> list[dict]:
    """For a batch: some of its assertions with their retraction and, after
    an undo, the restored copy (both kept)."""
    events = list(Event.objects.filter(tenant=tenant, type="fact.retracted", data__batch_id=str(batch_id))
                  .order_by("id")[:limit])
    ids = [e.assertion_id for e in events]
    restored = {e.before[0]: e for e in Event.objects.filter(tenant=tenant, type="fact.restored",
                                                             before__0__in=[str(i) for i in ids])}
    rows = {a.id: a for a in Assertion.objects.filter(tenant=tenant, id__in=ids).select_related("subject", "fact_key")}
    return [{"assertion": rows.get(e.assertion_id), "retracted": e, "restored": restored.get(str(e.assertion_id))}
            for e in events]


# --------------------------------------------------------------------------- policy


def policies(*, tenant: Tenant) -> list[dict]:
    """Every predicate the tenant uses or registered, or the catalogue
    names, with its policy now, where it came from and how many keys use it."""
    now = timezone.now()
    used = dict(FactKey.objects.filter(tenant=tenant).values("predicate").annotate(n=Count("id"))
                .values_list("predicate", "n"))
    registered = policy_views_at(tenant_id=tenant.id, at=now)
    views = sorted(registered + policy_views_at(tenant_id=tenant.id, at=now,
                                                predicates=set(used) - {v.predicate for v in registered}),
                   key=lambda v: v.predicate)
    return [{"view": v, "keys": used.get(v.predicate, 0)} for v in views]


def set_policy(*, tenant: Tenant, predicate: str, cardinality: str, stakes: str, authority: str,
               ttl_seconds: int | None, actor: str) -> dict:
    """A new policy version through the ledger (re-runs detection); returns its summary."""
    return ledger.set_predicate_policy(tenant=tenant, predicate=predicate, cardinality=cardinality, stakes=stakes,
                                       authority=authority, ttl_seconds=ttl_seconds, actor=actor)


def current_ranking(*, tenant: Tenant) -> tuple[str, ...]:
    return ranking_at(tenant_id=tenant.id, at=timezone.now())


# --------------------------------------------------------------------------- webhooks and keys


def inbound_secrets(*, tenant: Tenant) -> list[WebhookSecret]:
    """The tenant's inbound signing secrets, newest first (values are never shown)."""
    return list(WebhookSecret.objects.filter(tenant=tenant).order_by("-created_at", "-id")[:10])


def rotate_secret(*, tenant: Tenant, overlap_hours: int) -> str:
    """Issue a new inbound secret; the current ones stay valid for
    ``overlap_hours``. Returns the new secret (shown once)."""
    return rotate_webhook_secret(tenant=tenant, overlap=timedelta(hours=overlap_hours))


def deliveries(*, tenant: Tenant, status: str = "", event_type: str = "", endpoint_id: uuid.UUID | None = None,
               limit: int = 100) -> list[Delivery]:
    """The tenant's delivery log, newest first, filtered."""
    qs = Delivery.objects.filter(tenant=tenant).select_related("message", "endpoint", "message__subject")
    if status:
        qs = qs.filter(status=status)
    if event_type:
        qs = qs.filter(message__type=event_type)
    if endpoint_id:
        qs = qs.filter(endpoint_id=endpoint_id)
    return list(qs.order_by("-created_at", "id")[:limit])


def endpoints(*, tenant: Tenant) -> list[WebhookEndpoint]:
    return conflict_queries.endpoints(tenant=tenant)


def replay_delivery(*, tenant: Tenant, delivery_id: uuid.UUID) -> Delivery:
    """Send a failed delivery again: it becomes due now and the outbox's
    ``deliver`` task is enqueued after commit (the sweep picks it up if the
    broker is down). Same message, same ``webhook-id``, so the receiver can
    deduplicate. Raises :class:`NotFound` and :class:`StateConflict` (not
    failed, or its endpoint is not active)."""
    from conflicts import tasks

    with transaction.atomic():
        delivery = (Delivery.objects.select_for_update(of=("self",)).select_related("endpoint")
                    .filter(tenant=tenant, pk=delivery_id).first())
        if delivery is None:
            raise NotFound("no such delivery")
        if delivery.status != Delivery.FAILED:
            raise StateConflict("only a failed delivery can be replayed", {"status": delivery.status})
        if delivery.endpoint.status != WebhookEndpoint.ACTIVE:
            raise StateConflict("the endpoint is not active", {"endpoint_status": delivery.endpoint.status})
        delivery.status, delivery.next_attempt_at = Delivery.PENDING, timezone.now()
        delivery.save(update_fields=["status", "next_attempt_at"])
        enqueue_on_commit(tasks.deliver, kwargs={"delivery_id": str(delivery.id)})
        return delivery


def api_keys(*, tenant: Tenant) -> list[ApiKey]:
    return list(ApiKey.objects.filter(tenant=tenant).order_by("revoked_at", "-created_at"))


def create_key(*, tenant: Tenant, name: str) -> tuple[ApiKey, str]:
    """A new API key; returns the row and the raw key (shown once)."""
    raw = create_api_key(tenant=tenant, name=name)
    return ApiKey.objects.filter(tenant=tenant).order_by("-id").first(), raw


def revoke_key(*, tenant: Tenant, key_id: int) -> ApiKey:
    """Revoke one of the tenant's keys now. Raises :class:`NotFound` and
    :class:`StateConflict` (already revoked)."""
    with transaction.atomic():
        key = ApiKey.objects.select_for_update().filter(tenant=tenant, pk=key_id).first()
        if key is None:
            raise NotFound("no such key")
        if key.revoked_at is not None:
            raise StateConflict("this key is already revoked", {"revoked_at": key.revoked_at.isoformat()})
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        return key
