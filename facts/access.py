"""One-time sign-in links to a subject's dashboard (API.md
``POST /api/v1/subjects/<subject>/login-link``).

A link's token is shown once; only its SHA-256 is stored
(:class:`~facts.models.LoginLink`); minting is recorded in the event log as
``login_link.created`` (ids only, never the token). Using a link lives with
the pages that sign people in (``dashboard/accounts.py``).
"""
from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from facts.models import Event, LoginLink, Subject

LOGIN_LINK_SECONDS = 15 * 60


@dataclass(frozen=True)
class MintedLink:
    url: str
    expires_at: datetime


def token_hash(token: str) -> str:
    """SHA-256 hex of a raw link token (what :class:`LoginLink` stores)."""
    return hashlib.sha256(token.encode()).hexdigest()


def mint_login_link(*, subject: Subject, actor: str, seconds: int = LOGIN_LINK_SECONDS) -> MintedLink:
    """Create a one-time sign-in link to ``subject``'s dashboard, valid for
    ``seconds`` (default 15 minutes), and record ``login_link.created``."""
    token = secrets.token_urlsafe(32)
    now = timezone.now()
    with transaction.atomic():
        link = LoginLink.objects.create(tenant_id=subject.tenant_id, subject=subject, created_at=now,
                                        token_hash=token_hash(token), expires_at=now + timedelta(seconds=seconds))
        Event.objects.create(tenant_id=subject.tenant_id, subject=subject, type="login_link.created", actor=actor,
                             at=now, data={"login_link_id": link.id})
    return MintedLink(url=f"{settings.MEMORYUI_PUBLIC_URL}/login/{token}/", expires_at=link.expires_at)
