"""The audit log (issue 5, "Audit log of every staff and end-user
action").

Decision: one middleware records every state-changing request (POST, PUT,
PATCH, DELETE) made by a signed-in person, in the console, the dashboard and
the admin alike, after the response is known. Nothing has to remember to
call it, so a new view cannot forget to be audited; views add a summary of
what they did through :func:`note` (ids, counts; never personal values).
The API and inbound webhooks are machine calls, authenticated by key or
signature and already in the event log, so they are not audited here. A
console sign-in that fails is recorded too (the name tried, never the
password), under the tenant of the staff account of that name.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from console.models import AuditEntry, StaffMembership
from facts.models import Tenant

logger = logging.getLogger(__name__)

WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")


def note(request: HttpRequest, **detail: Any) -> None:
    """Add ``detail`` (JSON-able ids and counts) to the audit entry of this request."""
    request.audit_detail = {**getattr(request, "audit_detail", {}), **detail}


def client_ip(request: HttpRequest) -> str | None:
    """The client's address as the server saw it (``REMOTE_ADDR``). Behind a
    proxy, configure the proxy to set it; forwarded headers are not trusted."""
    return request.META.get("REMOTE_ADDR") or None


def _who(user) -> tuple[str, str, int | None]:
    """(actor, role, tenant id) of a signed-in user."""
    if user.is_superuser:
        return user.get_username(), "superuser", None
    membership = StaffMembership.objects.filter(user=user).first()
    if membership is not None:
        return user.get_username(), membership.role, membership.tenant_id
    account = getattr(user, "subject_account", None)
    if account is not None:
        return f"user:{user.pk}", "end_user", account.tenant_id
    return user.get_username(), "user", None


def record(*, request: HttpRequest, response: HttpResponse, user) -> AuditEntry:
    """Write one :class:`AuditEntry` for ``request`` by ``user``."""
    actor, role, tenant_id = _who(user)
    tenant = getattr(request, "console_tenant", None)
    return _write(request, response, tenant_id=tenant.id if tenant is not None else tenant_id, user=user, actor=actor,
                  role=role, detail=getattr(request, "audit_detail", {}))


def _write(request: HttpRequest, response: HttpResponse, *, tenant_id: int | None, user, actor: str, role: str,
           detail: dict) -> AuditEntry:
    """The entry of ``request``: its route as the action, its path (a
    sign-in link's secret replaced, even once used), method, status and
    client address, now."""
    match = getattr(request, "resolver_match", None)
    action = f"{match.namespace}:{match.url_name}" if match and match.namespace else (match.url_name if match else "")
    path = request.path
    if match and "token" in match.kwargs:
        path = path.replace(match.kwargs["token"], "[token]")
    return AuditEntry.objects.create(
        tenant_id=tenant_id, user=user, actor=actor, role=role, action=action or "unknown", method=request.method,
        path=path[:500], status_code=response.status_code, ip=client_ip(request), detail=detail, at=timezone.now(),
    )


class AuditMiddleware:
    """Records state-changing requests by signed-in people (see module doc).
    Place after the authentication middleware."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method not in WRITE_METHODS:
            return self.get_response(request)
        before = request.user if request.user.is_authenticated else None
        response = self.get_response(request)
        user = before or (request.user if request.user.is_authenticated else None)
        try:
            if user is not None:
                record(request=request, response=response, user=user)
            elif _is_console_sign_in(request):
                record_refused_sign_in(request=request, response=response)
        except Exception:  # the audit must never turn a done action into an error page
            logger.exception("audit.write_failed", extra={"path": request.path})
        return response


def _is_console_sign_in(request: HttpRequest) -> bool:
    match = getattr(request, "resolver_match", None)
    return bool(match and match.namespace == "console" and match.url_name == "login")


def record_refused_sign_in(*, request: HttpRequest, response: HttpResponse) -> AuditEntry:
    """Write the :class:`AuditEntry` of a console sign-in that left nobody
    signed in: the name tried (never the password), from where, and the
    tenant of the staff account of that name, if there is one, so that the
    tenant's admins see attempts on their accounts."""
    name = str(request.POST.get("username", ""))[:200]
    tenant_id = StaffMembership.objects.filter(user__username=name).values_list("tenant_id", flat=True).first()
    return _write(request, response, tenant_id=tenant_id, user=None, actor=name, role="anonymous",
                  detail={"outcome": "refused"})


def entries(*, tenant: Tenant, actor: str = "", action: str = "", role: str = "", since=None, until=None,
            limit: int | None = 200):
    """The tenant's audit entries, newest first, filtered (``since``/``until``: UTC dates, until exclusive)."""
    qs = AuditEntry.objects.filter(tenant=tenant)
    if actor:
        qs = qs.filter(actor__icontains=actor)
    if action:
        qs = qs.filter(action__icontains=action)
    if role:
        qs = qs.filter(role=role)
    if since:
        qs = qs.filter(at__date__gte=since)
    if until:
        qs = qs.filter(at__date__lt=until)
    qs = qs.order_by("-at", "-id")
    return qs[:limit] if limit else qs


CSV_COLUMNS = ("at", "actor", "role", "action", "method", "path", "status_code", "ip", "detail")


def csv_rows(queryset):
    """Rows for the CSV export (header first)."""
    import json

    yield CSV_COLUMNS
    for e in queryset.iterator():
        yield (e.at.isoformat(), e.actor, e.role, e.action, e.method, e.path, e.status_code, e.ip or "",
               json.dumps(e.detail, sort_keys=True))
