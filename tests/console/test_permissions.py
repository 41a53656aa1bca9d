"""The permission matrix (issue 5, "Must show"): every console URL and
every admin change view, for a support agent, a tenant admin, another
tenant's admin, an end user, an anonymous visitor and a superuser. The
expected status per role is the table; the test body only compares.

POSTs are sent without a body: where the role is allowed, the form is
refused (400) or the action runs and redirects (302); where it is not,
nothing runs (403 / 404 / sign-in redirect)."""
from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib import admin

from facts.models import Assertion, CurrentFact, Event, Tenant

pytestmark = pytest.mark.django_db

ROLES = ("agent", "admin", "other_admin", "end_user", "anonymous", "superuser")


def expect(agent, admin_, other_admin, end_user, anonymous, superuser) -> dict:
    return dict(zip(ROLES, (agent, admin_, other_admin, end_user, anonymous, superuser)))


READ = expect(200, 200, 404, 403, 302, 200)          # agent pages
ADMIN_READ = expect(403, 200, 404, 403, 302, 200)    # tenant-admin pages
FORM_AGENT = expect(400, 400, 404, 403, 302, 400)    # agent may post; an empty form is refused
FORM_ADMIN = expect(403, 400, 404, 403, 302, 400)    # admin may post; an empty form is refused
ACTION_ADMIN = expect(403, 302, 404, 403, 302, 302)  # admin may post; the action runs and redirects

CONSOLE = [
    ("GET", "/console/", expect(302, 302, 302, 403, 302, 200)),
    ("GET", "/console/{slug}/", READ),
    ("GET", "/console/{slug}/subjects/?q=Acme", READ),
    ("GET", "/console/{slug}/subjects/{subject}/", READ),
    ("GET", "/console/{slug}/queue/", READ),
    ("GET", "/console/{slug}/queue/{task}/", READ),
    ("POST", "/console/{slug}/queue/{task}/decide", FORM_AGENT),
    ("GET", "/console/{slug}/revocations/", READ),
    ("GET", "/console/{slug}/revocations/?extractor=faulty@1", READ),
    ("GET", "/console/{slug}/revocations/{batch}/", READ),
    ("POST", "/console/{slug}/revocations/revoke", FORM_ADMIN),
    ("POST", "/console/{slug}/revocations/{batch}/undo", ACTION_ADMIN),
    ("GET", "/console/{slug}/policy/", ADMIN_READ),
    ("POST", "/console/{slug}/policy/predicate", FORM_ADMIN),
    ("POST", "/console/{slug}/policy/ranking", FORM_ADMIN),
    ("GET", "/console/{slug}/webhooks/", ADMIN_READ),
    ("POST", "/console/{slug}/webhooks/rotate", FORM_ADMIN),
    ("POST", "/console/{slug}/webhooks/deliveries/{delivery}/replay", ACTION_ADMIN),
    ("GET", "/console/{slug}/keys/", ADMIN_READ),
    ("POST", "/console/{slug}/keys/create", FORM_ADMIN),
    ("POST", "/console/{slug}/keys/{key}/revoke", ACTION_ADMIN),
    ("GET", "/console/{slug}/audit/", ADMIN_READ),
    ("GET", "/console/{slug}/audit.csv", ADMIN_READ),
]


def _url(template: str, world) -> str:
    return template.format(slug=world.slug, subject=world.subject, task=world.task.id, batch=world.batch,
                           delivery=world.delivery.id, key=world.key_id)


def _statuses(people, method: str, url: str) -> dict:
    return {role: getattr(people[role], method.lower())(url).status_code for role in ROLES}


@pytest.mark.parametrize(("method", "template", "expected"), CONSOLE, ids=[f"{m} {t}" for m, t, _ in CONSOLE])
def test_console_url_by_role(world, people, method, template, expected):
    assert _statuses(people, method, _url(template, world)) == expected


ADMIN_ONLY_SUPERUSER = expect(302, 302, 302, 302, 302, 200)
ADMIN_MODELS = sorted(f"{m._meta.app_label}.{m._meta.model_name}" for m in admin.site._registry
                      if m._meta.app_label in ("facts", "conflicts", "console"))


@pytest.mark.parametrize("label", ADMIN_MODELS)
def test_admin_changelist_by_role(world, people, label):
    app_label, model_name = label.split(".")
    assert _statuses(people, "GET", f"/admin/{app_label}/{model_name}/") == ADMIN_ONLY_SUPERUSER


CHANGE_VIEWS = [(Assertion, "facts/assertion"), (Event, "facts/event"), (CurrentFact, "facts/currentfact"),
                (Tenant, "facts/tenant")]


@pytest.mark.parametrize(("model", "path"), CHANGE_VIEWS, ids=[p for _, p in CHANGE_VIEWS])
def test_admin_change_view_by_role(world, people, model, path):
    obj = model.objects.filter(pk__isnull=False).order_by("pk").first()
    assert _statuses(people, "GET", f"/admin/{path}/{obj.pk}/change/") == ADMIN_ONLY_SUPERUSER


LEDGER_MODELS = [(Assertion, "facts/assertion"), (Event, "facts/event"), (CurrentFact, "facts/currentfact")]


@pytest.mark.parametrize(("model", "path"), LEDGER_MODELS, ids=[p for _, p in LEDGER_MODELS])
def test_nothing_bypasses_the_ledger_in_the_admin(world, people, model, path):
    obj = model.objects.order_by("pk").first()
    before = model.objects.count()
    superuser = people["superuser"]

    statuses = (superuser.get(f"/admin/{path}/add/").status_code,
                superuser.post(f"/admin/{path}/{obj.pk}/delete/", {"post": "yes"}).status_code)
    model_admin = admin.site._registry[model]

    assert statuses == (403, 403)
    assert model.objects.count() == before
    assert (model_admin.has_add_permission(None), model_admin.has_change_permission(None, obj),
            model_admin.has_delete_permission(None, obj)) == (False, False, False)


def test_every_model_is_in_the_admin():
    models = {m for app in ("facts", "conflicts", "console") for m in apps.get_app_config(app).get_models()}
    assert models <= set(admin.site._registry)


def test_tenant_settings_are_editable_in_the_admin(world, people):
    tenant = world.agent.tenant

    response = people["superuser"].post(f"/admin/facts/tenant/{tenant.pk}/change/", {
        "slug": tenant.slug, "name": "Renamed", "prompt_escalation_seconds": 3600, "prompt_expiry_seconds": 7200})
    tenant.refresh_from_db()

    assert response.status_code == 302
    assert (tenant.name, tenant.prompt_escalation_seconds) == ("Renamed", 3600)


def test_a_subject_id_no_subject_can_have_is_404_not_500(people, world):
    """A NUL character reached the database (a 500); no subject has one."""
    response = people["admin"].get(f"/console/{world.agent.slug}/subjects/bad%00id/")
    assert response.status_code == 404
