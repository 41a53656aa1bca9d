"""Outgoing webhooks (API.md, "Outgoing webhooks"): endpoints, the outbox,
signed delivery with exponential backoff and jitter, the delivery log.

- :func:`record` writes an :class:`OutboxMessage` and one :class:`Delivery`
  per subscribed endpoint *in the caller's transaction* (the change and the
  promise to announce it commit together) and schedules a delivery task on
  commit. With the broker down nothing is lost: the rows wait and
  :func:`sweep` enqueues them later.
- :func:`deliver` claims a due delivery with a lease (one worker at a time),
  signs the body with Standard Webhooks (``webhook-id`` is the message id,
  the receiver's idempotency key, identical on every attempt), POSTs it and
  logs the attempt. 2xx: delivered. 410: the endpoint is disabled. Anything
  else (or no answer): retried after :func:`backoff_seconds`, up to
  ``MEMORYUI_WEBHOOK_MAX_ATTEMPTS``, then ``failed``.

Delivery is at least once: a worker that dies after the receiver answered
but before the answer was recorded sends again once the lease runs out, with
the same ``webhook-id``.
"""
from __future__ import annotations

import ipaddress
import json
import logging
import random
import socket
import time
import uuid
from datetime import datetime, timedelta, timezone as dt_timezone
from typing import Any, Callable, Iterable
from urllib.parse import urlsplit

import requests
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from conflicts.models import Delivery, DeliveryAttempt, OutboxMessage, WebhookEndpoint
from conflicts.scheduling import enqueue, enqueue_on_commit, resume
from facts import events as ev
from facts.bulk import Select
from facts.errors import NotFound
from facts.inputs import InputError
from facts.models import Assertion, Conflict, FactKey, Subject, Tenant
from facts.projection import iso
from facts.tenants import new_webhook_secret

logger = logging.getLogger(__name__)

CLARIFICATION_REQUESTED = "clarification.requested"
CLARIFICATION_ANSWERED = "clarification.answered"
# API.md, "Outgoing webhooks": the event types an endpoint can subscribe to.
EVENT_TYPES = (ev.FACT_SUPERSEDED, ev.FACT_RETRACTED, ev.FACT_ERASED, ev.CONFLICT_OPENED, ev.CONFLICT_RESOLVED,
               CLARIFICATION_REQUESTED, CLARIFICATION_ANSWERED)
MAX_URL_CHARS = 2000
# Keys whose values may carry personal data; an erasure nulls them in payloads.
_PERSONAL_KEYS = frozenset({"value", "values", "evidence", "question", "confirmation", "label", "choice", "reason"})


def _setting(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


# --------------------------------------------------------------------------- endpoints


def create_endpoint(*, tenant: Tenant, url: Any, event_types: Any = None) -> tuple[WebhookEndpoint, str]:
    """Register a callback URL (``POST /api/v1/webhook-endpoints``).

    ``url``: an ``http``/``https`` URL of at most 2,000 characters.
    ``event_types``: a list drawn from :data:`EVENT_TYPES`; ``None`` or empty
    means all. Returns the endpoint and its signing secret (``whsec_``...,
    shown once). Raises :class:`InputError` naming ``url`` or
    ``event_types[i]``.
    """
    if not isinstance(url, str) or not url.strip():
        raise InputError("is required: an http(s) URL", "url")
    url = url.strip()
    parts = urlsplit(url)
    if len(url) > MAX_URL_CHARS:
        raise InputError(f"is longer than {MAX_URL_CHARS} characters", "url")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError("must be an absolute http:// or https:// URL", "url")
    if parts.username or parts.password:
        raise InputError("must not contain credentials", "url")
    if any(c.isspace() or ord(c) < 32 for c in url):
        raise InputError("holds a space or a control character", "url")
    try:
        port = parts.port  # urllib raises ValueError for a port outside 0-65535
    except ValueError:
        port = 0
    if port == 0:
        raise InputError("has a port outside 1-65535", "url")
    types = _event_types(event_types)
    _refuse_private_target(parts.hostname)
    endpoint = WebhookEndpoint.objects.create(tenant=tenant, url=url, secret=new_webhook_secret(), event_types=types,
                                              created_at=timezone.now())
    logger.info("webhook_endpoint.created", extra={"tenant": tenant.slug, "endpoint_id": str(endpoint.id)})
    return endpoint, endpoint.secret


def _refuse_private_target(host: str) -> None:
    """Refuse a callback host that is, or resolves to, a loopback, private,
    link-local, multicast, reserved or unspecified address (server-side
    request forgery: a tenant's key must not make the server call its own
    network), unless ``MEMORYUI_WEBHOOK_PRIVATE_TARGETS`` is on. A name
    that does not resolve now is accepted: deliveries to it fail and are
    retried like any unreachable receiver. Raises :class:`InputError`
    naming ``url``."""
    if settings.MEMORYUI_WEBHOOK_PRIVATE_TARGETS:
        return
    try:
        addresses = {ipaddress.ip_address(host.strip("[]"))}
    except ValueError:
        try:
            addresses = {ipaddress.ip_address(info[4][0].split("%")[0])
                         for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
        except (OSError, UnicodeError):
            return
    for address in addresses:
        if not address.is_global or address.is_multicast:
            raise InputError(f"points at a non-public address ({address}); outgoing webhooks go to the "
                             f"public internet only", "url")


def _event_types(raw: Any) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InputError(f"must be a list drawn from {', '.join(EVENT_TYPES)}", "event_types")
    out: list[str] = []
    for i, item in enumerate(raw):
        if item not in EVENT_TYPES:
            raise InputError(f"must be one of {', '.join(EVENT_TYPES)}", f"event_types[{i}]")
        if item not in out:
            out.append(item)
    return out


def delete_endpoint(*, tenant: Tenant, endpoint_id: str) -> WebhookEndpoint:
    """Remove an endpoint (``DELETE /api/v1/webhook-endpoints/<id>``): it
    gets nothing more, its undelivered deliveries are cancelled, its
    delivery log stays. Raises :class:`NotFound` (also for another tenant's
    or an already deleted endpoint)."""
    with transaction.atomic():
        endpoint = (WebhookEndpoint.objects.select_for_update().filter(tenant=tenant, pk=endpoint_id)
                    .exclude(status=WebhookEndpoint.DELETED).first())
        if endpoint is None:
            raise NotFound("no such webhook endpoint")
        now = timezone.now()
        endpoint.status = WebhookEndpoint.DELETED
        endpoint.deleted_at = now
        endpoint.save(update_fields=["status", "deleted_at"])
        Delivery.objects.filter(endpoint=endpoint, status=Delivery.PENDING).update(status=Delivery.CANCELLED)
        logger.info("webhook_endpoint.deleted", extra={"tenant": tenant.slug, "endpoint_id": str(endpoint.id)})
        return endpoint


# --------------------------------------------------------------------------- recording


def active_endpoints(tenant_id: int) -> tuple[tuple, Select]:
    """``(memo key, query)`` of the tenant's active endpoints (model
    instances), as the ledger prefetches them with its first round trip of
    a write (:func:`facts.events.prefetch_with_writes`). A
    :class:`~facts.bulk.Select`: its statement is built once per process,
    not per write."""
    return ("outbox.endpoints", tenant_id), Select(WebhookEndpoint, where="tenant_id = %s AND status = %s",
                                                   params=[tenant_id, WebhookEndpoint.ACTIVE], as_model=True)


def subscribed(*, tenant_id: int, type: str) -> list[WebhookEndpoint]:
    """The tenant's active endpoints that want ``type``. Looked up once per
    ledger write (:func:`facts.events.memo`; the ledger fetches them with
    its lock, see :func:`active_endpoints`): a batch of 1,000 events asks
    the database once, a single webhook costs no round trip for it."""
    key, query = active_endpoints(tenant_id)
    active = ev.memo(key, query.fetch)
    return [e for e in active if not e.event_types or type in e.event_types]


def record(*, tenant_id: int, subject_id: int | None, type: str, data: dict, assertion_ids: Iterable[str] = (),
           endpoints: list[WebhookEndpoint] | None = None) -> OutboxMessage | None:
    """Write one outgoing event to the outbox in the current transaction,
    with a delivery per active endpoint subscribed to ``type`` (or per
    ``endpoints`` when the caller already looked them up), and schedule
    their delivery on commit. ``data`` must be JSON-serialisable (times as
    RFC 3339 strings). Returns ``None`` when no endpoint wants ``type``."""
    wanted = endpoints if endpoints is not None else subscribed(tenant_id=tenant_id, type=type)
    if not wanted:
        return None
    now = timezone.now()
    message = OutboxMessage.objects.create(
        id=f"msg_{uuid.uuid4().hex}", tenant_id=tenant_id, subject_id=subject_id, type=type,
        payload={"type": type, "timestamp": iso(now), "data": data},
        assertion_ids=sorted({str(a) for a in assertion_ids if a}), created_at=now,
    )
    deliveries = Delivery.objects.bulk_create([
        Delivery(tenant_id=tenant_id, message=message, endpoint=e, created_at=now, next_attempt_at=now) for e in wanted
    ])
    from conflicts import tasks  # tasks import this module

    for delivery in deliveries:
        enqueue_on_commit(tasks.deliver, kwargs={"delivery_id": str(delivery.id)})
    logger.info("outbox.recorded", extra={"tenant_id": tenant_id, "type": type, "message_id": message.id,
                                          "deliveries": len(deliveries)})
    return message


def _names(tenant_id: int, subject_id: int | None) -> dict:
    """The tenant's slug and the subject's external id (neither changes
    within a write, so a batch looks each up once: :func:`facts.events.memo`)."""
    slug = ev.memo(("outbox.slug", tenant_id),
                   lambda: Tenant.objects.filter(pk=tenant_id).values_list("slug", flat=True).first())
    external = ev.memo(("outbox.subject", subject_id), lambda: Subject.objects.filter(pk=subject_id).values_list(
        "external_id", flat=True).first()) if subject_id else None
    return {"tenant": slug, "subject": external}


def _key_fields(fact_key_id: int | None) -> dict:
    """A fact key's entity, predicate and scope (fixed for the key's life;
    looked up once per write)."""
    if not fact_key_id:
        return {}
    key = ev.memo(("outbox.key", fact_key_id), lambda: FactKey.objects.filter(pk=fact_key_id).first())
    if key is None:
        return {}
    return {"entity": key.entity, "predicate": key.predicate, "scope": key.scope}


def claim_payload(row: Assertion) -> dict:
    """An assertion as outgoing payloads carry it: value, both time axes and
    the source."""
    return {
        "assertion_id": str(row.id), "value": row.value, "valid_from": iso(row.valid_from),
        "valid_to": iso(row.valid_to), "stated_at": iso(row.stated_at), "recorded_at": iso(row.recorded_at),
        "source": {"kind": row.source_kind, "id": row.source_id, "extractor": row.extractor},
    }


def _strip(data: dict) -> dict:
    return {k: v for k, v in data.items() if k != "subject_id"}


def domain_event_data(event: ev.DomainEvent, *, winner: Callable[[FactKey, str], dict | None]) -> tuple[dict, list[str]] | None:
    """The outgoing ``data`` of a ledger event and the assertion ids it
    quotes, or ``None`` for event types that are not sent. ``winner(key,
    valid_from)`` gives the claim that now holds at a resolved conflict's
    start (the new value with its source)."""
    base = {**_names(event.tenant_id, event.subject_id), **_key_fields(event.fact_key_id)}
    data = _strip(event.data)
    if event.type == ev.FACT_SUPERSEDED:
        return {**base, **data}, [data["assertion_id"], data["superseded_by"]]
    if event.type == ev.FACT_RETRACTED:
        row = Assertion.objects.filter(pk=data["assertion_id"]).first()
        old = claim_payload(row) if row is not None and row.erased_at is None else None
        return {**base, **data, "old": old}, [data["assertion_id"]]
    if event.type == ev.FACT_ERASED:
        return {**base, **data}, [data["assertion_id"]]
    if event.type == ev.CONFLICT_OPENED:
        ids = [c["assertion_id"] for c in data["candidates"]]
        return {**base, **data}, ids
    if event.type == ev.CONFLICT_RESOLVED:
        conflict = Conflict.objects.select_related("fact_key").get(pk=data["conflict_id"])
        rows = Assertion.objects.filter(pk__in=conflict.candidate_ids).order_by("stated_at", "id")
        candidates = [claim_payload(r) for r in rows if r.erased_at is None]
        new = winner(conflict.fact_key, data["valid_from"])
        ids = [c["assertion_id"] for c in candidates] + ([new["assertion_id"]] if new else [])
        return {**base, **data, "old": candidates, "new": new, "resolved_at": iso(conflict.resolved_at)}, ids
    return None


# --------------------------------------------------------------------------- delivery


def backoff_seconds(*, attempt: int, base: float, cap: float, rand: Callable[[], float] = random.random) -> float:
    """Delay before retry number ``attempt`` + 1 (``attempt`` >= 1 failures
    so far): exponential, ``base * 2 ** (attempt - 1)`` capped at ``cap``,
    with "equal jitter" (half fixed, half uniformly random), so the result
    lies in ``[d / 2, d]``. Seconds."""
    delay = min(cap, base * (2 ** max(0, attempt - 1)))
    return delay / 2 + rand() * delay / 2


def _lease_seconds() -> float:
    return _setting("MEMORYUI_WEBHOOK_TIMEOUT_SECONDS", 10) * 2 + 30


def deliver(*, delivery_id: str) -> str:
    """Attempt one delivery if it is due (idempotent: a delivery that is not
    due, already claimed, delivered, failed or cancelled is left alone).
    Returns ``delivered``, ``retry``, ``failed``, ``disabled``,
    ``cancelled`` or ``skipped``."""
    now = timezone.now()
    claimed = (
        Delivery.objects.filter(pk=delivery_id)
        .filter(Q(status=Delivery.PENDING, next_attempt_at__lte=now) | Q(status=Delivery.SENDING, lease_until__lt=now))
        .update(status=Delivery.SENDING, lease_until=now + timedelta(seconds=_lease_seconds()),
                attempts=F("attempts") + 1, last_attempt_at=now)
    )
    if not claimed:
        return "skipped"  # not due yet (its retry task or the sweep will come), or not ours any more
    delivery = Delivery.objects.select_related("message", "endpoint").get(pk=delivery_id)
    if delivery.endpoint.status != WebhookEndpoint.ACTIVE:
        Delivery.objects.filter(pk=delivery.pk, status=Delivery.SENDING).update(status=Delivery.CANCELLED)
        return "cancelled"
    code, error, duration_ms = _post(delivery)
    return _record_attempt(delivery, number=delivery.attempts, code=code, error=error, duration_ms=duration_ms)


def signed_request(*, message: OutboxMessage, secret: str, at: datetime) -> tuple[bytes, dict]:
    """The body and headers of one attempt: Standard Webhooks ``webhook-id``
    (the message id), ``webhook-timestamp`` (``at``, Unix seconds) and
    ``webhook-signature`` (``v1,<base64 HMAC-SHA256>``)."""
    body = json.dumps(message.payload, separators=(",", ":"), ensure_ascii=False)
    signature = Webhook(secret).sign(message.id, at, body)
    headers = {
        "webhook-id": message.id, "webhook-timestamp": str(int(at.timestamp())), "webhook-signature": signature,
        "content-type": "application/json", "user-agent": "memoryui-webhooks/1",
    }
    return body.encode(), headers


def _post(delivery: Delivery) -> tuple[int | None, str, int]:
    timeout = _setting("MEMORYUI_WEBHOOK_TIMEOUT_SECONDS", 10)
    body, headers = signed_request(message=delivery.message, secret=delivery.endpoint.secret,
                                   at=datetime.now(dt_timezone.utc))
    started = time.monotonic()
    try:
        response = requests.post(delivery.endpoint.url, data=body, headers=headers, timeout=(min(5.0, timeout), timeout),
                                 allow_redirects=False, stream=True)
        code, error = response.status_code, ""
        response.close()
    except requests.RequestException as exc:
        code, error = None, f"{type(exc).__name__}: {exc}"[:500]
    return code, error, int((time.monotonic() - started) * 1000)


def _record_attempt(delivery: Delivery, *, number: int, code: int | None, error: str, duration_ms: int) -> str:
    now = timezone.now()
    with transaction.atomic():
        current = Delivery.objects.select_for_update().get(pk=delivery.pk)
        DeliveryAttempt.objects.create(tenant_id=delivery.tenant_id, delivery=current, number=number, at=now,
                                       status_code=code, error=error, duration_ms=duration_ms)
        if current.status != Delivery.SENDING or current.attempts != number:
            return "skipped"  # the lease ran out and another attempt took over
        current.last_status_code = code
        current.last_error = error
        current.lease_until = None
        log = {"delivery_id": str(current.id), "message_id": delivery.message_id, "attempt": number,
               "status_code": code, "tenant_id": delivery.tenant_id}
        if code is not None and 200 <= code < 300:
            current.status, current.delivered_at, outcome = Delivery.DELIVERED, now, "delivered"
        elif code == 410:
            current.status, outcome = Delivery.FAILED, "disabled"
            _disable(delivery.endpoint_id, now=now, reason="the receiver answered 410 Gone")
        elif number >= int(_setting("MEMORYUI_WEBHOOK_MAX_ATTEMPTS", 12)):
            current.status, outcome = Delivery.FAILED, "failed"
        else:
            delay = backoff_seconds(attempt=number, base=_setting("MEMORYUI_WEBHOOK_BACKOFF_BASE_SECONDS", 10),
                                    cap=_setting("MEMORYUI_WEBHOOK_BACKOFF_MAX_SECONDS", 3600))
            current.status, current.next_attempt_at, outcome = Delivery.PENDING, now + timedelta(seconds=delay), "retry"
            from conflicts import tasks

            # A little after the due time, so the task never arrives before it.
            enqueue_on_commit(tasks.deliver, kwargs={"delivery_id": str(current.id)}, countdown=delay + 0.05)
            log["retry_in_seconds"] = round(delay, 3)
        current.save(update_fields=["status", "delivered_at", "next_attempt_at", "lease_until", "last_status_code",
                                    "last_error"])
    logger.info(f"webhook.{outcome}", extra=log)
    return outcome


def _disable(endpoint_id: Any, *, now: datetime, reason: str) -> None:
    WebhookEndpoint.objects.filter(pk=endpoint_id, status=WebhookEndpoint.ACTIVE).update(
        status=WebhookEndpoint.DISABLED, disabled_at=now, disabled_reason=reason)
    Delivery.objects.filter(endpoint_id=endpoint_id, status=Delivery.PENDING).update(status=Delivery.CANCELLED)


def sweep(*, now: datetime | None = None, stuck_after_seconds: float | None = None, limit: int = 1000) -> int:
    """Re-enqueue deliveries that should have gone out: pending and due for
    longer than ``stuck_after_seconds`` (default
    ``MEMORYUI_OUTBOX_STUCK_SECONDS``, 60; their task was lost, e.g. the
    broker was down at commit) or claimed by a worker whose lease ran out.
    Stops at the first enqueue the broker refuses. Returns how many were
    enqueued."""
    now = now or timezone.now()
    grace = stuck_after_seconds if stuck_after_seconds is not None else _setting("MEMORYUI_OUTBOX_STUCK_SECONDS", 60)
    Delivery.objects.filter(status=Delivery.PENDING).exclude(endpoint__status=WebhookEndpoint.ACTIVE).update(
        status=Delivery.CANCELLED)
    due = (
        Delivery.objects.filter(Q(status=Delivery.PENDING, next_attempt_at__lte=now - timedelta(seconds=grace))
                                | Q(status=Delivery.SENDING, lease_until__lt=now))
        .order_by("next_attempt_at").values_list("id", flat=True)[:limit]
    )
    from conflicts import tasks

    sent = 0
    for delivery_id in due:
        if not enqueue(tasks.deliver, kwargs={"delivery_id": str(delivery_id)}, respect_pause=False):
            break
        sent += 1
    if sent:
        resume()
        logger.info("outbox.swept", extra={"enqueued": sent})
    return sent


# --------------------------------------------------------------------------- erasure


def redact(value: Any) -> Any:
    """``value`` with every personal field (value, values, evidence,
    question, confirmation, label, choice, reason) nulled, recursively."""
    if isinstance(value, dict):
        return {k: (None if k in _PERSONAL_KEYS else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def scrub(*, tenant_id: int, subject_id: int, assertion_id: str | None = None) -> int:
    """Right to be forgotten: null the personal fields of outbox payloads of
    ``subject_id`` (only those quoting ``assertion_id`` when given), sent or
    not; deliveries still pending carry the redacted payload. Returns the
    number of messages scrubbed."""
    qs = OutboxMessage.objects.filter(tenant_id=tenant_id, subject_id=subject_id)
    if assertion_id is not None:
        qs = qs.filter(assertion_ids__contains=[str(assertion_id)])
    count = 0
    for message in qs.only("id", "payload"):
        payload = redact(message.payload)
        payload.setdefault("data", {})["redacted"] = True
        OutboxMessage.objects.filter(pk=message.pk).update(payload=payload)
        count += 1
    return count
