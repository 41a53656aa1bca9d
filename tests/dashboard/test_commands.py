"""``manage.py login_link``: prints links that sign the person in once."""
from __future__ import annotations

import io
from urllib.parse import urlsplit

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from facts.models import LoginLink

pytestmark = pytest.mark.django_db


def test_login_link_prints_a_working_one_time_link(person):
    out = io.StringIO()

    call_command("login_link", person.agent.slug, person.external_id, "--names", stdout=out)

    name, url = out.getvalue().strip().split(": ", 1)
    browser = Client()
    assert name == "Caroline"
    assert browser.post(urlsplit(url).path).status_code == 302
    assert browser.get("/").status_code == 200
    assert LoginLink.objects.filter(subject=person.subject, used_at__isnull=False).count() == 1


def test_login_link_for_an_unknown_subject_fails_and_writes_nothing(person):
    count = LoginLink.objects.count()

    with pytest.raises(CommandError, match="no such subject"):
        call_command("login_link", person.agent.slug, "nobody", stdout=io.StringIO())

    assert LoginLink.objects.count() == count


def test_the_audit_log_keeps_no_sign_in_token(person):
    """Using a link signs the person in, which the audit records; the
    link's secret is not part of what it keeps."""
    from django.test import Client

    from console.models import AuditEntry
    from facts.access import mint_login_link

    link = mint_login_link(subject=person.subject, actor="test")
    token = link.url.rstrip("/").rsplit("/", 1)[1]
    response = Client().post(f"/login/{token}/")

    assert response.status_code == 302
    entry = AuditEntry.objects.get(action__endswith="login_link")
    assert token not in entry.path and entry.path.endswith("/[token]/")
