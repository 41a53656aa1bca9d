"""The versioned HTTP API (``/api/v1/``), its error format and OpenAPI.

Every error body is ``{"detail": "...", "field": "..."}`` (API.md).
"""
from __future__ import annotations

from django.http import HttpRequest
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from conflicts.api import router as conflicts_router
from facts.api import router as facts_router
from facts.errors import NotFound, StateConflict
from facts.inputs import InputError

api = NinjaAPI(title="memoryui", version="1", urls_namespace="api-v1", openapi_url="/openapi.json",
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
