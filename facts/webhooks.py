"""Inbound webhooks: signature check (Standard Webhooks) and dispatch to
the ledger (API.md, "Authentication" and "Inbound events").

``dispatch`` is shared by the signed webhook endpoint and the batch import:
the same admission, the same ledger calls, the same idempotency receipts.
Event types owned by another app (``clarification.answered``) are handled
by a function that app registers with :func:`register_handler`, so
``facts/`` never imports ``conflicts/``.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from django.db import IntegrityError, transaction
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from facts import ledger
from facts.bulk import Select, fetch_together
from facts.errors import NotFound, StateConflict
from facts.inputs import InputError, parse_assertion, parse_json_body, parse_retraction
from facts.models import Tenant, WebhookReceipt
from facts.tenants import tenant_with_secrets_from, tenant_with_secrets_statement

logger = logging.getLogger(__name__)

Handler = Callable[[Tenant, dict, str], ledger.WriteResult]
# What dispatch calls: ``(tenant, data, actor, receipt key or None)``; the
# handler stores the receipt of its answer in its own transaction.
_Dispatched = Callable[[Tenant, dict, str, "str | None"], ledger.WriteResult]
_handlers: dict[str, _Dispatched] = {}


def register_handler(event_type: str, handler: Handler) -> None:
    """Let another app handle an inbound event type. ``handler(tenant, data,
    actor)`` returns a :class:`~facts.ledger.WriteResult` or raises
    :class:`InputError`, :class:`NotFound` or :class:`StateConflict`; its
    answer's idempotency receipt is stored after it, in the same
    transaction."""
    def handle(tenant: Tenant, data: dict, actor: str, receipt_key: str | None) -> ledger.WriteResult:
        result = handler(tenant, data, actor)
        if receipt_key is not None:
            ledger.Receipts((receipt_key,)).store(tenant, [result])
        return result
    _handlers[event_type] = handle


def _assertion_item(data: Any, prefix: str = "data") -> ledger.Item:
    return parse_assertion(data, received_at=timezone.now(), prefix=prefix)


def _retraction_item(data: Any, prefix: str = "data") -> ledger.Item:
    r = parse_retraction(data, prefix=prefix)
    return ledger.Retraction(assertion_ids=(r.assertion_id,) if r.assertion_id else None, subject=r.subject,
                             source_id=r.source_id, reason=r.reason)


# Event types the ledger writes itself: ``data`` -> a ledger item (raises
# InputError naming the field), for a single event and for the batch path.
_LEDGER_ITEMS: dict[str, Callable[..., ledger.Item]] = {
    "fact.asserted": _assertion_item, "fact.retracted": _retraction_item,
}


def _ledger_handler(parse: Callable[..., ledger.Item]) -> _Dispatched:
    """One event as a batch of one, inside dispatch_once's transaction (no
    savepoint: a concurrent duplicate rolls back and is retried there).
    ``receipt_key``: the idempotency key whose receipt the write stores in
    its last round trip."""
    def handle(tenant: Tenant, data: dict, actor: str, receipt_key: str | None) -> ledger.WriteResult:
        receipts = ledger.Receipts((receipt_key,)) if receipt_key is not None else None
        result = ledger.write_batch(tenant=tenant, items=[parse(data)], actor=actor, savepoint=False,
                                    receipts=receipts)[0]
        if isinstance(result, NotFound):
            raise result
        return result
    return handle


for _type, _parse in _LEDGER_ITEMS.items():
    _handlers[_type] = _ledger_handler(_parse)


def dispatch(tenant: Tenant, envelope: Any, *, actor: str, prefix: str = "",
             receipt_key: str | None = None) -> tuple[int, dict]:
    """Apply one event envelope ``{"type", "timestamp", "data"}``.

    Returns ``(status, body)``: 200 with the API.md response, or 4xx with
    ``{"detail", "field"}`` (nothing written). ``prefix`` prepends a path to
    error fields (``events[3].``). With ``receipt_key`` a 200 is stored as
    that idempotency key's receipt in the same transaction (for the
    ledger's event types, in the write's last round trip).
    """
    try:
        if not isinstance(envelope, dict):
            raise InputError("must be an object {type, timestamp, data}", prefix.rstrip(".") or "body")
        event_type = envelope.get("type")
        handler = _handlers.get(event_type)
        if handler is None:
            raise InputError(f"must be one of {', '.join(sorted(_handlers))}", f"{prefix}type")
        if "data" not in envelope:
            raise InputError("is required", f"{prefix}data")
        # No savepoint of its own: inside dispatch_once a refusal rolls the
        # whole transaction back; called alone, this is the transaction.
        with transaction.atomic(savepoint=False):
            result = handler(tenant, envelope["data"], actor, receipt_key)
        return 200, result.as_body()
    except InputError as exc:
        if prefix and exc.field and not exc.field.startswith(prefix):
            exc.field = prefix + exc.field
        return exc.status, exc.as_body()
    except NotFound as exc:
        return 404, {"detail": str(exc), "field": _not_found_field(envelope.get("data"), prefix)}
    except StateConflict as exc:
        return 409, {"detail": exc.detail, "field": None, **exc.state}


# The ids an event names, in the order a 404 blames them: what was looked
# up and not found in the tenant.
_NAMED_IDS = ("assertion_id", "prompt_id", "source_id")


def _not_found_field(data: Any, prefix: str) -> str:
    """The field a 404 names: the id the event's ``data`` looked up
    (``data.assertion_id``, ``data.prompt_id`` or ``data.source_id``), or
    ``data``."""
    named = next((n for n in _NAMED_IDS if isinstance(data, dict) and data.get(n) not in (None, "")), None)
    return f"{prefix}data.{named}" if named else f"{prefix}data"


_LOOK_UP = object()


def dispatch_once(tenant: Tenant, idempotency_key: str, envelope: Any, *, actor: str, prefix: str = "",
                  receipt: Any = _LOOK_UP) -> tuple[int, dict]:
    """:func:`dispatch` guarded by an idempotency key: a key seen before gets
    its first response again and nothing is written. Refusals (4xx) are not
    remembered, since they wrote nothing. ``receipt``: the key's stored
    receipt ``{"status_code", "response"}`` or ``None``, when the caller has
    just read it (see :func:`inbound`); looked up here otherwise."""
    try:
        return _dispatch_recorded(tenant, idempotency_key, envelope, actor=actor, prefix=prefix, receipt=receipt)
    except IntegrityError:
        # A concurrent request stored the same webhook id or payload first:
        # everything here rolled back; a second attempt finds its receipt,
        # or answers ``duplicate``.
        return _dispatch_recorded(tenant, idempotency_key, envelope, actor=actor, prefix=prefix)


def _receipt(where: str, params: list) -> Select:
    return Select(WebhookReceipt, ("status_code", "response"), where, params)


def _stored_receipts(tenant: Tenant, keys) -> dict[str, tuple[int, dict]]:
    """The receipts stored for the idempotency keys ``keys``: key ->
    ``(status, body)``. One prepared statement however many keys (a
    queryset's ``IN`` list would be compiled and quoted value by value)."""
    rows = Select(WebhookReceipt, ("webhook_id", "status_code", "response"),
                  "tenant_id = %s AND webhook_id = ANY(%s)", [tenant.id, list(keys)]).fetch()
    return {r["webhook_id"]: (r["status_code"], r["response"]) for r in rows}


def _dispatch_recorded(tenant: Tenant, idempotency_key: str, envelope: Any, *, actor: str,
                       prefix: str, receipt: Any = _LOOK_UP) -> tuple[int, dict]:
    if receipt is _LOOK_UP:
        found = _receipt("tenant_id = %s AND webhook_id = %s", [tenant.id, idempotency_key]).fetch()
        receipt = found[0] if found else None
    if receipt is not None:
        return receipt["status_code"], receipt["response"]
    with transaction.atomic():
        status, body = dispatch(tenant, envelope, actor=actor, prefix=prefix, receipt_key=idempotency_key)
        if status != 200:
            transaction.set_rollback(True)  # a refusal writes nothing
        return status, body


def _batch_item(event: Any, prefix: str) -> ledger.Item | None:
    """The ledger item of a ``fact.asserted`` or ``fact.retracted`` envelope
    (raises :class:`InputError` naming the field), or ``None`` for an event
    the bulk path does not take."""
    if not isinstance(event, dict) or "data" not in event:
        return None
    parse = _LEDGER_ITEMS.get(event.get("type"))
    return parse(event["data"], f"{prefix}data") if parse else None


# An idempotency key is stored in WebhookReceipt.webhook_id (300 characters).
MAX_IDEMPOTENCY_KEY = WebhookReceipt._meta.get_field("webhook_id").max_length
BATCH_KEY_PREFIX = "batch:"


def dispatch_batch(tenant: Tenant, events: list[dict], *, actor: str,
                   key_prefix: str = BATCH_KEY_PREFIX) -> list[tuple[int, dict]]:
    """Apply a batch of envelopes, each with its own ``"id"`` idempotency key
    (API.md, "Batch import"); one ``(status, body)`` per event, in order.

    Runs of consecutive ``fact.asserted`` and ``fact.retracted`` events are
    admitted one by one and written together by
    :func:`facts.ledger.write_batch` (same rules, bulk queries); any other
    event goes through :func:`dispatch_once`. An id seen before (in an
    earlier request or earlier in this batch) gets its first response
    again; the same id on another event later in the same batch is refused
    (400 naming that event's ``id``); a refused event (4xx: bad input, or
    a retraction that matches nothing) writes nothing and does not stop the
    others.
    """
    keys = [f"{key_prefix}{e['id']}" for e in events]
    stored = _stored_receipts(tenant, set(keys))
    out: list[tuple[int, dict] | None] = [None] * len(events)
    run: list[tuple[int, ledger.Item]] = []  # written together by the ledger
    first_index: dict[str, int] = {}

    def flush() -> None:
        if not run:
            return
        # One transaction: the rows and their receipts (ledger.Receipts).
        results = ledger.write_batch(tenant=tenant, items=[d for _, d in run], actor=actor,
                                     receipts=ledger.Receipts(tuple(keys[i] for i, _ in run), skip_stored=True))
        # A "duplicate" may be the same event sent again while its first
        # request was still being written: that request's receipt, stored
        # since, is the answer (API.md: an id gets its first answer).
        replayed = {keys[i] for (i, _), r in zip(run, results)
                    if isinstance(r, ledger.WriteResult) and r.outcome == "duplicate"}
        if replayed:
            stored.update(_stored_receipts(tenant, replayed))
        for (i, _), r in zip(run, results):
            if keys[i] in replayed and keys[i] in stored:
                out[i] = stored[keys[i]]
                continue
            out[i] = ((200, r.as_body()) if isinstance(r, ledger.WriteResult)
                      else (404, {"detail": str(r), "field": _not_found_field(events[i]["data"], f"events[{i}].")}))
        run.clear()

    for i, event in enumerate(events):
        key = keys[i]
        if key in first_index and event != events[first_index[key]]:
            j = first_index[key]
            out[i] = (400, {"detail": f"repeats the id of events[{j}] with another event: an id names one event",
                            "field": f"events[{i}].id"})
            continue
        if key in stored or key in first_index:
            continue
        first_index[key] = i
        prefix = f"events[{i}]."
        try:
            item = _batch_item(event, prefix)
        except InputError as exc:
            out[i] = (exc.status, exc.as_body())
            continue
        if item is not None:
            run.append((i, item))
            continue
        flush()
        out[i] = dispatch_once(tenant, key, event, actor=actor, prefix=prefix)
    flush()
    for i, key in enumerate(keys):
        if out[i] is None:
            out[i] = stored[key] if key in stored else out[first_index[key]]
    return out


SIGNATURE_HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")


def _error(status: int, detail: str, field: str | None) -> JsonResponse:
    return JsonResponse({"detail": detail, "field": field}, status=status)


def verify_signature(secrets: list[str], body: bytes, headers: dict[str, str]) -> None:
    """Check Standard Webhooks headers against every active secret of a
    tenant (several during rotation; see
    :func:`facts.tenants.tenant_with_secrets_statement`). Raises
    ``WebhookVerificationError`` for a missing, malformed, stale (outside 5
    minutes) or wrong signature."""
    if not secrets:
        raise WebhookVerificationError("the tenant has no webhook secret")
    last: Exception | None = None
    for secret in secrets:
        try:
            Webhook(secret).verify(body, headers, json_parse=False)
            return
        except WebhookVerificationError as exc:
            last = exc
        except (ValueError, UnicodeDecodeError, TypeError):  # malformed header or body encoding
            last = WebhookVerificationError(
                "malformed signature: webhook-signature takes space-separated v1,<base64 signature> entries")
    raise last or WebhookVerificationError("no matching signature")


@csrf_exempt
@require_POST
def inbound(request: HttpRequest, tenant_slug: str) -> JsonResponse:
    """``POST /webhooks/<tenant slug>/``: one signed event.

    401 bad/missing signature or stale timestamp; 413 body over
    ``MEMORYUI_MAX_BODY_BYTES``; 400 malformed JSON or payload (naming the
    field); 200 with the write result; a replayed ``webhook-id`` gets its
    first response.
    """
    from django.conf import settings

    webhook_id = request.headers.get("webhook-id", "")
    if len(webhook_id) > MAX_IDEMPOTENCY_KEY or "\x00" in webhook_id:
        return _error(400, f"must be at most {MAX_IDEMPOTENCY_KEY} characters, without NUL", "webhook-id")
    # The tenant, its secrets and the receipt of this webhook id in one
    # round trip; the receipt is used only once the signature is verified.
    tenant_rows, receipts = fetch_together(
        tenant_with_secrets_statement(tenant_slug),
        _receipt(f"tenant_id = (SELECT id FROM {Tenant._meta.db_table} WHERE slug = %s) AND webhook_id = %s",
                 [tenant_slug, webhook_id]),
    )
    tenant, secrets = tenant_with_secrets_from(tenant_rows)
    if tenant is None:
        return _error(404, "no such tenant", "tenant")
    limit = settings.MEMORYUI_MAX_BODY_BYTES
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        return _error(413, f"body is larger than {limit} bytes", "body")
    body = request.body
    if len(body) > limit:
        return _error(413, f"body is larger than {limit} bytes", "body")
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _error(400, f"is not UTF-8 text: {exc}", "body")
    headers = {k.lower(): v for k, v in request.headers.items() if k.lower().startswith("webhook-")}
    missing = next((h for h in SIGNATURE_HEADERS if not headers.get(h)), None)
    if missing is not None:
        return _error(401, "is required (Standard Webhooks signature)", missing)
    try:
        verify_signature(secrets, body, headers)
    except WebhookVerificationError as exc:
        # The library's words: a timestamp outside 5 minutes (or not a
        # number) is the timestamp's fault, anything else the signature's.
        about_time = "timestamp" in str(exc) or str(exc) == "Invalid Signature Headers"
        return _error(401, f"signature check failed: {exc}", "webhook-timestamp" if about_time else "webhook-signature")
    try:
        envelope = parse_json_body(body)
    except InputError as exc:
        return _error(exc.status, exc.detail, exc.field)
    status, payload = dispatch_once(tenant, headers["webhook-id"], envelope, actor=f"webhook:{tenant.slug}",
                                    receipt=receipts[0] if receipts else None)
    return JsonResponse(payload, status=status)
