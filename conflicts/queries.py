"""Reads for prompts, the review queue and webhook endpoints.

Every query is scoped by the owning tenant (or subject, which belongs to one
tenant), so an id of another tenant is simply not found. Reads never import
writes.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Iterable

from django.utils import timezone

from conflicts.models import ClarificationPrompt, Delivery, ReviewTask, WebhookEndpoint
from facts.claims import CLAIM_FIELDS, live_filter, to_claim
from facts.errors import NotFound
from facts.inputs import InputError
from facts.models import Assertion, FactKey, Subject, Tenant
from facts.policy import PolicyCache
from facts.projection import iso
from facts.queries import get_subject
from facts.resolve import Resolution, resolve

# ``?status=`` values of GET /subjects/<subject>/prompts. "pending" means
# waiting for an answer: pending, or escalated to staff and still answerable.
PROMPT_STATUS_FILTERS = {
    "pending": ClarificationPrompt.OPEN_STATUSES,
    "escalated": (ClarificationPrompt.ESCALATED,),
    "answered": (ClarificationPrompt.ANSWERED,),
    "expired": (ClarificationPrompt.EXPIRED,),
    "withdrawn": (ClarificationPrompt.WITHDRAWN,),
    "all": tuple(s for s, _ in ClarificationPrompt.STATUSES),
}
RECENT_DELIVERIES = 20


@dataclass(frozen=True)
class KeyResolution:
    """A fact key resolved now (DESIGN.md, "The resolution function"), with
    the claims it was computed from, by id."""

    key: FactKey
    claims: dict
    resolution: Resolution


def key_resolution(*, fact_key: FactKey, at: datetime | None = None) -> KeyResolution:
    """Resolve ``fact_key`` from its live assertions at ``at`` (default now)
    under the policy in force then. Sees uncommitted rows of the current
    transaction, so subscribers inside a ledger write get the new state."""
    return key_resolutions([fact_key], at=at)[fact_key.id]


def key_resolutions(fact_keys: Iterable[FactKey], *, at: datetime | None = None) -> dict[int, KeyResolution]:
    """:func:`key_resolution` of several keys of one tenant, by key id: one
    query for their claims and one for the policies."""
    keys = {k.id: k for k in fact_keys}
    if not keys:
        return {}
    at = at or timezone.now()
    tenants = {k.tenant_id for k in keys.values()}
    if len(tenants) > 1:
        raise ValueError("key_resolutions takes the keys of one tenant")
    grouped: dict[int, list] = {kid: [] for kid in keys}
    for row in Assertion.objects.filter(fact_key_id__in=list(keys)).filter(live_filter(at)).values(*CLAIM_FIELDS):
        grouped[row["fact_key_id"]].append(to_claim(row))
    policies = PolicyCache(tenant_id=tenants.pop(), at=at)
    policies.prefetch({k.predicate for k in keys.values()})
    return {kid: KeyResolution(keys[kid], {c.id: c for c in claims}, resolve(claims, policies.get(keys[kid].predicate)))
            for kid, claims in grouped.items()}


def pending_prompts(*, subject: Subject) -> list[ClarificationPrompt]:
    """Prompts the subject can answer now (``pending`` or ``escalated``, not
    past ``expires_at``), oldest first. The dashboard renders these."""
    return list(
        ClarificationPrompt.objects.filter(tenant_id=subject.tenant_id, subject=subject,
                                           status__in=ClarificationPrompt.OPEN_STATUSES, expires_at__gt=timezone.now())
        .select_related("fact_key").order_by("created_at", "id")
    )


def prompts_for(*, tenant: Tenant, external_id: str, status: str = "pending") -> list[ClarificationPrompt]:
    """``GET /subjects/<subject>/prompts?status=``. ``status`` is a key of
    :data:`PROMPT_STATUS_FILTERS`. Raises :class:`NotFound` for an unknown
    subject and :class:`InputError` (field ``status``) for an unknown filter."""
    if status not in PROMPT_STATUS_FILTERS:
        raise InputError(f"must be one of {', '.join(PROMPT_STATUS_FILTERS)}", "status")
    subject = get_subject(tenant=tenant, external_id=external_id)
    if status == "pending":
        return pending_prompts(subject=subject)
    return list(ClarificationPrompt.objects.filter(tenant=tenant, subject=subject,
                                                   status__in=PROMPT_STATUS_FILTERS[status])
                .select_related("fact_key").order_by("created_at", "id"))


def get_prompt(*, tenant: Tenant, prompt_id: str) -> ClarificationPrompt:
    """One prompt of ``tenant``. Raises :class:`NotFound`."""
    prompt = ClarificationPrompt.objects.filter(tenant=tenant, pk=prompt_id).select_related("subject", "fact_key").first()
    if prompt is None:
        raise NotFound("no such prompt")
    return prompt


def prompt_json(prompt: ClarificationPrompt) -> dict:
    """A prompt as API.md shows it (``prompt_id``, ``question``, ``options``,
    ``stakes``, ``created_at``, ``expires_at``) plus its state."""
    key = prompt.fact_key
    return {
        "prompt_id": str(prompt.id), "kind": prompt.kind, "status": prompt.status, "question": prompt.question,
        "options": prompt.options, "stakes": prompt.stakes,
        "entity": key.entity, "predicate": key.predicate, "scope": key.scope,
        "conflict_id": str(prompt.conflict_id) if prompt.conflict_id else None,
        "proposal_assertion_id": str(prompt.proposal_assertion_id) if prompt.proposal_assertion_id else None,
        "valid_from": iso(prompt.valid_from), "valid_to": iso(prompt.valid_to),
        "created_at": iso(prompt.created_at), "expires_at": iso(prompt.expires_at),
        "answered_at": iso(prompt.answered_at), "answered_by": prompt.answered_by or None,
        "answer": prompt.answer, "confirmation": prompt.confirmation or None,
    }


def prompt_state(prompt: ClarificationPrompt, *, now: datetime | None = None) -> dict:
    """The state a 409 reports: ``prompt_id``, ``status`` (``expired`` once
    ``expires_at`` has passed, even before the periodic task marks it),
    ``answered_at``, ``expires_at``."""
    now = now or timezone.now()
    status = prompt.status
    if status in ClarificationPrompt.OPEN_STATUSES and prompt.expires_at <= now:
        status = ClarificationPrompt.EXPIRED
    return {"prompt_id": str(prompt.id), "status": status, "answered_at": iso(prompt.answered_at),
            "expires_at": iso(prompt.expires_at)}


def review_queue(*, tenant: Tenant | None = None, status: str = ReviewTask.OPEN,
                 kind: str | None = None, limit: int | None = None) -> list[ReviewTask]:
    """The staff queue, oldest first, the first ``limit`` tasks (all when
    ``None``). ``tenant`` ``None``: every tenant (staff console)."""
    qs = _queue(tenant=tenant, status=status, kind=kind).select_related("tenant", "subject", "fact_key", "prompt")
    return list(qs.order_by("created_at", "id")[:limit])


def review_queue_size(*, tenant: Tenant | None = None, status: str = ReviewTask.OPEN) -> int:
    """How many tasks :func:`review_queue` holds."""
    return _queue(tenant=tenant, status=status, kind=None).count()


def _queue(*, tenant: Tenant | None, status: str, kind: str | None):
    qs = ReviewTask.objects.filter(status=status)
    if tenant is not None:
        qs = qs.filter(tenant=tenant)
    if kind is not None:
        qs = qs.filter(kind=kind)
    return qs


def reclassification_prompts(*, task: ReviewTask, lock: bool = False) -> list[ClarificationPrompt]:
    """The prompts answered "both are true" that a ``reclassify_predicate``
    task stands for: same tenant and predicate, answered "both", oldest
    first. ``lock`` takes their row locks (inside a transaction)."""
    qs = ClarificationPrompt.objects.filter(tenant_id=task.tenant_id, fact_key__predicate=task.predicate,
                                            status=ClarificationPrompt.ANSWERED, answer__action="both")
    if lock:
        qs = qs.select_for_update(of=("self",))
    return list(qs.select_related("conflict", "tenant", "fact_key").order_by("answered_at", "id"))


def review_task_json(task: ReviewTask) -> dict:
    return {
        "task_id": str(task.id), "kind": task.kind, "status": task.status, "title": task.title,
        "subject": task.subject.external_id if task.subject_id else None,
        "predicate": task.predicate or (task.fact_key.predicate if task.fact_key_id else None),
        "prompt_id": str(task.prompt_id) if task.prompt_id else None,
        "conflict_id": str(task.conflict_id) if task.conflict_id else None,
        "assertion_id": str(task.assertion_id) if task.assertion_id else None,
        "evidence": task.evidence, "created_at": iso(task.created_at), "decision": task.decision or None,
        "decision_note": task.decision_note, "decided_by": task.decided_by or None, "decided_at": iso(task.decided_at),
        "result": task.result,
    }


def endpoints(*, tenant: Tenant) -> list[WebhookEndpoint]:
    """The tenant's endpoints (not deleted), newest first, each with its 20
    most recent deliveries and their attempts prefetched
    (``endpoint.recent``)."""
    out = list(WebhookEndpoint.objects.filter(tenant=tenant).exclude(status=WebhookEndpoint.DELETED)
               .order_by("-created_at"))
    for endpoint in out:
        endpoint.recent = list(Delivery.objects.filter(endpoint=endpoint).select_related("message")
                               .prefetch_related("attempt_log").order_by("-created_at")[:RECENT_DELIVERIES])
    return out


def endpoint_json(endpoint: WebhookEndpoint) -> dict:
    """An endpoint with its delivery log (the secret is shown only once, at
    creation)."""
    return {
        "id": str(endpoint.id), "url": endpoint.url, "event_types": endpoint.event_types, "status": endpoint.status,
        "created_at": iso(endpoint.created_at), "disabled_at": iso(endpoint.disabled_at),
        "disabled_reason": endpoint.disabled_reason or None,
        "deliveries": [delivery_json(d) for d in getattr(endpoint, "recent", [])],
    }


def delivery_json(delivery: Delivery) -> dict:
    return {
        "id": str(delivery.id), "webhook_id": delivery.message_id, "event_type": delivery.message.type,
        "status": delivery.status, "attempts": delivery.attempts, "last_status_code": delivery.last_status_code,
        "last_error": delivery.last_error or None, "created_at": iso(delivery.created_at),
        "next_attempt_at": iso(delivery.next_attempt_at) if delivery.status == Delivery.PENDING else None,
        "delivered_at": iso(delivery.delivered_at),
        "attempt_log": [{"number": a.number, "at": iso(a.at), "status_code": a.status_code, "error": a.error or None,
                         "duration_ms": a.duration_ms} for a in sorted(delivery.attempt_log.all(), key=lambda a: a.number)],
    }


__all__ = ["pending_prompts", "prompts_for", "get_prompt", "prompt_json", "prompt_state", "review_queue",
           "reclassification_prompts",
           "review_task_json", "endpoints", "endpoint_json", "delivery_json", "key_resolution"]
