"""Shared fixtures: tenants with credentials, a signed-webhook client, an
API client. Tests run against the real PostgreSQL and Redis named by
``DATABASE_URL`` / ``REDIS_URL``."""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone

import pytest
from django.test import Client
from standardwebhooks.webhooks import Webhook

from facts.tenants import create_or_rotate_tenant


@dataclass
class TenantClient:
    """Talks to memoryui as one agent backend: signed webhooks and the API."""

    client: Client
    slug: str
    api_key: str
    webhook_secret: str

    @property
    def tenant(self):
        from facts.models import Tenant

        return Tenant.objects.get(slug=self.slug)

    def signed_headers(self, body: str, *, webhook_id: str | None = None, timestamp: datetime | None = None,
                       secret: str | None = None) -> dict:
        webhook_id = webhook_id or f"msg_{uuid.uuid4().hex}"
        timestamp = timestamp or datetime.now(timezone.utc)
        signature = Webhook(secret or self.webhook_secret).sign(webhook_id, timestamp, body)
        return {"webhook-id": webhook_id, "webhook-timestamp": str(int(timestamp.timestamp())),
                "webhook-signature": signature}

    def webhook(self, event_type: str, data, *, webhook_id: str | None = None, raw_body: str | None = None, **kw):
        body = raw_body if raw_body is not None else json.dumps(
            {"type": event_type, "timestamp": "2026-01-01T00:00:00Z", "data": data})
        headers = self.signed_headers(body, webhook_id=webhook_id, **kw)
        return self.client.post(f"/webhooks/{self.slug}/", body, content_type="application/json", headers=headers)

    def assert_fact(self, data: dict, **kw) -> dict:
        response = self.webhook("fact.asserted", data, **kw)
        assert response.status_code == 200, response.content
        return response.json()

    def api(self, method: str, path: str, body=None, **params):
        kwargs = {"headers": {"Authorization": f"Bearer {self.api_key}"}}
        if body is not None:
            kwargs["data"] = json.dumps(body)
            kwargs["content_type"] = "application/json"
        call = getattr(self.client, method.lower())
        if params:
            from urllib.parse import urlencode

            path = f"{path}?{urlencode(params)}"
        return call(f"/api/v1{path}", **kwargs)

    def get(self, path: str, **params) -> dict:
        response = self.api("GET", path, **params)
        assert response.status_code == 200, response.content
        return response.json()


def make_tenant_client(slug: str | None = None) -> TenantClient:
    creds = create_or_rotate_tenant(slug=slug or f"t-{uuid.uuid4().hex[:10]}")
    return TenantClient(Client(), creds.slug, creds.api_key, creds.webhook_secret)


@pytest.fixture
def agent(db) -> TenantClient:
    return make_tenant_client()


@pytest.fixture
def other_agent(db) -> TenantClient:
    return make_tenant_client()


# One session-wide browser for every browser test (a second sync Playwright
# in the same session would find the first one's event loop running).
from tests.dashboard.browser import chromium, no_js_page, page  # noqa: E402,F401  (fixtures)


@pytest.fixture(autouse=True)
def _local_webhook_receivers(settings):
    """Tests run their webhook receivers on 127.0.0.1, which production
    refuses as a callback address (tests/conflicts/test_outbox.py checks
    the refusal with this turned off)."""
    settings.MEMORYUI_WEBHOOK_PRIVATE_TARGETS = True
