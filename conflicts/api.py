"""HTTP routing for prompts and outgoing webhook endpoints (API.md):
schemas and routing only; the work is in ``conflicts/actions.py``,
``conflicts/outbox.py`` and ``conflicts/queries.py``.
"""
from __future__ import annotations

from django.http import HttpRequest
from ninja import Router, Status

from conflicts import actions, outbox, queries
from facts.api import TenantKey, json_body
from facts.inputs import InputError, check_params, parse_uuid

router = Router(auth=TenantKey())


def _actor(request: HttpRequest) -> str:
    return f"api:{request.auth.slug}"


def _body_schema(example: dict) -> dict:
    return {"requestBody": {"content": {"application/json": {"schema": {"type": "object"}, "example": example}}}}


def _object_body(request: HttpRequest) -> dict:
    body = json_body(request)
    if not isinstance(body, dict):
        raise InputError("must be a JSON object", "body")
    return body


# --------------------------------------------------------------------------- prompts


@router.get("/subjects/{subject}/prompts", tags=["prompts"], summary="Clarification prompts of a subject")
def get_prompts(request, subject: str, status: str = "pending"):
    """``status``: ``pending`` (waiting for an answer, including ones
    escalated to staff; the default), ``escalated``, ``answered``,
    ``expired``, ``withdrawn`` or ``all``."""
    check_params(subject=subject, status=status)
    found = queries.prompts_for(tenant=request.auth, external_id=subject, status=status)
    return {"subject": subject, "prompts": [queries.prompt_json(p) for p in found]}


@router.get("/prompts/{prompt_id}", tags=["prompts"], summary="One clarification prompt")
def get_prompt(request, prompt_id: str):
    return queries.prompt_json(queries.get_prompt(tenant=request.auth, prompt_id=parse_uuid(prompt_id, "prompt_id")))


@router.post("/prompts/{prompt_id}/answer", tags=["prompts"], summary="Answer a clarification prompt",
             openapi_extra=_body_schema({"choice": "<assertion id>", "answered_by": "u-1842"}))
def post_answer(request, prompt_id: str):
    """``choice``: an assertion id from the options,
    ``{"value": ..., "valid_from": ...}`` ("neither, it is …") or
    ``"both"``. 409 with the prompt's state when it is answered, expired or
    withdrawn."""
    body = _object_body(request)
    if "choice" not in body:
        raise InputError("is required", "choice")
    result = actions.answer_prompt(tenant=request.auth, prompt_id=prompt_id, choice=body["choice"],
                                   answered_by=body.get("answered_by") or _actor(request))
    return {**result.write.as_body(), "prompt": queries.prompt_json(result.prompt)}


# --------------------------------------------------------------------------- outgoing webhook endpoints


@router.post("/webhook-endpoints", tags=["webhooks"], response={201: dict}, summary="Register an outgoing webhook endpoint",
             openapi_extra=_body_schema({"url": "https://agent.example/memoryui", "event_types": ["conflict.opened"]}))
def post_endpoint(request):
    """Answered with ``{"id", "secret": "whsec_..."}``; the secret signs
    every delivery (Standard Webhooks) and is shown only here."""
    body = _object_body(request)
    endpoint, secret = outbox.create_endpoint(tenant=request.auth, url=body.get("url"),
                                              event_types=body.get("event_types"))
    return Status(201, {**queries.endpoint_json(endpoint), "secret": secret})


@router.get("/webhook-endpoints", tags=["webhooks"], summary="Endpoints with their recent deliveries")
def get_endpoints(request):
    return {"endpoints": [queries.endpoint_json(e) for e in queries.endpoints(tenant=request.auth)]}


@router.delete("/webhook-endpoints/{endpoint_id}", tags=["webhooks"], summary="Remove an endpoint")
def delete_endpoint(request, endpoint_id: str):
    endpoint = outbox.delete_endpoint(tenant=request.auth, endpoint_id=parse_uuid(endpoint_id, "endpoint_id"))
    return {"id": str(endpoint.id), "status": endpoint.status}
