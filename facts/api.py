"""HTTP routing for the ledger (API.md): schemas and routing only; the work
is in ``facts/ledger.py`` and ``facts/queries.py``.

Bodies are parsed by ``facts/inputs.py`` so that every refusal is a 4xx
``{"detail", "field"}`` naming the field; the OpenAPI description of the
bodies is given with ``openapi_extra``.
"""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import DataError
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from ninja import Router
from ninja.errors import AuthenticationError
from ninja.security import HttpBearer

from facts import ledger, queries
from facts.access import mint_login_link
from facts.errors import NotFound
from facts.inputs import CLOCK_SKEW, InputError, check_params, parse_json_body, parse_scope, parse_time, parse_uuid
from facts.models import Tenant
from facts.policy import policy_view_at, policy_views_at, ranking_at
from facts.projection import iso
from facts.tenants import KeyCheck, tenant_for_api_key
from facts.webhooks import BATCH_KEY_PREFIX, MAX_IDEMPOTENCY_KEY, dispatch_batch

BATCH_LIMIT = 1000


class TenantKey(HttpBearer):
    """``Authorization: Bearer <tenant api key>``; the tenant becomes
    ``request.auth``.

    ``TenantKey(folded=True)``, for the hot reads: ``request.auth`` is the
    :class:`~facts.tenants.KeyCheck` of a non-empty key, which the read
    checks in its own statement and answers 401 exactly as here when the
    key is unknown or revoked (:func:`_refused`)."""

    def __init__(self, *, folded: bool = False) -> None:
        super().__init__()
        self.folded = folded

    def authenticate(self, request: HttpRequest, token: str) -> Tenant | KeyCheck | None:
        if self.folded:
            return KeyCheck(token) if token else None
        return tenant_for_api_key(token)


router = Router(auth=TenantKey(), tags=["ledger"])
FOLDED_KEY = TenantKey(folded=True)


def _refused() -> AuthenticationError:
    """The 401 of an unknown or revoked key (the API's handler gives it the
    same body as a refusal by :class:`TenantKey`)."""
    return AuthenticationError()


def _checked(key: KeyCheck) -> None:
    """Check ``key`` on its own, for a folded read whose statement did not
    run or failed on its input (a parameter refused, or a value PostgreSQL
    cannot hold): a bad key is 401 before anything the input causes."""
    if key.tenant() is None:
        raise _refused()


def json_body(request: HttpRequest) -> Any:
    if len(request.body) > settings.MEMORYUI_MAX_BODY_BYTES * 8:
        raise InputError("body is too large", "body", status=413)
    if not request.body:
        return {}
    return parse_json_body(request.body)


def _time_param(raw: str | None, field: str):
    return parse_time(raw, field) if raw else None


def _known_at_param(raw: str | None):
    """``known_at``: a transaction time, so not later than now (give or take
    :data:`~facts.inputs.CLOCK_SKEW`): what will be believed then is not
    known yet."""
    known = _time_param(raw, "known_at")
    if known is not None and known > timezone.now() + CLOCK_SKEW:
        raise InputError("is in the future: transaction time is what was believed at a moment that has passed "
                         "(leave it out for now)", "known_at")
    return known


def _actor(request: HttpRequest) -> str:
    return f"api:{request.auth.slug}"


def _json_response(text: str) -> HttpResponse:
    """A 200 whose body is JSON text built already (by PostgreSQL for the
    current view): not decoded and re-encoded by the API's renderer."""
    return HttpResponse(text, content_type="application/json; charset=utf-8")


def _body_schema(example: dict) -> dict:
    return {"requestBody": {"content": {"application/json": {"schema": {"type": "object"}, "example": example}}}}


# --------------------------------------------------------------------------- reads


@router.get("/subjects/{subject}/facts", summary="Facts at (valid_at, known_at)", auth=FOLDED_KEY)
def get_facts(request, subject: str, valid_at: str | None = None, known_at: str | None = None,
              entity: str | None = None, predicate: str | None = None, scope: str | None = None):
    try:
        check_params(subject=subject, entity=entity, predicate=predicate, scope=scope)
        at, known = _time_param(valid_at, "valid_at"), _known_at_param(known_at)
        scope_key = parse_scope(scope, "scope") if scope else None
    except InputError:
        _checked(request.auth)
        raise
    try:
        body = queries.facts_at_json_for_key(key=request.auth, external_id=subject, valid_at=at, known_at=known,
                                             entity=entity, predicate=predicate, scope=scope_key)
    except DataError:
        _checked(request.auth)
        raise
    if body is None:
        raise _refused()
    return _json_response(body)


@router.get("/subjects/{subject}/context", summary="Conflict-free view for prompt assembly", auth=FOLDED_KEY)
def get_context(request, subject: str):
    try:
        check_params(subject=subject)
    except InputError:
        _checked(request.auth)
        raise
    try:
        body = queries.context_for_key(key=request.auth, external_id=subject)
    except DataError:
        _checked(request.auth)
        raise
    if body is None:
        raise _refused()
    return body


@router.get("/subjects/{subject}/history", summary="Versions of one fact key, oldest first")
def get_history(request, subject: str, predicate: str, entity: str = "self", scope: str = "global"):
    check_params(subject=subject, predicate=predicate, entity=entity, scope=scope)
    return queries.history(tenant=request.auth, external_id=subject, entity=entity, predicate=predicate,
                           scope=parse_scope(scope, "scope"))


@router.get("/subjects/{subject}/export", summary="Everything held about the subject")
def get_export(request, subject: str):
    check_params(subject=subject)
    return queries.export(tenant=request.auth, external_id=subject)


# --------------------------------------------------------------------------- writes


@router.post("/assertions/batch", summary="Batch import (up to 1,000 events)",
             openapi_extra=_body_schema({"events": [{"id": "evt-1", "type": "fact.asserted", "data": {}}]}))
def post_batch(request):
    body = json_body(request)
    events = body.get("events") if isinstance(body, dict) else None
    if not isinstance(events, list):
        raise InputError("must be a list of events", "events")
    if len(events) > BATCH_LIMIT:
        raise InputError(f"holds more than {BATCH_LIMIT} events", "events", status=413)
    for i, event in enumerate(events):
        if not isinstance(event, dict):
            raise InputError("must be an object {id, type, timestamp, data}", f"events[{i}]")
        if event.get("id") is None:
            raise InputError("is required: a string idempotency key", f"events[{i}].id")
        if not isinstance(event["id"], str) or not event["id"]:
            raise InputError("must be a non-empty string (the event's idempotency key)", f"events[{i}].id")
        if len(event["id"]) > MAX_IDEMPOTENCY_KEY - len(BATCH_KEY_PREFIX):
            raise InputError(f"is longer than {MAX_IDEMPOTENCY_KEY - len(BATCH_KEY_PREFIX)} characters", f"events[{i}].id")
    answers = dispatch_batch(request.auth, events, actor=_actor(request))
    return {"results": [{"id": event["id"], "status": status, **payload}
                        for event, (status, payload) in zip(events, answers)]}


@router.post("/assertions/{assertion_id}/retract", summary="Retract: the claim was never true",
             openapi_extra=_body_schema({"reason": "wrong person"}))
def post_retract(request, assertion_id: str):
    body = json_body(request)
    reason = body.get("reason", "") if isinstance(body, dict) else ""
    if not isinstance(reason, str):
        raise InputError("must be a string", "reason")
    aid = parse_uuid(assertion_id, "assertion_id")
    return ledger.retract(tenant=request.auth, assertion_ids=[aid], reason=reason, actor=_actor(request)).as_body()


@router.post("/assertions/{assertion_id}/erase", summary="Erase: value and evidence destroyed, tombstone kept")
def post_erase(request, assertion_id: str):
    aid = parse_uuid(assertion_id, "assertion_id")
    return ledger.erase(tenant=request.auth, assertion_id=aid, actor=_actor(request)).as_body()


@router.delete("/subjects/{subject}", summary="Erase everything about a person")
def delete_subject(request, subject: str):
    check_params(subject=subject)
    count = ledger.erase_subject(tenant=request.auth, external_id=subject, actor=_actor(request))
    return {"subject": subject, "outcome": "erased", "erased_assertions": count}


@router.post("/subjects/{subject}/login-link", summary="One-time sign-in link to the person's dashboard")
def post_login_link(request, subject: str):
    check_params(subject=subject)
    link = mint_login_link(subject=queries.get_subject(tenant=request.auth, external_id=subject), actor=_actor(request))
    return {"url": link.url, "expires_at": iso(link.expires_at)}


# --------------------------------------------------------------------------- policy


def _policy_json(view) -> dict:
    return {"predicate": view.predicate, "cardinality": view.cardinality, "stakes": view.stakes,
            "authority": view.authority, "ttl_seconds": view.ttl_seconds, "classified": view.classified,
            "origin": view.origin, "recorded_at": iso(view.recorded_at)}


@router.get("/predicates", summary="Predicate policies: catalogue, registered and unclassified")
def get_predicates(request):
    views = policy_views_at(tenant_id=request.auth.id, at=timezone.now())
    return {"predicates": [_policy_json(v) for v in views],
            "unclassified": [v.predicate for v in views if not v.classified]}


@router.get("/predicates/{name}", summary="One predicate's policy now: registered, from the catalogue, or unclassified")
def get_predicate(request, name: str):
    return _policy_json(policy_view_at(tenant_id=request.auth.id, predicate=name, at=timezone.now()))


@router.put("/predicates/{name}", summary="Register or change a predicate's policy",
            openapi_extra=_body_schema({"cardinality": "one", "stakes": "high", "authority": "user", "ttl_seconds": None}))
def put_predicate(request, name: str):
    body = json_body(request)
    if not isinstance(body, dict):
        raise InputError("must be an object", "body")
    summary = ledger.set_predicate_policy(
        tenant=request.auth, predicate=name, cardinality=body.get("cardinality"), stakes=body.get("stakes"),
        authority=body.get("authority", "user"), ttl_seconds=body.get("ttl_seconds"), actor=_actor(request),
    )
    view = policy_view_at(tenant_id=request.auth.id, predicate=name, at=timezone.now())
    return {**_policy_json(view), "rerun": summary}


@router.get("/source-ranking", summary="The tenant's source ranking, highest first")
def get_source_ranking(request):
    return {"ranking": list(ranking_at(tenant_id=request.auth.id, at=timezone.now()))}


@router.put("/source-ranking", summary="Change the tenant's source ranking (re-runs every key)",
            openapi_extra=_body_schema({"ranking": ["correction", "user_statement", "system_record",
                                                    "user_document", "agent_inference"]}))
def put_source_ranking(request):
    body = json_body(request)
    summary = ledger.set_source_ranking(tenant=request.auth, ranking=body.get("ranking") if isinstance(body, dict) else None,
                                        actor=_actor(request))
    return {"ranking": list(ranking_at(tenant_id=request.auth.id, at=timezone.now())), "rerun": summary}


__all__ = ["router", "TenantKey", "NotFound", "json_body"]
