"""The versioned HTTP API (``/api/v1/``), its error format and OpenAPI.

Every error body is ``{"detail": "...", "field": "..."}`` (API.md).
"""
from __future__ import annotations

import logging

from django.conf import settings
from django.http import HttpRequest
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from conflicts.api import router as conflicts_router
from facts.api import router as facts_router
from facts.errors import NotFound, StateConflict
from facts.inputs import InputError

_ERROR = {"type": "object", "properties": {"detail": {"type": "string"}, "field": {"type": ["string", "null"]}}}
_SIGNATURE_HEADERS = [
    {"name": "webhook-id", "in": "header", "required": True, "schema": {"type": "string"},
     "description": "Idempotency key: a replay gets the first response again."},
    {"name": "webhook-timestamp", "in": "header", "required": True, "schema": {"type": "string"},
     "description": "Unix seconds; outside 5 minutes of the server's clock is 401."},
    {"name": "webhook-signature", "in": "header", "required": True, "schema": {"type": "string"},
     "description": "v1,<base64 HMAC-SHA256 of '{id}.{timestamp}.{body}'> with the tenant's whsec_ secret "
                    "(space-separated list during rotation)."},
]
INBOUND_WEBHOOK = {
    "post": {
        "operationId": "facts_webhooks_inbound",
        "summary": "Inbound signed webhook (Standard Webhooks): fact.asserted, fact.retracted, clarification.answered",
        "tags": ["webhooks"],
        "parameters": [{"name": "tenant_slug", "in": "path", "required": True, "schema": {"type": "string"}},
                       *_SIGNATURE_HEADERS],
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": {"type": "object", "required": ["type", "data"], "properties": {
                "type": {"enum": ["fact.asserted", "fact.retracted", "clarification.answered"]},
                "timestamp": {"type": "string", "format": "date-time"},
                "data": {"type": "object"}}},
            "example": {"type": "fact.asserted", "timestamp": "2026-03-02T09:15:00Z", "data": {
                "subject": "u-1842", "predicate": "city_of_residence", "value": "Berlin",
                "valid_from": "2026-03-01T00:00:00Z",
                "source": {"kind": "user_statement", "id": "msg-7731", "extractor": "chat-extractor@2.3"}}}}}},
        "responses": {
            "200": {"description": "The write's outcome (API.md, 'Response to every event')"},
            **{code: {"description": why, "content": {"application/json": {"schema": _ERROR}}} for code, why in (
                ("400", "malformed JSON or payload; `field` names the culprit"),
                ("401", "missing, wrong or stale signature"),
                ("404", "unknown tenant, or an id not in this tenant"),
                ("409", "the prompt was answered already or expired"),
                ("413", "body over the size limit"))},
        },
    }
}


class MemoryuiAPI(NinjaAPI):
    """The API, whose OpenAPI also describes the inbound webhook endpoint
    (a plain Django view outside ``/api/v1``, since its body is signed)."""

    def get_openapi_schema(self, *, path_prefix=None, path_params=None):
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        schema["paths"]["/webhooks/{tenant_slug}/"] = INBOUND_WEBHOOK
        return schema


api = MemoryuiAPI(title="memoryui", version="1", urls_namespace="api-v1", openapi_url="/openapi.json",
                  docs_url="/docs", description="Memory-transparency service for AI assistants: see API.md.")
api.add_router("", facts_router)
api.add_router("", conflicts_router)


@api.exception_handler(InputError)
def _input_error(request: HttpRequest, exc: InputError):
    return api.create_response(request, exc.as_body(), status=exc.status)


@api.exception_handler(NotFound)
def _not_found(request: HttpRequest, exc: NotFound):
    return api.create_response(request, {"detail": str(exc) or "not found", "field": None}, status=404)


@api.exception_handler(StateConflict)
def _state_conflict(request: HttpRequest, exc: StateConflict):
    return api.create_response(request, {"detail": exc.detail, "field": None, **exc.state}, status=409)


@api.exception_handler(AuthenticationError)
def _unauthorised(request: HttpRequest, exc: AuthenticationError):
    return api.create_response(request, {"detail": "a valid tenant API key is required", "field": "Authorization"},
                               status=401)


@api.exception_handler(ValidationError)
def _validation(request: HttpRequest, exc: ValidationError):
    first = exc.errors[0] if exc.errors else {}
    loc = [str(p) for p in first.get("loc", []) if p not in ("query", "path", "body")]
    return api.create_response(request, {"detail": first.get("msg", "invalid input"), "field": ".".join(loc) or None},
                               status=400)


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError):
    return api.create_response(request, {"detail": str(exc), "field": None}, status=exc.status_code)


@api.exception_handler(Exception)
def _server_error(request: HttpRequest, exc: Exception):
    """Anything unexpected (a bug, the database gone): logged with its
    traceback as Django logs a 500 (``django.request``), and answered in the
    API's error shape rather than Django's HTML page. With ``DEBUG`` on the
    exception goes on to Django's debug page."""
    if settings.DEBUG:
        raise exc
    logging.getLogger("django.request").error("Internal Server Error: %s", request.path, exc_info=exc,
                                              extra={"status_code": 500, "request": request})
    return api.create_response(request, {"detail": "internal server error", "field": None}, status=500)
