"""Sign-in for end users: one-time links and the account that ties a Django
user to exactly one subject of one tenant (issue 4, "Sign-in").

A link's token is shown once; only its SHA-256 is stored
(:class:`~facts.models.LoginLink`). Using a link is single-use, refused
after ``expires_at``, and recorded in the event log (``login_link.used`` or
``login_link.refused``; the log holds ids, never the token).
"""
from __future__ import annotations


from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from facts.access import token_hash
from facts.models import Event, LoginLink, Subject, SubjectAccount



class LinkRefused(Exception):
    """The link does not exist, was used already or has expired. ``reason``
    is ``unknown``, ``used`` or ``expired``; the page says the same thing
    for all three so a guesser learns nothing."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def peek_login_link(*, token: str) -> Subject:
    """The subject a still-usable link signs in to, without using it (the
    page that asks "continue as …?"). Raises :class:`LinkRefused`."""
    link = LoginLink.objects.select_related("subject").filter(token_hash=token_hash(token)).first()
    if link is None:
        raise LinkRefused("unknown")
    if link.used_at is not None:
        raise LinkRefused("used")
    if link.expires_at <= timezone.now():
        raise LinkRefused("expired")
    return link.subject


def use_login_link(*, token: str, remote_addr: str = "") -> AbstractBaseUser:
    """Consume a one-time link and return the Django user of its subject,
    creating the user and its :class:`SubjectAccount` on first use.

    Single use under concurrency: the link row is locked, and ``used_at`` is
    set in the same transaction as the ``login_link.used`` event. A used or
    expired link records ``login_link.refused`` and raises
    :class:`LinkRefused`; an unknown token raises it without writing.
    """
    now = timezone.now()
    with transaction.atomic():
        link = (LoginLink.objects.select_for_update().select_related("subject")
                .filter(token_hash=token_hash(token)).first())
        if link is None:
            raise LinkRefused("unknown")
        reason = "used" if link.used_at is not None else "expired" if link.expires_at <= now else ""
        if link.subject.erased_at is not None:
            reason = reason or "erased"
        if reason:
            Event.objects.create(tenant_id=link.tenant_id, subject_id=link.subject_id, type="login_link.refused",
                                 actor="end-user", at=now, data={"login_link_id": link.id, "reason": reason,
                                                                  "remote_addr": remote_addr})
        else:
            LoginLink.objects.filter(pk=link.pk).update(used_at=now)
            user = account_user(subject=link.subject)
            Event.objects.create(tenant_id=link.tenant_id, subject_id=link.subject_id, type="login_link.used",
                                 actor=f"user:{user.pk}", at=now,
                                 data={"login_link_id": link.id, "remote_addr": remote_addr})
    if reason:
        raise LinkRefused(reason)
    return user


def account_user(*, subject: Subject) -> AbstractBaseUser:
    """The Django user linked to ``subject``, created (without a usable
    password; it signs in by link) when there is none."""
    account = SubjectAccount.objects.select_related("user").filter(subject=subject).first()
    if account is not None:
        return account.user
    user = get_user_model().objects.create(username=f"subject-{subject.pk}")
    user.set_unusable_password()
    user.save(update_fields=["password"])
    SubjectAccount.objects.create(user=user, tenant_id=subject.tenant_id, subject=subject)
    return user


def subject_of(*, user: AbstractBaseUser) -> Subject | None:
    """The subject an end user may see (with its tenant), or ``None`` for a
    user without a :class:`SubjectAccount` (staff) or an anonymous one."""
    if not user.is_authenticated:
        return None
    account = (SubjectAccount.objects.select_related("subject", "subject__tenant")
               .filter(user_id=user.pk).first())
    return account.subject if account else None
