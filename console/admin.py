"""Django admin for every model (issue 5). Decision: the admin is for the
platform's superusers (Django's ``is_staff``); tenant staff work in the
console. Assertions, events and the current-view projection are read-only
(nothing may bypass the ledger), and so is everything else the ledger, the
conflicts actions or the outbox write; tenant settings, staff memberships
and webhook endpoint settings are editable."""
from __future__ import annotations

from django.apps import apps
from django.contrib import admin

from console.models import StaffMembership
from facts.models import Tenant


class ReadOnlyAdmin(admin.ModelAdmin):
    """Viewable, never added, changed or deleted here."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "created_at", "prompt_escalation_seconds", "prompt_expiry_seconds")
    fields = ("slug", "name", "prompt_escalation_seconds", "prompt_expiry_seconds")
    search_fields = ("slug", "name")

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # erasing a tenant's people goes through the ledger


@admin.register(StaffMembership)
class StaffMembershipAdmin(admin.ModelAdmin):
    list_display = ("user", "tenant", "role", "created_at")
    list_filter = ("role", "tenant")
    raw_id_fields = ("user",)


EDITABLE = {"conflicts.WebhookEndpoint": ("url", "event_types")}


def _register_rest() -> None:
    for app_label in ("facts", "conflicts", "console"):
        for model in apps.get_app_config(app_label).get_models():
            if admin.site.is_registered(model):
                continue
            label = f"{model._meta.app_label}.{model.__name__}"
            if label in EDITABLE:
                attrs = {"fields": EDITABLE[label], "has_add_permission": lambda self, request: False,
                         "has_delete_permission": lambda self, request, obj=None: False}
                admin.site.register(model, type(f"{model.__name__}Admin", (admin.ModelAdmin,), attrs))
            else:
                names = [f.name for f in model._meta.fields][:8]
                admin.site.register(model, type(f"{model.__name__}Admin", (ReadOnlyAdmin,), {"list_display": names}))


_register_rest()
