"""Routes of the support console, mounted at ``/console/``. Every page
but the sign-in and the index carries the tenant's slug."""
from django.contrib.auth import views as auth_views
from django.urls import path

from console import views

app_name = "console"

T = "<slug:tenant_slug>/"

urlpatterns = [
    path("", views.index, name="index"),
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(next_page="console:login"), name="logout"),
    path(T, views.overview, name="overview"),
    path(T + "subjects/", views.subjects, name="subjects"),
    path(T + "subjects/<str:external_id>/", views.subject, name="subject"),
    path(T + "queue/", views.queue, name="queue"),
    path(T + "queue/<uuid:task_id>/", views.task, name="task"),
    path(T + "queue/<uuid:task_id>/decide", views.decide, name="decide"),
    path(T + "revocations/", views.revocations, name="revocations"),
    path(T + "revocations/revoke", views.revoke, name="revoke"),
    path(T + "revocations/<uuid:batch_id>/", views.revocation, name="revocation"),
    path(T + "revocations/<uuid:batch_id>/undo", views.undo_revocation, name="undo"),
    path(T + "policy/", views.policy, name="policy"),
    path(T + "policy/predicate", views.set_policy, name="set_policy"),
    path(T + "policy/ranking", views.set_ranking, name="set_ranking"),
    path(T + "webhooks/", views.webhooks, name="webhooks"),
    path(T + "webhooks/rotate", views.rotate_secret, name="rotate"),
    path(T + "webhooks/deliveries/<uuid:delivery_id>/replay", views.replay, name="replay"),
    path(T + "keys/", views.keys, name="keys"),
    path(T + "keys/create", views.create_key, name="create_key"),
    path(T + "keys/<int:key_id>/revoke", views.revoke_key, name="revoke_key"),
    path(T + "audit/", views.audit_log, name="audit"),
    path(T + "audit.csv", views.audit_csv, name="audit_csv"),
]
