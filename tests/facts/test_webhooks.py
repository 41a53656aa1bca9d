"""Inbound webhooks (API.md, "Authentication", "Inbound events", "Batch
import"): signed events reach the ledger; every refusal writes nothing."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from facts.models import Assertion, CurrentFact, Event, Subject, WebhookReceipt
from facts.tenants import create_or_rotate_tenant, new_webhook_secret
from tests.factories import assertion_data


def row_counts(tenant) -> dict:
    """Rows a write would touch, for before/after comparisons."""
    models = (Assertion, Event, CurrentFact, WebhookReceipt, Subject)
    return {m.__name__: m.objects.filter(tenant=tenant).count() for m in models}


def envelope(data, event_type="fact.asserted") -> str:
    return json.dumps({"type": event_type, "timestamp": "2026-01-01T00:00:00Z", "data": data})


def test_signed_assertion_is_created(agent):
    body = agent.assert_fact(assertion_data(value="Berlin", valid_from="2026-03-01T00:00:00Z"))

    assert body["outcome"] == "created"
    facts = agent.get("/subjects/u-1/facts")["facts"]
    assert [f["value"] for f in facts] == ["Berlin"]


def test_response_follows_the_contract(agent):
    body = agent.assert_fact(assertion_data(value="Berlin"))

    assert set(body) >= {"assertion_id", "outcome", "rule", "supersedes", "conflict_id", "prompt_id"}
    assert Assertion.objects.filter(id=body["assertion_id"], tenant=agent.tenant).count() == 1


# --------------------------------------------------------------------------- refusals


def test_bad_signature_is_401_and_writes_nothing(agent):
    before = row_counts(agent.tenant)

    response = agent.webhook("fact.asserted", assertion_data(), secret=new_webhook_secret())

    assert response.status_code == 401
    assert response.json()["field"] == "webhook-signature"
    assert row_counts(agent.tenant) == before


def test_missing_signature_headers_are_401_and_write_nothing(agent):
    before = row_counts(agent.tenant)

    response = agent.client.post(f"/webhooks/{agent.slug}/", envelope(assertion_data()),
                                 content_type="application/json")

    assert response.status_code == 401
    assert row_counts(agent.tenant) == before


def test_body_changed_after_signing_is_401(agent):
    signed = envelope(assertion_data(value="Berlin"))
    headers = agent.signed_headers(signed)
    before = row_counts(agent.tenant)

    response = agent.client.post(f"/webhooks/{agent.slug}/", envelope(assertion_data(value="Paris")),
                                 content_type="application/json", headers=headers)

    assert response.status_code == 401
    assert row_counts(agent.tenant) == before


@pytest.mark.parametrize("skew", [timedelta(minutes=-6), timedelta(minutes=6), timedelta(days=-1)])
def test_timestamp_outside_tolerance_is_401_and_writes_nothing(agent, skew):
    before = row_counts(agent.tenant)

    response = agent.webhook("fact.asserted", assertion_data(), timestamp=datetime.now(timezone.utc) + skew)

    assert (response.status_code, response.json()["field"]) == (401, "webhook-timestamp")
    assert row_counts(agent.tenant) == before


@pytest.mark.parametrize("header", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_a_missing_signature_header_is_401_naming_it_and_writes_nothing(agent, header):
    body = envelope(assertion_data())
    headers = {k: v for k, v in agent.signed_headers(body).items() if k != header}
    before = row_counts(agent.tenant)

    response = agent.client.post(f"/webhooks/{agent.slug}/", body, content_type="application/json", headers=headers)

    assert (response.status_code, response.json()["field"]) == (401, header)
    assert row_counts(agent.tenant) == before


def test_a_garbled_signature_header_is_401_saying_what_the_header_takes(agent):
    body = envelope(assertion_data())
    headers = {**agent.signed_headers(body), "webhook-signature": "garbage"}
    before = row_counts(agent.tenant)

    response = agent.client.post(f"/webhooks/{agent.slug}/", body, content_type="application/json", headers=headers)

    assert (response.status_code, response.json()["field"]) == (401, "webhook-signature")
    assert "v1,<base64 signature>" in response.json()["detail"] and "unpack" not in response.json()["detail"]
    assert row_counts(agent.tenant) == before


def test_old_secret_stays_valid_during_rotation(agent):
    create_or_rotate_tenant(slug=agent.slug)

    response = agent.webhook("fact.asserted", assertion_data())

    assert response.status_code == 200


def test_malformed_json_is_400_and_writes_nothing(agent):
    before = row_counts(agent.tenant)

    response = agent.webhook("fact.asserted", None, raw_body='{"type": "fact.asserted", "data": {')

    assert (response.status_code, response.json()["field"]) == (400, "body")
    assert row_counts(agent.tenant) == before


@pytest.mark.parametrize("field", ["valid_from", "valid_to", "stated_at"])
def test_time_without_offset_is_400_naming_the_field(agent, field):
    before = row_counts(agent.tenant)
    data = {**assertion_data(valid_from="2026-01-01T00:00:00Z"), field: "2026-03-01T00:00:00"}

    response = agent.webhook("fact.asserted", data)

    assert (response.status_code, response.json()["field"]) == (400, f"data.{field}")
    assert row_counts(agent.tenant) == before


@pytest.mark.parametrize("field, value", [("predicate", "employer\n"), ("subject", "u-1\n")])
def test_a_name_ending_in_a_newline_is_400_naming_the_field(agent, field, value):
    before = row_counts(agent.tenant)

    response = agent.webhook("fact.asserted", {**assertion_data(), field: value})

    assert (response.status_code, response.json()["field"]) == (400, f"data.{field}")
    assert row_counts(agent.tenant) == before


@pytest.mark.parametrize("value, accepted", [
    ("x" * 4094, True),                      # 4,096 bytes of JSON: at the limit
    ("x" * 4095, False),                     # one byte over
    ("\u00e9" * 2047, True),                # two bytes a character: 4,096
    ("\u00e9" * 2048, False),
    ("a\n" * 682, True),                    # "\n" escaped: 2 + 3 x 682 = 2,048 bytes
    ("\u0001" * 682, True),                 # "\u0001" escaped: 2 + 6 x 682 = 4,094 bytes
    ("\u0001" * 683, False),                # 4,100 bytes
    ({"k": "x" * 4087}, True),               # {"k": "..."}: 4,096 bytes
    ({"k": "x" * 4088}, False),
], ids=["ascii at limit", "ascii over", "2-byte at limit", "2-byte over", "escapes", "6-byte escapes at limit",
        "6-byte escapes over", "object at limit", "object over"])
def test_a_value_over_4096_bytes_of_json_is_400_and_writes_nothing(agent, value, accepted):
    before = row_counts(agent.tenant)

    response = agent.webhook("fact.asserted", {**assertion_data(), "value": value})

    if accepted:
        assert response.status_code == 200
    else:
        assert (response.status_code, response.json()["field"]) == (400, "data.value")
        assert row_counts(agent.tenant) == before


def test_unknown_source_kind_is_400_naming_the_field(agent):
    before = row_counts(agent.tenant)

    response = agent.webhook("fact.asserted", assertion_data(kind="hearsay"))

    assert (response.status_code, response.json()["field"]) == (400, "data.source.kind")
    assert row_counts(agent.tenant) == before


def test_body_over_the_size_limit_is_413_and_writes_nothing(agent, settings):
    settings.MEMORYUI_MAX_BODY_BYTES = 512
    before = row_counts(agent.tenant)

    response = agent.webhook("fact.asserted", assertion_data(value="x" * 600))

    assert response.status_code == 413
    assert row_counts(agent.tenant) == before


@pytest.mark.parametrize(("drop", "field"), [
    (("subject",), "data.subject"),
    (("predicate",), "data.predicate"),
    (("value",), "data.value"),
    (("source",), "data.source"),
    (("source", "kind"), "data.source.kind"),
    (("source", "id"), "data.source.id"),
])
def test_missing_required_field_is_400_naming_it(agent, drop, field):
    data = assertion_data()
    holder = data[drop[0]] if len(drop) == 2 else data
    del holder[drop[-1]]
    before = row_counts(agent.tenant)

    response = agent.webhook("fact.asserted", data)

    assert (response.status_code, response.json()["field"]) == (400, field)
    assert row_counts(agent.tenant) == before


@pytest.mark.parametrize(("raw", "field"), [
    ('{"type": "fact.exploded", "data": {}}', "type"),
    ('{"type": "fact.asserted"}', "data"),
    ('["not", "an", "object"]', "body"),
])
def test_bad_envelope_is_400_naming_the_field(agent, raw, field):
    before = row_counts(agent.tenant)

    response = agent.webhook("fact.asserted", None, raw_body=raw)

    assert (response.status_code, response.json()["field"]) == (400, field)
    assert row_counts(agent.tenant) == before


def test_valid_to_before_valid_from_is_400(agent):
    before = row_counts(agent.tenant)

    response = agent.webhook("fact.asserted", assertion_data(valid_from="2026-01-01T00:00:00Z",
                                                             valid_to="2025-01-01T00:00:00Z"))

    assert (response.status_code, response.json()["field"]) == (400, "data.valid_to")
    assert row_counts(agent.tenant) == before


def test_unknown_tenant_is_404(agent):
    response = agent.client.post("/webhooks/nobody/", envelope(assertion_data()), content_type="application/json",
                                 headers=agent.signed_headers(envelope(assertion_data())))

    assert response.status_code == 404


# --------------------------------------------------------------------------- idempotency


def test_replayed_webhook_id_returns_the_first_response_and_writes_nothing(agent):
    first = agent.webhook("fact.asserted", assertion_data(value="Berlin"), webhook_id="msg_replayed")
    after_first = row_counts(agent.tenant)

    again = agent.webhook("fact.asserted", assertion_data(value="Berlin"), webhook_id="msg_replayed")
    different_body = agent.webhook("fact.asserted", assertion_data(value="Paris"), webhook_id="msg_replayed")

    assert first.status_code == again.status_code == different_body.status_code == 200
    assert again.json() == different_body.json() == first.json()
    assert row_counts(agent.tenant) == after_first


def test_same_payload_under_a_new_webhook_id_is_a_duplicate(agent):
    data = assertion_data(value="Berlin", source_id="msg-7731", stated_at="2026-03-02T09:15:00Z")
    first = agent.assert_fact(data)
    before = row_counts(agent.tenant)

    again = agent.assert_fact(data)

    assert (again["outcome"], again["assertion_id"]) == ("duplicate", first["assertion_id"])
    after = row_counts(agent.tenant)
    assert {k: after[k] for k in ("Assertion", "Event", "CurrentFact", "Subject")} == {
        k: before[k] for k in ("Assertion", "Event", "CurrentFact", "Subject")}


def test_refusal_is_not_remembered_so_a_fixed_resend_goes_through(agent):
    refused = agent.webhook("fact.asserted", assertion_data(kind="hearsay"), webhook_id="msg_fixed")

    accepted = agent.webhook("fact.asserted", assertion_data(), webhook_id="msg_fixed")

    assert (refused.status_code, accepted.status_code) == (400, 200)


# --------------------------------------------------------------------------- batch


def batch_event(event_id: str, data: dict, event_type: str = "fact.asserted") -> dict:
    return {"id": event_id, "type": event_type, "data": data}


def test_batch_results_are_in_order(agent):
    events = [
        batch_event("e-1", assertion_data(predicate="employer", value="Acme", valid_from="2020-01-01T00:00:00Z")),
        batch_event("e-2", assertion_data(predicate="employer", value="Globex", valid_from="2023-01-01T00:00:00Z")),
        batch_event("e-3", assertion_data(predicate="employer", value="Initech", kind="hearsay")),
        batch_event("e-4", assertion_data(predicate="speaks_language", value="German")),
    ]

    response = agent.api("POST", "/assertions/batch", {"events": events})

    assert response.status_code == 200
    results = response.json()["results"]
    assert [(r["id"], r["status"]) for r in results] == [("e-1", 200), ("e-2", 200), ("e-3", 400), ("e-4", 200)]
    assert [r.get("outcome") for r in results] == ["created", "superseded_existing", None, "created"]
    assert results[2]["field"] == "events[2].data.source.kind"
    assert Assertion.objects.filter(tenant=agent.tenant).count() == 3


def test_batch_event_ids_are_idempotent(agent):
    events = [batch_event(f"e-{i}", assertion_data(predicate="speaks_language", value=lang))
              for i, lang in enumerate(["German", "French"])]
    first = agent.api("POST", "/assertions/batch", {"events": events}).json()
    before = row_counts(agent.tenant)

    again = agent.api("POST", "/assertions/batch", {"events": events}).json()

    assert again == first
    assert row_counts(agent.tenant) == before


def test_batch_over_1000_events_is_refused_and_writes_nothing(agent):
    events = [batch_event(f"e-{i}", assertion_data(predicate="note", value=f"n{i}")) for i in range(1001)]
    before = row_counts(agent.tenant)

    response = agent.api("POST", "/assertions/batch", {"events": events})

    assert (response.status_code, response.json()["field"]) == (413, "events")
    assert row_counts(agent.tenant) == before


def test_batch_event_without_id_refuses_the_whole_batch(agent):
    events = [batch_event("e-1", assertion_data()), {"type": "fact.asserted", "data": assertion_data()}]
    before = row_counts(agent.tenant)

    response = agent.api("POST", "/assertions/batch", {"events": events})

    assert (response.status_code, response.json()["field"]) == (400, "events[1].id")
    assert row_counts(agent.tenant) == before


def test_batch_retraction_sees_the_assertions_before_it_in_the_same_batch(agent):
    events = [
        batch_event("e-1", assertion_data(predicate="employer", value="Acme", source_id="msg-1")),
        batch_event("e-2", {"subject": "u-1", "source_id": "msg-1", "reason": "wrong person"}, "fact.retracted"),
        batch_event("e-3", assertion_data(predicate="employer", value="Globex", source_id="msg-2")),
    ]

    results = agent.api("POST", "/assertions/batch", {"events": events}).json()["results"]

    assert [(r["status"], r["outcome"]) for r in results] == [(200, "created"), (200, "retracted"), (200, "created")]
    assert results[1]["retracted"] == [results[0]["assertion_id"]]
    retracted = Assertion.objects.get(id=results[0]["assertion_id"])
    assert (retracted.retraction_reason, retracted.retracted_at is not None) == ("wrong person", True)
    assert [f["value"] for f in agent.get("/subjects/u-1/facts")["facts"]] == ["Globex"]
    assert Event.objects.filter(tenant=agent.tenant, type="fact.retracted",
                                assertion_id=results[0]["assertion_id"]).count() == 1


def test_batch_retraction_of_a_stored_assertion_by_id(agent):
    stored = agent.assert_fact(assertion_data(predicate="employer", value="Acme"))
    events = [batch_event("e-1", {"assertion_id": stored["assertion_id"]}, "fact.retracted"),
              batch_event("e-2", {"assertion_id": stored["assertion_id"]}, "fact.retracted")]

    results = agent.api("POST", "/assertions/batch", {"events": events}).json()["results"]

    assert [r["outcome"] for r in results] == ["retracted", "retracted"]
    assert agent.get("/subjects/u-1/facts")["facts"] == []
    assert Event.objects.filter(tenant=agent.tenant, type="fact.retracted").count() == 1


def test_batch_retraction_that_names_nothing_is_404_and_the_others_are_written(agent):
    events = [
        batch_event("e-1", {"subject": "u-1", "source_id": "never-sent"}, "fact.retracted"),
        batch_event("e-2", assertion_data(predicate="employer", value="Acme")),
    ]
    before = row_counts(agent.tenant)

    results = agent.api("POST", "/assertions/batch", {"events": events}).json()["results"]

    assert [(r["status"], r.get("field")) for r in results] == [(404, "events[0].data.source_id"), (200, None)]
    after = row_counts(agent.tenant)
    assert after["Assertion"] == before["Assertion"] + 1
    assert after["WebhookReceipt"] == before["WebhookReceipt"] + 1  # the refusal is not remembered
    assert Event.objects.filter(tenant=agent.tenant, type="fact.retracted").count() == 0


# --------------------------------------------------------------------------- what PostgreSQL cannot store


UNSTORABLE = [
    ('"Zoë \\u0000 nul"', "data.value"),   # PostgreSQL text and jsonb refuse NUL
    ('"\\ud800"', "data.value"),           # an unpaired surrogate is not Unicode text
    ("1e999", "body"),                     # parses to infinity
    ("Infinity", "body"),                  # not JSON at all
    ('{"a": ' * 20 + "1" + "}" * 20, "data.value.a.a.a.a.a.a.a.a.a.a.a"),
]


@pytest.mark.parametrize("value, field", UNSTORABLE)
def test_a_value_postgresql_cannot_store_is_400_naming_it_and_writes_nothing(agent, value, field):
    body = ('{"type": "fact.asserted", "timestamp": "2026-01-01T00:00:00Z", "data": '
            '{"subject": "u-1", "predicate": "note", "source": {"kind": "user_statement", "id": "m-1"}, '
            f'"value": {value}}}}}')
    before = row_counts(agent.tenant)

    response = agent.client.post(f"/webhooks/{agent.slug}/", body, content_type="application/json",
                                 headers=agent.signed_headers(body))

    assert (response.status_code, response.json()["field"]) == (400, field)
    assert row_counts(agent.tenant) == before


def test_a_batch_with_an_unstorable_value_is_400_naming_the_event_and_writes_nothing(agent):
    body = json.dumps({"events": [batch_event("e-1", assertion_data(value="fine")),
                                  batch_event("e-2", assertion_data(value="bad \u0000"))]})
    before = row_counts(agent.tenant)

    response = agent.client.post("/api/v1/assertions/batch", body, content_type="application/json",
                                 headers={"Authorization": f"Bearer {agent.api_key}"})

    assert (response.status_code, response.json()["field"]) == (400, "events[1].data.value")
    assert row_counts(agent.tenant) == before


def test_a_signed_body_that_is_not_utf8_is_400_not_a_signature_failure(agent):
    body = b'{"type": "fact.asserted", "data": {"value": "\xff\xfe"}}'
    before = row_counts(agent.tenant)

    response = agent.client.post(f"/webhooks/{agent.slug}/", body, content_type="application/json",
                                 headers=agent.signed_headers(body.decode("latin-1")))

    assert (response.status_code, response.json()["field"]) == (400, "body")
    assert row_counts(agent.tenant) == before


# Edges found by a new user's trial: each a 500 before, now a 400 naming
# the field, with nothing written.
@pytest.mark.parametrize("field,value", [
    ("valid_from", "0001-01-01T00:00:00+14:00"), ("valid_to", "9999-12-31T23:59:59-14:00"),
    ("stated_at", "0001-01-01T00:00:00+01:00"),
])
def test_a_time_outside_the_calendar_once_in_utc_is_400_naming_it(agent, field, value):
    before = row_counts(agent.tenant)

    response = agent.webhook("fact.asserted", {**assertion_data(valid_from="2000-01-01T00:00:00Z"), field: value})

    assert (response.status_code, response.json()["field"]) == (400, f"data.{field}")
    assert row_counts(agent.tenant) == before


@pytest.mark.parametrize("webhook_id", ["x" * 301, "msg\x00id"])
def test_a_webhook_id_that_cannot_be_stored_is_400(agent, webhook_id):
    before = row_counts(agent.tenant)
    body = envelope(assertion_data())

    response = agent.client.post(f"/webhooks/{agent.slug}/", body, content_type="application/json",
                                 headers=agent.signed_headers(body, webhook_id=webhook_id))

    assert (response.status_code, response.json()["field"]) == (400, "webhook-id")
    assert row_counts(agent.tenant) == before


def test_a_batch_event_id_too_long_to_store_refuses_the_batch(agent):
    before = row_counts(agent.tenant)
    events = [{"id": "ok", "type": "fact.asserted", "data": assertion_data()},
              {"id": "y" * 295, "type": "fact.asserted", "data": assertion_data(value="Rome")}]

    response = agent.api("POST", "/assertions/batch", {"events": events})

    assert (response.status_code, response.json()["field"]) == (400, "events[1].id")
    assert row_counts(agent.tenant) == before


def test_an_expiring_claim_from_the_year_9999_resolves(agent):
    """valid_from + TTL past the year 9999 went past the calendar (500): the
    claim then simply does not expire in any time we can name."""
    assert agent.api("PUT", "/predicates/mood", {"cardinality": "one", "stakes": "low",
                                                 "ttl_seconds": 7 * 86400}).status_code == 200

    answer = agent.assert_fact(assertion_data(predicate="mood", value="calm", valid_from="9999-12-30T00:00:00Z"))

    assert answer["outcome"] == "created"
    facts = agent.get("/subjects/u-1/facts", valid_at="9999-12-31T00:00:00Z", predicate="mood")["facts"]
    assert [f["value"] for f in facts] == ["calm"]


def test_a_ttl_the_policy_column_cannot_hold_is_400(agent):
    from facts.models import PredicatePolicy

    count = PredicatePolicy.objects.count()
    response = agent.api("PUT", "/predicates/mood", {"cardinality": "one", "stakes": "low", "ttl_seconds": 2**31})

    assert (response.status_code, response.json()["field"]) == (400, "ttl_seconds")
    assert PredicatePolicy.objects.count() == count


@pytest.mark.parametrize("data, field", [
    ({"assertion_id": "0190f2a4-0000-7000-8000-000000000000", "reason": "wrong"}, "data.assertion_id"),
    ({"subject": "u-1", "source_id": "never-sent"}, "data.source_id"),
])
def test_a_retraction_that_finds_nothing_is_404_naming_the_id_and_writes_nothing(agent, data, field):
    agent.assert_fact(assertion_data(value="Berlin"))
    before = row_counts(agent.tenant)

    response = agent.webhook("fact.retracted", data)

    assert (response.status_code, response.json()["field"]) == (404, field)
    assert row_counts(agent.tenant) == before


def test_a_missing_name_is_400_saying_it_is_required(agent):
    data = assertion_data()
    del data["subject"]

    response = agent.webhook("fact.asserted", data)

    assert response.status_code == 400
    assert response.json() == {"detail": "is required: 1-200 characters of letters, digits, _ . : -",
                               "field": "data.subject"}


@pytest.mark.parametrize("ahead, accepted", [(timedelta(days=365 * 70), False), (timedelta(minutes=6), False),
                                             (timedelta(minutes=4), True)])
def test_a_stated_at_in_the_future_is_400_naming_it_and_writes_nothing(agent, ahead, accepted):
    """A statement's time breaks ties (tie-stated-at): one dated 2099 would
    win every tie on its key until then. A sender's clock may run a few
    minutes ahead."""
    stated = (datetime.now(timezone.utc) + ahead).isoformat()
    before = row_counts(agent.tenant)

    response = agent.webhook("fact.asserted", assertion_data(stated_at=stated, valid_from="2026-01-01T00:00:00Z"))

    if accepted:
        assert response.status_code == 200
        return
    assert (response.status_code, response.json()["field"]) == (400, "data.stated_at")
    assert "future" in response.json()["detail"]
    assert row_counts(agent.tenant) == before


def test_a_valid_from_in_the_future_is_accepted(agent):
    response = agent.webhook("fact.asserted", assertion_data(valid_from="2099-01-01T00:00:00Z"))

    assert response.json()["outcome"] == "created"


@pytest.mark.parametrize("event, field, detail", [
    ({"id": 123, "type": "fact.asserted", "data": {}}, "events[1].id", "must be a non-empty string"),
    ({"id": "", "type": "fact.asserted", "data": {}}, "events[1].id", "must be a non-empty string"),
    ("e-2", "events[1]", "must be an object"),
])
def test_a_batch_event_id_of_the_wrong_kind_refuses_the_batch_naming_it(agent, event, field, detail):
    events = [batch_event("e-1", assertion_data()), event]
    before = row_counts(agent.tenant)

    response = agent.api("POST", "/assertions/batch", {"events": events})

    assert (response.status_code, response.json()["field"]) == (400, field)
    assert response.json()["detail"].startswith(detail)
    assert row_counts(agent.tenant) == before


def test_a_batch_id_repeated_on_another_event_is_400_for_that_event_only(agent):
    first = batch_event("b-5", assertion_data(predicate="pet", value="fish", source={"kind": "user_statement",
                                                                                       "id": "e5"}))
    other = batch_event("b-5", assertion_data(predicate="pet", value="bird", source={"kind": "user_statement",
                                                                                       "id": "e6"}))
    same = dict(first)

    results = agent.api("POST", "/assertions/batch", {"events": [first, other, same]}).json()["results"]

    assert [r["status"] for r in results] == [200, 400, 200]
    assert results[1]["field"] == "events[1].id" and "events[0]" in results[1]["detail"]
    assert results[2] == results[0]  # the same event again: its first answer
    assert list(Assertion.objects.filter(tenant=agent.tenant).values_list("value", flat=True)) == ["fish"]


@pytest.mark.parametrize("body, field, detail", [
    ({"cardinality": "two"}, "cardinality", "must be 'one' or 'many'"),
    ({}, "cardinality", "is required: 'one' or 'many'"),
    ({"cardinality": "one"}, "stakes", "is required: 'low' or 'high'"),
    ({"cardinality": "one", "stakes": "medium"}, "stakes", "must be 'low' or 'high'"),
])
def test_a_policy_names_the_first_bad_or_missing_field(agent, body, field, detail):
    from facts.models import PredicatePolicy

    count = PredicatePolicy.objects.count()
    response = agent.api("PUT", "/predicates/mood", body)

    assert (response.status_code, response.json()) == (400, {"detail": detail, "field": field})
    assert PredicatePolicy.objects.count() == count
