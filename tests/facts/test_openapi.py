"""``GET /api/v1/openapi.json`` describes the whole contract (API.md,
"Machine-readable"), the signed inbound webhook included."""
from django.test import Client

CONTRACT = [
    ("get", "/api/v1/subjects/{subject}/facts"),
    ("get", "/api/v1/subjects/{subject}/context"),
    ("get", "/api/v1/subjects/{subject}/history"),
    ("get", "/api/v1/subjects/{subject}/export"),
    ("get", "/api/v1/subjects/{subject}/prompts"),
    ("delete", "/api/v1/subjects/{subject}"),
    ("post", "/api/v1/subjects/{subject}/login-link"),
    ("post", "/api/v1/assertions/batch"),
    ("post", "/api/v1/assertions/{assertion_id}/retract"),
    ("post", "/api/v1/assertions/{assertion_id}/erase"),
    ("post", "/api/v1/prompts/{prompt_id}/answer"),
    ("post", "/api/v1/webhook-endpoints"),
    ("get", "/api/v1/webhook-endpoints"),
    ("delete", "/api/v1/webhook-endpoints/{endpoint_id}"),
    ("put", "/api/v1/predicates/{name}"),
    ("get", "/api/v1/predicates"),
    ("post", "/webhooks/{tenant_slug}/"),
]


def test_openapi_describes_every_endpoint_of_the_contract(db):
    schema = Client().get("/api/v1/openapi.json").json()

    described = {(method, path) for path, item in schema["paths"].items() for method in item}
    assert [pair for pair in CONTRACT if pair not in described] == []
    inbound = schema["paths"]["/webhooks/{tenant_slug}/"]["post"]
    assert {p["name"] for p in inbound["parameters"]} >= {"webhook-id", "webhook-timestamp", "webhook-signature"}


def test_the_docs_page_loads_swagger_ui_from_this_server_not_a_cdn(client):
    """The API docs work offline: Swagger UI comes from django-ninja's
    static files, which collectstatic gathers with the rest (README,
    "Serving"), not from a CDN."""
    from django.contrib.staticfiles import finders

    page = client.get("/api/v1/docs").content.decode()

    assert "/static/ninja/swagger-ui-bundle.js" in page and "cdn." not in page
    assert finders.find("ninja/swagger-ui-bundle.js") and finders.find("ninja/swagger-ui.css")
