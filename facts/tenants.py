"""Tenants, API keys and webhook secrets.

API keys are shown once and stored as SHA-256; webhook secrets follow
Standard Webhooks (``whsec_`` + base64 of 24 random bytes). Rotating a
secret keeps the previous one valid for an overlap (default 24 hours).
"""
from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection, transaction
from django.utils import timezone

from facts.models import ApiKey, Tenant, WebhookSecret

API_KEY_PREFIX = "mui_"


@dataclass(frozen=True)
class TenantCredentials:
    slug: str
    api_key: str
    webhook_secret: str

    def as_json(self) -> dict:
        return {"slug": self.slug, "api_key": self.api_key, "webhook_secret": self.webhook_secret}


def hash_key(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def new_webhook_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def create_api_key(*, tenant: Tenant, name: str = "default") -> str:
    """Create an API key for ``tenant``; returns the raw key (shown once)."""
    raw = API_KEY_PREFIX + secrets.token_urlsafe(32)
    ApiKey.objects.create(tenant=tenant, name=name, prefix=raw[:10], key_hash=hash_key(raw))
    return raw


def rotate_webhook_secret(*, tenant: Tenant, overlap: timedelta = timedelta(hours=24)) -> str:
    """Issue a new inbound webhook secret; the current ones stay valid for
    ``overlap``. Returns the new secret."""
    now = timezone.now()
    WebhookSecret.objects.filter(tenant=tenant, expires_at__isnull=True).update(expires_at=now + overlap)
    secret = new_webhook_secret()
    WebhookSecret.objects.create(tenant=tenant, secret=secret)
    return secret


def create_or_rotate_tenant(*, slug: str, name: str = "") -> TenantCredentials:
    """``manage.py create_tenant``: create the tenant, or rotate its
    credentials (older API keys revoked, older webhook secret kept for the
    overlap). Returns the new credentials."""
    with transaction.atomic():
        tenant, created = Tenant.objects.get_or_create(slug=slug, defaults={"name": name or slug})
        if not created:
            ApiKey.objects.filter(tenant=tenant, revoked_at__isnull=True).update(revoked_at=timezone.now())
        api_key = create_api_key(tenant=tenant)
        secret = rotate_webhook_secret(tenant=tenant)
        return TenantCredentials(slug=tenant.slug, api_key=api_key, webhook_secret=secret)


# One round trip: the key's liveness and its tenant's columns, without the
# ORM's query compilation (every API request pays for this).
_TENANT_COLUMNS = [f.column for f in Tenant._meta.concrete_fields]
_TENANT_FOR_KEY_SQL = (
    "SELECT k.id, k.last_used_at, " + ", ".join(f't."{c}"' for c in _TENANT_COLUMNS)
    + f' FROM "{ApiKey._meta.db_table}" k JOIN "{Tenant._meta.db_table}" t ON t.id = k.tenant_id'
    + " WHERE k.key_hash = %s AND k.revoked_at IS NULL"
)


def tenant_for_api_key(raw: str) -> Tenant | None:
    """The tenant of a live API key, or ``None`` (unknown or revoked key).

    Looked up on every request, in one query, never cached: a revocation
    takes effect on the next request (API.md, "Authentication"). Records
    ``last_used_at`` at most once a minute (a second query only then)."""
    if not raw:
        return None
    with connection.cursor() as cursor:
        cursor.execute(_TENANT_FOR_KEY_SQL, [hash_key(raw)])
        row = cursor.fetchone()
    if row is None:
        return None
    key_id, last_used_at, *tenant_values = row
    now = timezone.now()
    if last_used_at is None or now - last_used_at > timedelta(minutes=1):
        ApiKey.objects.filter(pk=key_id).update(last_used_at=now)
    return Tenant.from_db(connection.alias, [f.attname for f in Tenant._meta.concrete_fields], tenant_values)


def tenant_with_secrets(slug: str) -> tuple[Tenant | None, list[str]]:
    """The tenant with this slug (``None`` if there is none) and the secrets
    that may sign its inbound webhooks now, newest first (several during a
    rotation). One query; a tenant without a live secret costs a second."""
    now = timezone.now()
    rows = list(WebhookSecret.objects.select_related("tenant").filter(tenant__slug=slug)
                .exclude(expires_at__lte=now).order_by("-created_at"))
    if rows:
        return rows[0].tenant, [r.secret for r in rows]
    return Tenant.objects.filter(slug=slug).first(), []
