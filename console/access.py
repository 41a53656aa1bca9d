"""Who may see which console page (issue 5, "Roles").

Every console URL starts with the tenant's slug. A support agent or tenant
admin sees their own tenant only: another tenant's slug, or an id that
belongs to another tenant, is 404 (not 403), so ids leak nothing. Signed in
without a membership (an end user): 403. Anonymous: the console's sign-in
page. Superusers see every tenant with admin rights.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest
from django.shortcuts import render
from django.urls import reverse

from console.models import StaffMembership
from facts.errors import NotFound
from facts.models import Tenant

RANK = {StaffMembership.AGENT: 1, StaffMembership.ADMIN: 2}


@dataclass(frozen=True)
class Staff:
    """The signed-in staff member as the console sees them."""

    tenant: Tenant
    role: str
    actor: str
    superuser: bool

    @property
    def is_admin(self) -> bool:
        return self.role == StaffMembership.ADMIN


def staff_for(*, user, tenant_slug: str) -> Staff | None:
    """The user's console rights in the tenant ``tenant_slug``; ``None``
    when they have none there (or the tenant does not exist)."""
    if user.is_superuser:
        tenant = Tenant.objects.filter(slug=tenant_slug).first()
        return Staff(tenant, StaffMembership.ADMIN, user.get_username(), True) if tenant else None
    membership = StaffMembership.objects.filter(user=user, tenant__slug=tenant_slug).select_related("tenant").first()
    if membership is None:
        return None
    return Staff(membership.tenant, membership.role, user.get_username(), False)


def is_staff_user(user) -> bool:
    return user.is_authenticated and (user.is_superuser or StaffMembership.objects.filter(user=user).exists())


def console_view(role: str = StaffMembership.AGENT):
    """Decorate a console view taking ``tenant_slug``: sets
    ``request.staff`` and ``request.console_tenant`` and turns
    :class:`NotFound` into 404. ``role`` is the least role allowed."""

    def decorate(view):
        @wraps(view)
        def wrapper(request: HttpRequest, tenant_slug: str, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path(), reverse("console:login"))
            if not is_staff_user(request.user):
                return render(request, "console/forbidden.html", {"reason": "not_staff"}, status=403)
            staff = staff_for(user=request.user, tenant_slug=tenant_slug)
            if staff is None:
                raise Http404("no such tenant")
            request.staff = staff
            request.console_tenant = staff.tenant
            if RANK[staff.role] < RANK[role]:
                return render(request, "console/forbidden.html", {"reason": "role", "staff": staff}, status=403)
            try:
                return view(request, *args, **kwargs)
            except NotFound:
                raise Http404("not found") from None

        return wrapper

    return decorate
