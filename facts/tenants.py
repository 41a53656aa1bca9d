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
    if last_used_at is None or now - last_used_at > KEY_USE_RECORDED_EVERY:
        _record_key_use(key_id, now)
    return _tenant_from(tenant_values)


def _record_key_use(key_id: int, at) -> None:
    """``last_used_at`` of the key ``key_id`` is ``at`` (callers do it at
    most once a minute: one ``UPDATE`` only then)."""
    ApiKey.objects.filter(pk=key_id).update(last_used_at=at)


_TENANT_ATTNAMES = [f.attname for f in Tenant._meta.concrete_fields]


def _tenant_from(values) -> Tenant:
    """A tenant from its columns in ``_TENANT_COLUMNS`` order."""
    return Tenant.from_db(connection.alias, _TENANT_ATTNAMES, values)


KEY_USE_RECORDED_EVERY = timedelta(minutes=1)

# The key check a read folds into its own statement (``facts/queries.py``):
# ``KEY_FROM`` in its FROM clause, ``KEY_WHERE`` in its WHERE clause,
# ``KEY_COLUMNS`` leading its row (the key's id, and whether its use is to be
# recorded), parameters :meth:`KeyCheck.params`; ``k.tenant_id`` scopes the
# rest.
KEY_FROM = f'"{ApiKey._meta.db_table}" k'
KEY_WHERE = "k.key_hash = %(key_hash)s AND k.revoked_at IS NULL"
KEY_COLUMNS = "k.id, (k.last_used_at IS NULL OR k.last_used_at < %(key_used_before)s)"


class KeyCheck:
    """A bearer key not checked yet: the hot reads (facts now, context)
    check it in the same statement that reads the facts, saving a round
    trip, with the same rules as :func:`tenant_for_api_key` (a live key
    only, never cached, ``last_used_at`` at most once a minute). Any other
    use checks it on its own with :meth:`tenant`."""

    __slots__ = ("raw", "key_hash", "_tenant", "_now")

    def __init__(self, raw: str) -> None:
        self.raw = raw
        self.key_hash = hash_key(raw)
        self._tenant: Tenant | None = None
        self._now = None

    def params(self) -> dict:
        """The folded check's parameters, as of now."""
        self._now = timezone.now()
        return {"key_hash": self.key_hash, "key_used_before": self._now - KEY_USE_RECORDED_EVERY}

    def found(self, key_id: int, record_use: bool) -> None:
        """The folded check found the key live (``KEY_COLUMNS``): record its
        use when it was last used over a minute before :meth:`params`."""
        if record_use:
            _record_key_use(key_id, self._now)

    def tenant(self) -> Tenant | None:
        """The key's tenant (:func:`tenant_for_api_key`), or ``None``."""
        if self._tenant is None:
            self._tenant = tenant_for_api_key(self.raw)
        return self._tenant


def tenant_with_secrets_statement(slug: str) -> tuple[str, list]:
    """``(sql, params)`` reading the tenant with this slug and the secrets
    that may sign its inbound webhooks now, newest first (several during a
    rotation), for a caller that sends it with other statements (the
    inbound webhook view); its rows go to :func:`tenant_with_secrets_from`."""
    return _TENANT_WITH_SECRETS_SQL, [timezone.now(), slug]


def tenant_with_secrets_from(rows: list[tuple]) -> tuple[Tenant | None, list[str]]:
    """The tenant (``None`` if there is none) and its live secrets, newest
    first, from the rows of :func:`tenant_with_secrets_statement`."""
    if not rows:
        return None, []
    return _tenant_from(rows[0][1:]), [r[0] for r in rows if r[0] is not None]


# One round trip per inbound webhook: the tenant's columns and its live
# secrets, newest first (no secret: one row with a NULL secret).
_TENANT_WITH_SECRETS_SQL = (
    "SELECT s.secret, " + ", ".join(f't."{c}"' for c in _TENANT_COLUMNS)
    + f' FROM "{Tenant._meta.db_table}" t LEFT JOIN "{WebhookSecret._meta.db_table}" s'
    + " ON s.tenant_id = t.id AND (s.expires_at IS NULL OR s.expires_at > %s)"
    + " WHERE t.slug = %s ORDER BY s.created_at DESC NULLS LAST, s.id DESC"
)
