"""Sign-in: one-time links (single use, short expiry, recorded in the event
log) and plain Django accounts; every page needs a signed-in person."""
from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlsplit

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from dashboard.accounts import account_user
from facts.models import Event, LoginLink, SubjectAccount

pytestmark = pytest.mark.django_db


def link_path(person) -> str:
    response = person.agent.api("POST", f"/subjects/{person.external_id}/login-link")
    assert response.status_code == 200
    return urlsplit(response.json()["url"]).path


def test_link_asks_before_it_is_used_and_signs_in_once(person):
    path = link_path(person)
    browser = Client()

    shown = browser.get(path)
    assert shown.status_code == 200
    assert LoginLink.objects.get(subject=person.subject).used_at is None

    used = browser.post(path)

    assert used.status_code == 302 and used["Location"] == "/"
    assert browser.get("/").status_code == 200
    assert LoginLink.objects.get(subject=person.subject).used_at is not None
    assert Event.objects.filter(subject=person.subject, type="login_link.used").count() == 1


def test_link_used_twice_is_refused_and_the_refusal_logged(person):
    path = link_path(person)
    Client().post(path)
    second = Client()
    refusals = Event.objects.filter(subject=person.subject, type="login_link.refused").count()

    response = second.post(path)

    assert response.status_code == 410
    assert second.get("/").status_code == 302
    assert Event.objects.filter(subject=person.subject, type="login_link.refused").count() == refusals + 1
    assert Event.objects.filter(subject=person.subject, type="login_link.used").count() == 1


def test_expired_link_is_refused(person):
    path = link_path(person)
    browser = Client()

    with time_machine.travel(timezone.now() + timedelta(minutes=16)):
        response = browser.post(path)

    assert response.status_code == 410
    assert LoginLink.objects.get(subject=person.subject).used_at is None
    assert browser.get("/").status_code == 302


def test_unknown_link_is_refused_and_writes_nothing(person):
    events = Event.objects.count()
    users = get_user_model().objects.count()

    response = Client().post("/login/not-a-real-token/")

    assert response.status_code == 410
    assert (Event.objects.count(), get_user_model().objects.count()) == (events, users)


def test_links_reuse_the_one_account_of_the_subject(person):
    Client().post(link_path(person))
    Client().post(link_path(person))

    assert SubjectAccount.objects.filter(subject=person.subject).count() == 1


def test_password_account_signs_in_with_django_auth(person):
    user = account_user(subject=person.subject)
    user.set_password("a long enough password")
    user.save()
    browser = Client()

    response = browser.post("/login/", {"username": user.username, "password": "a long enough password"})

    assert response.status_code == 302
    assert browser.get("/").status_code == 200


def test_anonymous_visitor_is_sent_to_sign_in():
    response = Client().get("/time-travel/")

    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/time-travel/"


def test_account_without_a_subject_sees_no_memories(db):
    staff = get_user_model().objects.create_user("support-1", password="x" * 12, is_staff=True)
    browser = Client()
    browser.force_login(staff)

    response = browser.get("/")

    assert response.status_code == 403
    assert b"not linked to a person" in response.content


def test_sign_out_ends_the_session(person):
    response = person.client.post("/logout/")

    assert response.status_code == 302
    assert person.client.get("/").status_code == 302
