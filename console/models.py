"""The support console's own data: who is staff of which tenant (and in
which role), the audit log of every signed-in action, and the revocation
batches staff ran (so a batch can be listed and undone after its
assertions stop carrying the batch id).

No behaviour lives in ``save()``: writes go through ``console/services.py``
and ``console/audit.py``. Every table leads with ``tenant``.
"""
from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from facts.models import Tenant


class StaffMembership(models.Model):
    """A Django user's role in one tenant's console. ``agent``: read and
    work the review queue; ``admin``: also revocation, policy, webhooks, API
    keys and the audit log. Superusers need no membership (they see every
    tenant)."""

    AGENT = "agent"
    ADMIN = "admin"
    ROLES = [(AGENT, "support agent"), (ADMIN, "tenant admin")]

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="staff_membership")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="staff")
    role = models.CharField(max_length=8, choices=ROLES)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(role__in=["agent", "admin"]), name="staff_role")]

    def __str__(self) -> str:
        return f"{self.user} ({self.role} of {self.tenant.slug})"


class AuditEntry(models.Model):
    """One state-changing request by a signed-in person (staff or end
    user): who, what (the route's name and the view's own summary), when,
    from where (client IP), and how it ended (HTTP status). Written by
    :class:`console.audit.AuditMiddleware`; never edited."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, null=True, blank=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    actor = models.CharField(max_length=200)
    role = models.CharField(max_length=16)
    action = models.CharField(max_length=100)
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=500)
    status_code = models.PositiveSmallIntegerField()
    ip = models.GenericIPAddressField(null=True, blank=True)
    detail = models.JSONField(default=dict)
    at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["tenant", "-at"]), models.Index(fields=["tenant", "action", "-at"])]
        verbose_name_plural = "audit entries"


class Revocation(models.Model):
    """One bulk revocation: the selection staff previewed, the batch id the
    ledger's retractions carry, and its undo."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="revocations")
    criteria = models.JSONField(default=dict)
    reason = models.TextField(blank=True)
    count = models.PositiveIntegerField()
    keys = models.PositiveIntegerField()
    created_by = models.CharField(max_length=200)
    created_at = models.DateTimeField()
    undone_at = models.DateTimeField(null=True, blank=True)
    undone_by = models.CharField(max_length=200, blank=True)
    restored = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "-created_at"])]
