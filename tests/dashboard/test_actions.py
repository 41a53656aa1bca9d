"""What a person does from the dashboard, through the ledger: "this
changed", "this was never true", "forget this", "forget everything", answer
a question, download their data."""
from __future__ import annotations

import json

import pytest

from facts.models import Assertion, Subject

pytestmark = pytest.mark.django_db


def current_values(person, predicate: str) -> list:
    facts = person.agent.get(f"/subjects/{person.external_id}/facts", predicate=predicate)["facts"]
    return [f.get("value") for f in facts]


def test_this_changed_records_a_correction_from_the_given_day(person):
    berlin = person.remember(predicate="city_of_residence", value="Berlin", valid_from="2025-03-01T00:00:00Z")

    response = person.client.post(f"/memories/{berlin['assertion_id']}/correct",
                                  {"value": "Munich", "since": "2025-11-22"})

    assert response.status_code == 302
    correction = Assertion.objects.get(subject=person.subject, source_kind="correction")
    assert (correction.value, correction.valid_from.date().isoformat()) == ("Munich", "2025-11-22")
    assert correction.actor.startswith("user:")
    assert current_values(person, "city_of_residence") == ["Munich"]
    history = person.agent.get(f"/subjects/{person.external_id}/history", predicate="city_of_residence")
    assert [(v["value"], v["status"]) for v in history["versions"]] == [("Berlin", "superseded"), ("Munich", "current")]


def test_this_changed_where_the_system_of_record_says_otherwise_is_not_called_an_update(person):
    """A correction a system of record outranks (write rule step 4) is kept
    and followed up by staff; the page says so instead of "Updated"."""
    address = person.remember(predicate="billing_address", value="1 A St", kind="system_record",
                              valid_from="2025-03-01T00:00:00Z")

    response = person.client.post(f"/memories/{address['assertion_id']}/correct",
                                  {"value": "9 Z St", "since": "2025-11-01"}, follow=True)
    page = response.content.decode()

    assert response.status_code == 200
    assert "not used until staff have checked it" in page and "Updated:" not in page
    assert current_values(person, "billing_address") == ["1 A St"]


def test_a_correction_that_lost_is_explained_by_the_rule_it_lost_to():
    from dashboard.words import overruled_correction

    assert "system of record" in overruled_correction("system-of-record-authority")
    assert overruled_correction("source-rank") == ("But a source that counts for more says otherwise there, so your "
                                                    "correction is not used.")


def test_this_changed_without_a_value_is_refused_and_writes_nothing(person):
    berlin = person.remember(predicate="city_of_residence", value="Berlin")
    count = Assertion.objects.count()

    response = person.client.post(f"/memories/{berlin['assertion_id']}/correct", {"value": "  ", "since": "2025-01-01"})

    assert response.status_code == 400
    assert Assertion.objects.count() == count


def test_never_true_retracts_every_source_of_the_memory(person):
    first = person.remember(predicate="note", value="Has a dog named Rex")
    person.remember(predicate="note", value="has a dog named rex", source={"kind": "agent_inference", "id": "inf-1"})

    response = person.client.post(f"/memories/{first['assertion_id']}/retract", {"reason": "that was my sister"})

    assert response.status_code == 302
    retracted = Assertion.objects.filter(subject=person.subject, value_key='"has a dog named rex"')
    assert [a.retraction_reason for a in retracted] == ["that was my sister", "that was my sister"]
    assert "Has a dog named Rex" not in current_values(person, "note")


def test_never_true_twice_is_not_found_and_writes_nothing(person):
    first = person.remember(predicate="note", value="Plays the drums")
    person.client.post(f"/memories/{first['assertion_id']}/retract", {})
    count = Assertion.objects.filter(retracted_at__isnull=False).count()

    response = person.client.post(f"/memories/{first['assertion_id']}/retract", {})

    assert response.status_code == 404
    assert Assertion.objects.filter(retracted_at__isnull=False).count() == count


def test_forget_this_needs_the_confirmation(person):
    memory = person.remember(predicate="note", value="Allergic to cats")

    response = person.client.post(f"/memories/{memory['assertion_id']}/erase", {})

    assert response.status_code == 400
    assert Assertion.objects.filter(erased_at__isnull=False).count() == 0


def test_forget_this_erases_every_source_of_the_value(person):
    memory = person.remember(predicate="note", value="Allergic to cats")
    person.remember(predicate="note", value="Allergic to cats", source={"kind": "agent_inference", "id": "inf-9"})

    response = person.client.post(f"/memories/{memory['assertion_id']}/erase", {"confirm": "on"})

    assert response.status_code == 302
    assert Assertion.objects.filter(subject=person.subject, value__isnull=True, evidence="").count() == 2
    export = person.client.get("/your-data/export.json").content.decode()
    assert "cats" not in export


def test_forget_everything_erases_the_subject_and_signs_out(person):
    person.remember(predicate="city_of_residence", value="Berlin")

    refused = person.client.post("/your-data/forget-everything", {})
    done = person.client.post("/your-data/forget-everything", {"confirm": "on"})

    assert refused.status_code == 400
    assert done.status_code == 302 and done["Location"] == "/signed-out/?forgotten=1"
    assert Subject.objects.get(pk=person.subject.pk).erased_at is not None
    assert Assertion.objects.filter(subject=person.subject, erased_at__isnull=True).count() == 0
    assert person.client.get("/").status_code == 302


def test_download_is_a_json_attachment_with_provenance(person):
    person.remember(predicate="city_of_residence", value="Berlin",
                    source={"kind": "user_statement", "id": "msg-1", "evidence": "I live in Berlin"})

    response = person.client.get("/your-data/export.json")

    assert response["Content-Disposition"] == 'attachment; filename="my-memory.json"'
    body = json.loads(response.content)
    berlin = next(f for f in body["current"] if f.get("value") == "Berlin")
    assert berlin["source"]["evidence"] == "I live in Berlin"
    assert {k["predicate"] for k in body["keys"]} == {"note", "city_of_residence"}


def test_this_changed_cannot_start_after_today_and_writes_nothing(person):
    berlin = person.remember(predicate="city_of_residence", value="Berlin")
    count = Assertion.objects.count()

    response = person.client.post(f"/memories/{berlin['assertion_id']}/correct", {"value": "Hamburg", "since": "3000-01-01"})

    assert response.status_code == 400
    assert b"cannot start after today" in response.content
    assert Assertion.objects.count() == count


@pytest.mark.parametrize("believed_on, about, status, text", [
    ("2999-01-01", "2025-01-01", 200, b"That day has not come yet"),
    ("2025-01-01", "9999-12-31", 200, b"believed on"),
])
def test_look_back_refuses_future_days_and_takes_the_last_day_there_is(person, believed_on, about, status, text):
    person.remember(predicate="city_of_residence", value="Berlin", valid_from="2020-01-01T00:00:00Z")

    response = person.client.get("/time-travel/", {"believed_on": believed_on, "about": about})

    assert response.status_code == status
    assert text in response.content


def test_a_correction_from_the_year_1_leaves_the_memory_page_working(person):
    """The timeline pads its ends; padding a claim from the year 1 went past
    the calendar and the memory page answered 500 for good."""
    berlin = person.remember(predicate="city_of_residence", value="Berlin", valid_from="2025-03-01T00:00:00Z")

    response = person.client.post(f"/memories/{berlin['assertion_id']}/correct", {"value": "Rome", "since": "0001-01-01"})

    assert response.status_code == 302
    correction = Assertion.objects.get(subject=person.subject, source_kind="correction")
    page = person.client.get(f"/memories/{correction.id}/")
    assert page.status_code == 200
    assert b"Rome" in page.content


def test_the_audit_entry_of_an_end_user_action_names_the_subject_and_the_memory(person):
    from console.models import AuditEntry

    memory = person.remember(value="has a cat")
    response = person.client.post(f"/memories/{memory['assertion_id']}/retract", {"reason": "not mine"})

    entry = AuditEntry.objects.filter(action__endswith="retract").latest("at")
    assert response.status_code == 302
    assert entry.detail == {"subject": person.external_id, "assertion_id": memory["assertion_id"]}
    assert "not mine" not in str(entry.detail)
