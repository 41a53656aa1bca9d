"""Sending events the way a real agent backend does.

A :class:`Sender` posts ``fact.asserted`` envelopes either as signed
Standard Webhooks to ``POST /webhooks/<slug>/`` (mode ``webhook``: headers
``webhook-id``, ``webhook-timestamp``, ``webhook-signature`` signed with the
tenant's webhook secret, API.md "Authentication") or in batches to ``POST
/api/v1/assertions/batch`` with the tenant's API key (mode ``batch``). It
registers predicate policies with ``PUT /api/v1/predicates/<name>``.

Two transports carry the requests:

- :class:`InProcessTransport` (the default) uses ``django.test.Client``: no
  server is needed, yet every request goes through the URL resolver, the
  whole middleware stack and the view, exactly as over the network.
- :class:`HttpTransport` uses ``requests`` against a running server
  (``--url http://127.0.0.1:8000``).
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Protocol, Sequence

from standardwebhooks.webhooks import Webhook

from facts.importers.common import ImportEvent, PredicateRule
from facts.tenants import TenantCredentials, create_or_rotate_tenant

logger = logging.getLogger(__name__)

MODES = ("webhook", "batch")
BATCH_LIMIT = 1000


class SendError(RuntimeError):
    """The server could not be reached, answered 5xx, or answered something
    that is not JSON: the import stops (a 4xx refusal is an answer, not an
    error, and is counted by the caller)."""


class Transport(Protocol):
    """Carries one HTTP request; returns ``(status, decoded JSON body)``."""

    def request(self, method: str, path: str, *, body: bytes | None, headers: dict[str, str]) -> tuple[int, Any]:
        ...


def _decode(status: int, content: bytes, path: str) -> tuple[int, Any]:
    if status >= 500:
        raise SendError(f"{path} answered {status}: {content[:300]!r}")
    try:
        return status, json.loads(content.decode("utf-8")) if content else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise SendError(f"{path} answered {status} with a body that is not JSON: {content[:300]!r}") from None


class InProcessTransport:
    """Requests through ``django.test.Client`` in this process: the full
    middleware and view path, no server. Needs Django set up (a management
    command or a test). A server error becomes a 500 answer (logged by
    ``django.request``, as a server would), not an exception."""

    def __init__(self) -> None:
        from django.conf import settings
        from django.test import Client

        hosts = [h.lstrip(".") for h in settings.ALLOWED_HOSTS if h and h != "*"]
        self.client = Client(raise_request_exception=False, HTTP_HOST=hosts[0] if hosts else "testserver")

    def request(self, method: str, path: str, *, body: bytes | None, headers: dict[str, str]) -> tuple[int, Any]:
        response = self.client.generic(method, path, data=body or b"", content_type="application/json",
                                       headers=headers)
        return _decode(response.status_code, response.content, path)


class HttpTransport:
    """Requests over HTTP to ``base_url`` (e.g. ``http://127.0.0.1:8000``)
    with one keep-alive ``requests`` session; ``timeout`` in seconds."""

    def __init__(self, base_url: str, *, timeout: float = 120.0) -> None:
        import requests

        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.session = requests.Session()

    def request(self, method: str, path: str, *, body: bytes | None, headers: dict[str, str]) -> tuple[int, Any]:
        import requests

        try:
            response = self.session.request(method, self.base_url + path, data=body,
                                            headers={"Content-Type": "application/json", **headers},
                                            timeout=self.timeout)
        except requests.RequestException as exc:
            raise SendError(f"{method} {self.base_url}{path} failed: {exc}") from exc
        return _decode(response.status_code, response.content, path)


def signed_headers(*, secret: str, webhook_id: str, body: str, timestamp: datetime | None = None) -> dict[str, str]:
    """Standard Webhooks headers for ``body`` (the exact text that will be
    posted): ``webhook-id``, ``webhook-timestamp`` (Unix seconds, default
    now) and ``webhook-signature`` (``v1,<base64 HMAC-SHA256>`` over
    ``"{id}.{timestamp}.{body}"`` with the ``whsec_`` secret). Raises
    ``ValueError`` for a malformed secret."""
    timestamp = timestamp or datetime.now(timezone.utc)
    signature = Webhook(secret).sign(webhook_id, timestamp, body)
    return {"webhook-id": webhook_id, "webhook-timestamp": str(int(timestamp.timestamp())),
            "webhook-signature": signature}


def tenant_credentials(*, slug: str, api_key: str | None = None, webhook_secret: str | None = None) -> TenantCredentials:
    """The credentials to send with: the given ``api_key`` and
    ``webhook_secret`` when both are passed, else the tenant is created (or
    its credentials rotated: older API keys stop working, the older webhook
    secret stays valid for its overlap) through :mod:`facts.tenants`, which
    needs this process to reach the tenant's database. Raises
    ``ValueError`` when only one of the two is passed."""
    if api_key and webhook_secret:
        return TenantCredentials(slug=slug, api_key=api_key, webhook_secret=webhook_secret)
    if api_key or webhook_secret:
        raise ValueError("pass both --api-key and --secret, or neither (then the tenant's credentials are rotated)")
    return create_or_rotate_tenant(slug=slug)


@dataclass
class Sender:
    """Posts events for one tenant through ``transport`` in ``mode``
    (``webhook`` or ``batch``)."""

    transport: Transport
    credentials: TenantCredentials
    mode: str = "webhook"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")

    # ------------------------------------------------------------------ API

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """``/api/v1`` + ``path`` with the tenant's bearer key; returns
        ``(status, JSON)``."""
        raw = None if body is None else json.dumps(body).encode()
        return self.transport.request(method, f"/api/v1{path}", body=raw,
                                      headers={"Authorization": f"Bearer {self.credentials.api_key}"})

    def _checked(self, method: str, path: str, body: Any = None) -> Any:
        status, payload = self.api(method, path, body)
        if status != 200:
            raise SendError(f"{method} /api/v1{path} answered {status}: {payload}")
        return payload

    def ensure_predicates(self, predicates: dict[str, PredicateRule]) -> int:
        """Register each predicate's policy unless the tenant's current
        policy already equals it (so a re-run adds no policy versions).
        Returns how many were registered or changed. Raises
        :class:`SendError` on any non-200 answer."""
        current = {p["predicate"]: p for p in self._checked("GET", "/predicates")["predicates"]}
        changed = 0
        for name, rule in sorted(predicates.items()):
            have = current.get(name)
            wanted = rule.as_body()
            if have is not None and have.get("classified") and all(have.get(k) == v for k, v in wanted.items()):
                continue
            self._checked("PUT", f"/predicates/{name}", wanted)
            changed += 1
            logger.info("import.predicate_registered", extra={"predicate": name, **wanted})
        return changed

    # ------------------------------------------------------------------ events

    def send_webhook(self, envelope: Any, *, webhook_id: str, timestamp: datetime | None = None) -> tuple[int, Any]:
        """Sign ``envelope`` (any JSON value) with the tenant's webhook secret
        and post it to ``/webhooks/<slug>/``. Returns ``(status, JSON)``."""
        body = json.dumps(envelope, separators=(",", ":"))
        headers = signed_headers(secret=self.credentials.webhook_secret, webhook_id=webhook_id, body=body,
                                 timestamp=timestamp)
        return self.transport.request("POST", f"/webhooks/{self.credentials.slug}/", body=body.encode(), headers=headers)

    def send(self, events: Sequence[ImportEvent]) -> list[dict]:
        """Send ``events`` in order; returns one result per event, in order:
        ``{"id", "status", ...}`` plus the API.md response body (200) or the
        ``{"detail", "field"}`` refusal (4xx). Batch mode splits into
        requests of at most 1,000 events. Raises :class:`SendError` when the
        server cannot be reached or fails."""
        if self.mode == "webhook":
            results = []
            for event in events:
                status, payload = self.send_webhook(event.envelope, webhook_id=event.id)
                results.append({"id": event.id, "status": status, **(payload if isinstance(payload, dict) else {})})
            return results
        results = []
        for start in range(0, len(events), BATCH_LIMIT):
            chunk = events[start:start + BATCH_LIMIT]
            status, payload = self.api("POST", "/assertions/batch",
                                       {"events": [{"id": e.id, **e.envelope} for e in chunk]})
            if status != 200:
                results.extend({"id": e.id, "status": status, **(payload or {})} for e in chunk)
                continue
            results.extend(payload["results"])
        return results


def make_sender(*, credentials: TenantCredentials, mode: str = "webhook", url: str | None = None) -> Sender:
    """A :class:`Sender` over HTTP to ``url``, or in-process when ``url`` is
    ``None``. Raises ``ValueError`` for an unknown mode."""
    transport: Transport = HttpTransport(url) if url else InProcessTransport()
    return Sender(transport=transport, credentials=credentials, mode=mode)
