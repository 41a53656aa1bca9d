"""Settings read from the environment (memoryui/settings.py): serving the
pages behind a proxy that ends TLS."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings

from memoryui.settings import https_settings

PUBLIC = "https://memory.example.com"


def test_the_public_url_is_a_trusted_origin_and_https_makes_cookies_secure():
    got = https_settings({}, f"{PUBLIC}/")
    assert got == {"CSRF_TRUSTED_ORIGINS": [PUBLIC], "SESSION_COOKIE_SECURE": True, "CSRF_COOKIE_SECURE": True,
                   "SECURE_PROXY_SSL_HEADER": None}


def test_plain_http_keeps_cookies_usable_over_http():
    got = https_settings({}, "http://127.0.0.1:8000")
    assert got["CSRF_TRUSTED_ORIGINS"] == ["http://127.0.0.1:8000"]
    assert got["SESSION_COOKIE_SECURE"] is False and got["CSRF_COOKIE_SECURE"] is False


def test_further_origins_and_the_forwarded_scheme_are_opt_in():
    env = {"CSRF_TRUSTED_ORIGINS": " https://admin.example.com ,https://memory.example.com:8443,,",
           "MEMORYUI_TRUST_X_FORWARDED_PROTO": "1"}
    got = https_settings(env, PUBLIC)
    assert got["CSRF_TRUSTED_ORIGINS"] == [PUBLIC, "https://admin.example.com", "https://memory.example.com:8443"]
    assert got["SECURE_PROXY_SSL_HEADER"] == ("HTTP_X_FORWARDED_PROTO", "https")


@pytest.mark.parametrize(("env", "public", "named"), [
    ({}, "memory.example.com", "MEMORYUI_PUBLIC_URL"),
    ({"CSRF_TRUSTED_ORIGINS": "admin.example.com"}, PUBLIC, "CSRF_TRUSTED_ORIGINS"),
    ({"CSRF_TRUSTED_ORIGINS": "ftp://files.example.com"}, PUBLIC, "CSRF_TRUSTED_ORIGINS"),
])
def test_a_url_without_scheme_or_host_is_refused_naming_the_variable(env, public, named):
    with pytest.raises(ValueError, match=named):
        https_settings(env, public)


def _post_sign_in(origin: str) -> int:
    """GET the sign-in page for its CSRF token, then POST a wrong password
    from ``origin`` as a browser on the public URL would, the proxy
    forwarding plain HTTP. Returns the POST's status."""
    client = Client(enforce_csrf_checks=True, HTTP_HOST="memory.example.com")
    assert client.get("/login/").status_code == 200
    return client.post("/login/", {"username": "nobody", "password": "wrong",
                                   "csrfmiddlewaretoken": client.cookies["csrftoken"].value},
                       HTTP_ORIGIN=origin).status_code


@pytest.mark.django_db
def test_a_form_posted_from_the_https_public_url_is_accepted_behind_a_tls_proxy():
    """Without the trusted origin Django refuses the form (403, origin
    check) and signs nobody in; with the settings derived from
    ``MEMORYUI_PUBLIC_URL`` it reaches the view (200: wrong password)."""
    users = User.objects.count()
    with override_settings(ALLOWED_HOSTS=["memory.example.com"], CSRF_TRUSTED_ORIGINS=[]):
        assert _post_sign_in(PUBLIC) == 403
    derived = https_settings({}, PUBLIC)
    with override_settings(ALLOWED_HOSTS=["memory.example.com"], CSRF_TRUSTED_ORIGINS=derived["CSRF_TRUSTED_ORIGINS"]):
        assert _post_sign_in(PUBLIC) == 200
        assert _post_sign_in("https://evil.example.net") == 403
    assert User.objects.count() == users
