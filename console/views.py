"""The support console's pages (issue 5). Thin views: access in
``console/access.py``, logic in ``console/services.py`` and
``console/metrics.py``, the audit entry written by
``console.audit.AuditMiddleware`` (views add a summary with
:func:`console.audit.note`). One template per page; htmx requests get a
named partial."""
from __future__ import annotations

import csv
import uuid

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from console import audit, metrics, services
from console.access import console_view, is_staff_user
from console.forms import (
    AuditFilterForm, DecisionForm, DeliveryFilterForm, KeyForm, PolicyForm, RankingForm, RevokeForm, RotateForm,
    SearchForm, SelectionForm,
)
from console.models import StaffMembership
from console.templatetags.console_ids import id_tail
from conflicts import actions as conflict_actions
from conflicts.models import ReviewTask
from facts.errors import StateConflict
from facts.inputs import InputError

ADMIN = StaffMembership.ADMIN


class LoginView(auth_views.LoginView):
    template_name = "console/login.html"
    redirect_authenticated_user = True

    def get_default_redirect_url(self):
        return reverse("console:index")


def _url(request: HttpRequest, name: str, *args) -> str:
    return reverse(f"console:{name}", args=(request.staff.tenant.slug, *args))


@require_GET
def index(request: HttpRequest) -> HttpResponse:
    """Staff go to their tenant's overview; superusers pick a tenant."""
    from django.contrib.auth.views import redirect_to_login

    from facts.models import Tenant

    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path(), reverse("console:login"))
    if not is_staff_user(request.user):
        return render(request, "console/forbidden.html", {"reason": "not_staff"}, status=403)
    if not request.user.is_superuser:
        return redirect("console:overview", request.user.staff_membership.tenant.slug)
    return render(request, "console/tenants.html", {"tenants": Tenant.objects.order_by("slug")})


@require_GET
@console_view()
def overview(request: HttpRequest) -> HttpResponse:
    """The first screen: the conflict rate, the queue, the charts."""
    tenant = request.staff.tenant
    m = metrics.tenant_metrics(tenant=tenant)
    return render(request, "console/overview.html", {
        "m": m, "queue_count": services.conflict_queries.review_queue_size(tenant=tenant),
        "queue": services.conflict_queries.review_queue(tenant=tenant, limit=5),
        "resolved_share": metrics.share(m.resolved_by),
        "search_form": SearchForm(),
    })


# --------------------------------------------------------------------------- subjects


@require_GET
@console_view()
def subjects(request: HttpRequest) -> HttpResponse:
    form = SearchForm(request.GET or None)
    q = form.cleaned_data["q"] if form.is_valid() else ""
    found = services.search_subjects(tenant=request.staff.tenant, q=q)
    context = {"form": form, "q": q, "found": found}
    if request.htmx:
        return render(request, "console/subjects.html#results", context)
    return render(request, "console/subjects.html", context)


@require_GET
@console_view()
def subject(request: HttpRequest, external_id: str) -> HttpResponse:
    file = services.subject_file(tenant=request.staff.tenant, external_id=external_id)
    return render(request, "console/subject.html", {"file": file, "s": file.subject})


# --------------------------------------------------------------------------- review queue


@require_GET
@console_view()
def queue(request: HttpRequest) -> HttpResponse:
    status = "done" if request.GET.get("status") == "done" else "open"
    tasks = services.conflict_queries.review_queue(tenant=request.staff.tenant, status=status)
    return render(request, "console/queue.html", {"tasks": tasks, "status": status})


def _task_context(request: HttpRequest, task_id: uuid.UUID, form: DecisionForm | None = None) -> dict:
    task = services.get_task(tenant=request.staff.tenant, task_id=task_id)
    return {"task": task, "evidence": services.task_evidence(task=task), "form": form or DecisionForm(),
            "candidates": services.task_candidates(task=task),
            "needs_choice": task.kind == ReviewTask.ESCALATED_PROMPT}


@require_GET
@console_view()
def task(request: HttpRequest, task_id: uuid.UUID) -> HttpResponse:
    return render(request, "console/task.html", _task_context(request, task_id))


@require_POST
@console_view()
def decide(request: HttpRequest, task_id: uuid.UUID) -> HttpResponse:
    """Confirm or reject a review item with a note; the decision is a
    correction or a retraction through the ledger (conflicts.actions)."""
    form = DecisionForm(request.POST)
    context = _task_context(request, task_id, form)
    if form.is_valid():
        d = form.cleaned_data
        try:
            outcome = conflict_actions.decide_review_task(
                tenant=request.staff.tenant, task_id=str(task_id), decision=d["decision"], note=d["note"],
                actor=request.staff.actor, choice=d["choice"] or None)
        except InputError as exc:
            form.add_error(None, f"{exc.field}: {exc.detail}" if exc.field else exc.detail)
        except StateConflict as exc:
            form.add_error(None, str(exc))
            return render(request, "console/task.html", context, status=409)
        else:
            audit.note(request, task_id=str(task_id), decision=d["decision"],
                       result=outcome.write.outcome if outcome.write else "policy")
            verb = "Confirmed" if d["decision"] == "confirm" else "Rejected"
            if outcome.write is not None and outcome.write.outcome == "overruled":
                # A correction still loses to a system of record that owns
                # the predicate (DESIGN.md, write rule step 4).
                messages.warning(request, f"{verb}: recorded through the ledger, but the current answer has not "
                                          f"changed: {outcome.write.rule} still decides it. Change the system of "
                                          f"record to change the answer.")
            else:
                messages.success(request, f"{verb}: recorded through the ledger. The person's memory now reflects it.")
            return redirect(_url(request, "task", task_id))
    return render(request, "console/task.html", context, status=400)


# --------------------------------------------------------------------------- bulk revocation


@require_GET
@console_view()
def revocations(request: HttpRequest) -> HttpResponse:
    """The selection form; with criteria, the preview (htmx: the partial)."""
    form = SelectionForm(request.GET or None)
    preview = None
    if form.is_bound and form.is_valid():
        preview = services.preview_revocation(tenant=request.staff.tenant, selection=form.selection())
    context = {"form": form, "preview": preview, "query": request.GET,
               "batches": services.revocations(tenant=request.staff.tenant)}
    if request.htmx:
        return render(request, "console/revocations.html#preview", context)
    return render(request, "console/revocations.html", context, status=400 if form.is_bound and not form.is_valid() else 200)


@require_POST
@console_view(ADMIN)
def revoke(request: HttpRequest) -> HttpResponse:
    form = RevokeForm(request.POST)
    if form.is_valid():
        try:
            revocation = services.revoke(tenant=request.staff.tenant, selection=form.selection(),
                                         reason=form.cleaned_data["reason"],
                                         actor=services.staff_actor(request.staff.actor),
                                         expected=form.cleaned_data["expected"])
        except StateConflict as exc:
            form.add_error(None, f"The selection now matches {exc.state['count']} assertions, not "
                                 f"{exc.state['expected']}. Check the new preview and revoke again.")
        except InputError as exc:
            form.add_error(None, exc.detail)
        else:
            audit.note(request, batch_id=str(revocation.id), count=revocation.count, criteria=revocation.criteria)
            messages.success(request, f"Revoked {revocation.count} assertions on {revocation.keys} keys "
                                      f"(batch …{id_tail(revocation.id)}). Undo restores them.")
            return redirect(_url(request, "revocation", revocation.id))
    selection_form = SelectionForm(request.POST)
    preview = services.preview_revocation(tenant=request.staff.tenant, selection=selection_form.selection()) \
        if selection_form.is_valid() else None
    return render(request, "console/revocations.html", {
        "form": selection_form, "revoke_form": form, "preview": preview, "query": request.POST,
        "batches": services.revocations(tenant=request.staff.tenant)}, status=400)


@require_GET
@console_view()
def revocation(request: HttpRequest, batch_id: uuid.UUID) -> HttpResponse:
    tenant = request.staff.tenant
    batch = services.get_revocation(tenant=tenant, batch_id=batch_id)
    return render(request, "console/revocation.html", {
        "batch": batch, "rows": services.revocation_history(tenant=tenant, batch_id=batch_id)})


@require_POST
@console_view(ADMIN)
def undo_revocation(request: HttpRequest, batch_id: uuid.UUID) -> HttpResponse:
    try:
        batch = services.undo_revocation(tenant=request.staff.tenant, batch_id=batch_id,
                                         actor=services.staff_actor(request.staff.actor))
    except StateConflict:
        messages.error(request, "This revocation was already undone. Nothing changed.")
        return redirect(_url(request, "revocation", batch_id))
    audit.note(request, batch_id=str(batch_id), restored=batch.restored)
    messages.success(request, f"Undone: {batch.restored} assertions are believed again from now. "
                              "History keeps the retraction and the restoration.")
    return redirect(_url(request, "revocation", batch_id))


# --------------------------------------------------------------------------- policy


def _policy_context(request: HttpRequest, **extra) -> dict:
    tenant = request.staff.tenant
    rows = services.policies(tenant=tenant)
    ranking = services.current_ranking(tenant=tenant)
    return {"rows": rows, "unclassified": [r for r in rows if not r["view"].classified],
            "ranking": ranking, "ranking_form": extra.pop("ranking_form", None) or RankingForm(initial_ranking=ranking),
            "policy_form": extra.pop("policy_form", None) or PolicyForm(), **extra}


@require_GET
@console_view(ADMIN)
def policy(request: HttpRequest) -> HttpResponse:
    return render(request, "console/policy.html", _policy_context(request))


@require_POST
@console_view(ADMIN)
def set_policy(request: HttpRequest) -> HttpResponse:
    form = PolicyForm(request.POST)
    if form.is_valid():
        try:
            summary = services.set_policy(tenant=request.staff.tenant, actor=services.staff_actor(request.staff.actor),
                                          **form.cleaned_data)
        except InputError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.detail)
        else:
            audit.note(request, **summary)
            return render(request, "console/policy.html", _policy_context(request, summary=summary))
    return render(request, "console/policy.html", _policy_context(request, policy_form=form), status=400)


@require_POST
@console_view(ADMIN)
def set_ranking(request: HttpRequest) -> HttpResponse:
    form = RankingForm(request.POST)
    if form.is_valid():
        summary = services.ledger.set_source_ranking(tenant=request.staff.tenant, ranking=form.cleaned_data["ranking"],
                                                     actor=services.staff_actor(request.staff.actor))
        audit.note(request, ranking=form.cleaned_data["ranking"], **summary)
        return render(request, "console/policy.html", _policy_context(request, summary={"predicate": "source ranking", **summary}))
    return render(request, "console/policy.html", _policy_context(request, ranking_form=form), status=400)


# --------------------------------------------------------------------------- webhooks and keys


def _webhooks_context(request: HttpRequest, **extra) -> dict:
    tenant = request.staff.tenant
    filters = DeliveryFilterForm(request.GET or None)
    f = filters.cleaned_data if filters.is_valid() else {}
    return {"endpoints": services.endpoints(tenant=tenant), "secrets": services.inbound_secrets(tenant=tenant),
            "now": timezone.now(),
            "filters": filters, "rotate_form": extra.pop("rotate_form", None) or RotateForm(),
            "deliveries": services.deliveries(tenant=tenant, status=f.get("status", ""),
                                              event_type=f.get("event_type", ""), endpoint_id=f.get("endpoint")),
            **extra}


@require_GET
@console_view(ADMIN)
def webhooks(request: HttpRequest) -> HttpResponse:
    context = _webhooks_context(request)
    if request.htmx:
        return render(request, "console/webhooks.html#deliveries", context)
    return render(request, "console/webhooks.html", context)


@require_POST
@console_view(ADMIN)
def rotate_secret(request: HttpRequest) -> HttpResponse:
    form = RotateForm(request.POST)
    if not form.is_valid():
        return render(request, "console/webhooks.html", _webhooks_context(request, rotate_form=form), status=400)
    secret = services.rotate_secret(tenant=request.staff.tenant, overlap_hours=form.cleaned_data["overlap_hours"])
    audit.note(request, overlap_hours=form.cleaned_data["overlap_hours"])
    return render(request, "console/webhooks.html", _webhooks_context(request, new_secret=secret))


@require_POST
@console_view(ADMIN)
def replay(request: HttpRequest, delivery_id: uuid.UUID) -> HttpResponse:
    try:
        services.replay_delivery(tenant=request.staff.tenant, delivery_id=delivery_id)
    except StateConflict as exc:
        messages.error(request, f"Not replayed: {exc}.")
        return redirect(_url(request, "webhooks"))
    audit.note(request, delivery_id=str(delivery_id))
    messages.success(request, "Queued for another attempt, with the same webhook id.")
    return redirect(_url(request, "webhooks"))


@require_GET
@console_view(ADMIN)
def keys(request: HttpRequest) -> HttpResponse:
    return render(request, "console/keys.html", {"keys": services.api_keys(tenant=request.staff.tenant), "form": KeyForm()})


@require_POST
@console_view(ADMIN)
def create_key(request: HttpRequest) -> HttpResponse:
    form = KeyForm(request.POST)
    if not form.is_valid():
        return render(request, "console/keys.html", {"keys": services.api_keys(tenant=request.staff.tenant), "form": form},
                      status=400)
    key, raw = services.create_key(tenant=request.staff.tenant, name=form.cleaned_data["name"])
    audit.note(request, key_id=key.id, prefix=key.prefix)
    return render(request, "console/keys.html", {"keys": services.api_keys(tenant=request.staff.tenant),
                                                 "form": KeyForm(), "new_key": raw, "new_key_row": key})


@require_POST
@console_view(ADMIN)
def revoke_key(request: HttpRequest, key_id: int) -> HttpResponse:
    try:
        key = services.revoke_key(tenant=request.staff.tenant, key_id=key_id)
    except StateConflict:
        messages.error(request, "That key was already revoked.")
        return redirect(_url(request, "keys"))
    audit.note(request, key_id=key.id, prefix=key.prefix)
    messages.success(request, f"Revoked {key.prefix}…: requests with it are refused from now on.")
    return redirect(_url(request, "keys"))


# --------------------------------------------------------------------------- audit


def _audit_filters(request: HttpRequest) -> tuple[AuditFilterForm, dict]:
    form = AuditFilterForm(request.GET or None)
    return form, (form.cleaned_data if form.is_bound and form.is_valid() else {})


@require_GET
@console_view(ADMIN)
def audit_log(request: HttpRequest) -> HttpResponse:
    form, f = _audit_filters(request)
    rows = audit.entries(tenant=request.staff.tenant, **f)
    return render(request, "console/audit.html", {"form": form, "rows": rows, "query": request.GET.urlencode()})


class _Echo:
    def write(self, value):
        return value


@require_GET
@console_view(ADMIN)
def audit_csv(request: HttpRequest) -> HttpResponse:
    _, f = _audit_filters(request)
    writer = csv.writer(_Echo())
    rows = audit.csv_rows(audit.entries(tenant=request.staff.tenant, limit=None, **f))
    response = StreamingHttpResponse((writer.writerow(r) for r in rows), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="audit-{request.staff.tenant.slug}.csv"'
    return response
