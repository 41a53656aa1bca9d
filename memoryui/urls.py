"""URL routes: the API, inbound webhooks, the admin, the pages."""
from django.contrib import admin
from django.urls import include, path

from facts.webhooks import inbound
from memoryui.api import api

urlpatterns = [
    path("api/v1/", api.urls),
    path("webhooks/<slug:tenant_slug>/", inbound, name="webhook-inbound"),
    path("admin/", admin.site.urls),
    path("console/", include("console.urls")),
    path("", include("dashboard.urls")),
]
