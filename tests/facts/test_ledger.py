"""The seeds' cases, end to end: signed webhooks in, the read API out
(DESIGN.md, "The write rule", "The read model"; API.md)."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
import time_machine
from django.core import serializers

from facts import events as ev
from facts import ledger
from facts.models import Assertion, Conflict, CurrentFact, Event, FactKey, PredicatePolicy, Subject, WebhookReceipt
from facts.resolve import content_hash, normalise_value
from tests.factories import assertion_data

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def facts(agent, subject="u-1", **params):
    return agent.get(f"/subjects/{subject}/facts", **params)["facts"]


def values(items):
    return [f.get("value") for f in items]


def history(agent, predicate, subject="u-1", **params):
    return agent.get(f"/subjects/{subject}/history", predicate=predicate, **params)["versions"]


def row_counts(tenant) -> dict:
    models = (Assertion, Event, CurrentFact, WebhookReceipt, Subject, FactKey, Conflict)
    return {m.__name__: m.objects.filter(tenant=tenant).count() for m in models}


def tenant_dump(tenant) -> str:
    """Every stored row of the tenant, serialised: what erasure must clean."""
    rows = []
    for model in (Assertion, Event, CurrentFact, WebhookReceipt, Subject, FactKey, Conflict):
        rows.extend(model.objects.filter(tenant=tenant))
    return serializers.serialize("json", rows)


@pytest.fixture
def clock():
    with time_machine.travel(T0, tick=False) as traveller:
        yield traveller


@pytest.fixture
def published(monkeypatch):
    """Domain events published by the ledger during the test."""
    seen: list[ev.DomainEvent] = []
    monkeypatch.setattr(ev, "_subscribers", [*ev._subscribers, seen.append])
    return seen


# --------------------------------------------------------------------------- valid time


def test_a_correction_over_a_stretch_already_closed_is_what_replaced_it(agent, published):
    # Munich closed Berlin's stretch in June; a correction (Bonn) from March
    # then takes over what Berlin held: the record names Bonn, by source
    # rank, not Munich a second time.
    berlin = agent.assert_fact(assertion_data(value="Berlin", valid_from="2026-03-01T00:00:00Z", source_id="m-1"))
    munich = agent.assert_fact(assertion_data(value="Munich", valid_from="2026-06-01T00:00:00Z", source_id="m-2"))
    published.clear()

    bonn = agent.assert_fact(assertion_data(value="Bonn", kind="correction", valid_from="2026-03-01T00:00:00Z",
                                            source_id="m-3"))

    superseded = [e.data for e in published if e.type == ev.FACT_SUPERSEDED]
    logged = Event.objects.filter(type=ev.FACT_SUPERSEDED, assertion_id=berlin["assertion_id"]).order_by("at")
    assert munich["supersedes"] == [berlin["assertion_id"]]
    assert sorted(bonn["supersedes"]) == sorted([berlin["assertion_id"], munich["assertion_id"]])
    assert [(d["assertion_id"], d["superseded_by"], d["rule"]) for d in superseded
            if d["assertion_id"] == berlin["assertion_id"]] == [(berlin["assertion_id"], bonn["assertion_id"],
                                                                  "source-rank")]
    assert [e.after for e in logged] == [[munich["assertion_id"]], [bonn["assertion_id"]]]


def test_employer_change_is_a_version_history_not_a_conflict(agent):
    old = agent.assert_fact(assertion_data(predicate="employer", value="Acme", valid_from="2020-01-01T00:00:00Z"))
    new = agent.assert_fact(assertion_data(predicate="employer", value="Globex", valid_from="2023-06-01T00:00:00Z"))

    assert (new["outcome"], new["rule"], new["supersedes"]) == (
        "superseded_existing", "valid-time-supersession", [old["assertion_id"]])
    (now,) = facts(agent, predicate="employer")
    assert (now["value"], now["valid_from"], now["valid_to"]) == ("Globex", "2023-06-01T00:00:00Z", None)
    (then,) = facts(agent, predicate="employer", valid_at="2021-01-01T00:00:00Z")
    assert (then["value"], then["valid_to"], then["asserted_valid_to"]) == ("Acme", "2023-06-01T00:00:00Z", None)
    versions = history(agent, "employer")
    assert [(v["value"], v["status"]) for v in versions] == [("Acme", "superseded"), ("Globex", "current")]
    assert [[s["status"] for s in v["sources"]] for v in versions] == [["superseded"], ["current"]]
    assert versions[0]["superseded_by"] == new["assertion_id"]
    assert versions[1]["supersedes"] == [old["assertion_id"]]
    assert Conflict.objects.filter(tenant=agent.tenant).count() == 0


def test_employer_change_arriving_newest_first_gives_the_same_history(agent):
    agent.assert_fact(assertion_data(predicate="employer", value="Globex", valid_from="2023-06-01T00:00:00Z"))
    old = agent.assert_fact(assertion_data(predicate="employer", value="Acme", valid_from="2020-01-01T00:00:00Z"))

    assert old["outcome"] == "created"
    assert [(v["value"], v["valid_to"], v["status"]) for v in history(agent, "employer")] == [
        ("Acme", "2023-06-01T00:00:00Z", "superseded"), ("Globex", None, "current")]


def test_old_document_pasted_today_lands_in_history(agent):
    agent.assert_fact(assertion_data(predicate="employer", value="Globex", kind="user_document",
                                     valid_from="2024-01-01T00:00:00Z"))

    pasted = agent.assert_fact(assertion_data(predicate="employer", value="Acme", kind="user_document",
                                              stated_at="2023-03-01T09:00:00Z"))

    assert (pasted["outcome"], pasted["supersedes"]) == ("created", [])
    assert values(facts(agent, predicate="employer")) == ["Globex"]
    (then,) = facts(agent, predicate="employer", valid_at="2023-06-01T00:00:00Z")
    assert (then["value"], then["valid_from"], then["valid_to"]) == (
        "Acme", "2023-03-01T09:00:00Z", "2024-01-01T00:00:00Z")
    assert [v["value"] for v in history(agent, "employer")] == ["Acme", "Globex"]


# --------------------------------------------------------------------------- retraction


def test_retraction_is_never_true_unlike_supersession(agent, clock):
    old = agent.assert_fact(assertion_data(predicate="employer", value="Acme", valid_from="2020-01-01T00:00:00Z"))
    clock.shift(60)
    wrong = agent.assert_fact(assertion_data(predicate="employer", value="Globex", valid_from="2023-06-01T00:00:00Z"))
    clock.shift(60)
    believed_at = datetime.now(timezone.utc).isoformat()
    clock.shift(60)

    response = agent.api("POST", f"/assertions/{wrong['assertion_id']}/retract", {"reason": "wrong person"})

    assert response.status_code == 200
    assert response.json()["outcome"] == "retracted"
    clock.shift(60)
    # Supersession closed Acme at Globex's start; retraction says Globex never
    # held, so Acme was never closed.
    (now,) = facts(agent, predicate="employer")
    assert (now["value"], now["valid_to"], now["assertion_id"]) == ("Acme", None, old["assertion_id"])
    assert facts(agent, predicate="employer", valid_at="2024-01-01T00:00:00Z")[0]["value"] == "Acme"
    # Still visible as it was believed before the retraction.
    (before,) = facts(agent, predicate="employer", valid_at="2024-01-01T00:00:00Z", known_at=believed_at)
    assert (before["value"], before["assertion_id"]) == ("Globex", wrong["assertion_id"])
    statuses = {v["assertion_id"]: v["status"] for v in history(agent, "employer")}
    assert statuses == {old["assertion_id"]: "current", wrong["assertion_id"]: "retracted"}


def test_retraction_by_webhook_of_everything_from_one_source(agent):
    agent.assert_fact(assertion_data(predicate="speaks_language", value="German", source_id="msg-1"))
    agent.assert_fact(assertion_data(predicate="pet", value="cat", source_id="msg-1"))
    kept = agent.assert_fact(assertion_data(predicate="pet", value="dog", source_id="msg-2"))

    response = agent.webhook("fact.retracted", {"subject": "u-1", "source_id": "msg-1", "reason": "test chat"})

    assert response.status_code == 200
    assert len(response.json()["retracted"]) == 2
    assert [(f["predicate"], f["assertion_id"]) for f in facts(agent)] == [("pet", kept["assertion_id"])]


# --------------------------------------------------------------------------- cardinality and precedence


def test_five_languages_stay_five(agent):
    languages = ["English", "German", "French", "Spanish", "Italian"]
    outcomes = [agent.assert_fact(assertion_data(predicate="speaks_language", value=lang,
                                                 valid_from=f"2020-0{i + 1}-01T00:00:00Z"))["outcome"]
                for i, lang in enumerate(languages)]

    assert outcomes == ["created"] * 5
    assert sorted(values(facts(agent, predicate="speaks_language"))) == sorted(languages)
    assert sorted(f["value"] for f in agent.get("/subjects/u-1/context")["facts"]) == sorted(languages)


def test_same_value_again_corroborates_with_two_sources(agent):
    first = agent.assert_fact(assertion_data(predicate="city_of_residence", value="Berlin",
                                             valid_from="2025-01-01T00:00:00Z"))
    second = agent.assert_fact(assertion_data(predicate="city_of_residence", value=" berlin", kind="user_document",
                                              valid_from="2025-02-01T00:00:00Z"))

    assert (second["outcome"], second["rule"]) == ("corroborated", "corroboration")
    (fact,) = facts(agent)
    assert fact["assertion_id"] == first["assertion_id"]
    assert [s["assertion_id"] for s in fact["sources"]] == [first["assertion_id"], second["assertion_id"]]
    (version,) = history(agent, "city_of_residence")
    assert len(version["sources"]) == 2


def test_inference_never_overrules_what_the_user_said(agent):
    agent.assert_fact(assertion_data(predicate="employer", value="Acme", valid_from="2024-01-01T00:00:00Z"))

    guessed = agent.assert_fact(assertion_data(predicate="employer", value="Globex", kind="agent_inference",
                                               valid_from="2025-01-01T00:00:00Z"))

    assert (guessed["outcome"], guessed["rule"]) == ("overruled", "source-rank")
    assert values(facts(agent)) == ["Acme"]
    assert {v["value"]: v["status"] for v in history(agent, "employer")} == {"Acme": "current", "Globex": "overruled"}


def test_a_correction_overrules_everything(agent):
    agent.assert_fact(assertion_data(predicate="employer", value="Acme", valid_from="2024-01-01T00:00:00Z"))
    agent.assert_fact(assertion_data(predicate="employer", value="Initech", kind="system_record",
                                     valid_from="2024-01-01T00:00:00Z"))

    corrected = agent.assert_fact(assertion_data(predicate="employer", value="Umbrella", kind="correction",
                                                 valid_from="2024-01-01T00:00:00Z"))
    later = agent.assert_fact(assertion_data(predicate="employer", value="Globex", valid_from="2025-01-01T00:00:00Z"))

    assert corrected["outcome"] == "superseded_existing"
    assert later["outcome"] == "overruled"
    assert values(facts(agent)) == ["Umbrella"]
    assert values(facts(agent, valid_at="2024-06-01T00:00:00Z")) == ["Umbrella"]


@pytest.mark.parametrize("predicate, billed_value, said_value", [
    ("plan", "pro", "free"),
    # DESIGN.md, "Predicate policy": the system of record owns a billing
    # address as it owns a plan (and it is high stakes).
    ("billing_address", "1 Main St", "2 High St"),
])
def test_system_of_record_keeps_and_overrules_the_users_contrary_statement(agent, published, predicate, billed_value,
                                                                           said_value):
    billed = agent.assert_fact(assertion_data(predicate=predicate, value=billed_value, kind="system_record",
                                              valid_from="2025-01-01T00:00:00Z"))

    said = agent.assert_fact(assertion_data(predicate=predicate, value=said_value, valid_from="2026-01-01T00:00:00Z"))

    assert (said["outcome"], said["rule"]) == ("overruled", "system-of-record-authority")
    (fact,) = facts(agent, predicate=predicate)
    assert (fact["value"], fact["assertion_id"], fact["rule"]) == (billed_value, billed["assertion_id"],
                                                                   "system-of-record-authority")
    assert {v["value"]: v["status"] for v in history(agent, predicate)} == {billed_value: "current",
                                                                            said_value: "overruled"}
    followups = [e for e in published if e.type == ev.FOLLOWUP_NEEDED]
    assert [(e.data["assertion_id"], e.data["system_record"]["assertion_id"]) for e in followups] == [
        (said["assertion_id"], billed["assertion_id"])]


def test_system_of_record_arriving_after_the_users_statement_still_opens_a_follow_up(agent, published):
    said = agent.assert_fact(assertion_data(predicate="plan", value="free", valid_from="2026-01-01T00:00:00Z"))

    billed = agent.assert_fact(assertion_data(predicate="plan", value="pro", kind="system_record",
                                              valid_from="2025-01-01T00:00:00Z"))

    assert values(facts(agent)) == ["pro"]
    followups = [e for e in published if e.type == ev.FOLLOWUP_NEEDED]
    assert [(e.data["assertion_id"], e.data["new"]["value"], e.data["system_record"]["assertion_id"])
            for e in followups] == [(said["assertion_id"], "free", billed["assertion_id"])]


def test_system_record_that_only_follows_the_user_in_valid_time_needs_no_follow_up(agent, published):
    agent.assert_fact(assertion_data(predicate="plan", value="free", valid_from="2025-01-01T00:00:00Z"))

    agent.assert_fact(assertion_data(predicate="plan", value="pro", kind="system_record",
                                     valid_from="2026-01-01T00:00:00Z"))

    assert [e for e in published if e.type == ev.FOLLOWUP_NEEDED] == []
    assert values(facts(agent, valid_at="2025-06-01T00:00:00Z")) == ["free"]


def test_handing_a_predicate_to_the_system_of_record_follows_up_the_overruled_user(agent, published):
    said = agent.assert_fact(assertion_data(predicate="employer", value="Acme", valid_from="2025-01-01T00:00:00Z"))
    agent.assert_fact(assertion_data(predicate="employer", value="Globex", kind="system_record",
                                     valid_from="2025-01-01T00:00:00Z"))

    agent.api("PUT", "/predicates/employer", {"cardinality": "one", "stakes": "low", "authority": "system_record"})

    assert values(facts(agent)) == ["Globex"]
    assert [e.data["assertion_id"] for e in published if e.type == ev.FOLLOWUP_NEEDED] == [said["assertion_id"]]


# --------------------------------------------------------------------------- ties, scope, TTL


def test_high_stakes_tie_is_a_conflict_and_withheld_from_context(agent, published):
    agent.assert_fact(assertion_data(predicate="employer", value="Acme"))
    home = agent.assert_fact(assertion_data(predicate="billing_address", value="1 Main St",
                                            valid_from="2025-01-01T00:00:00Z"))

    office = agent.assert_fact(assertion_data(predicate="billing_address", value="2 High St",
                                              valid_from="2025-01-01T00:00:00Z"))

    assert office["outcome"] == "conflict" and office["conflict_id"]
    (fact,) = facts(agent, predicate="billing_address")
    assert fact["status"] == "conflict" and fact["conflict_id"] == office["conflict_id"]
    assert sorted(c["assertion_id"] for c in fact["candidates"]) == sorted(
        [home["assertion_id"], office["assertion_id"]])
    context = agent.get("/subjects/u-1/context")
    assert [f["predicate"] for f in context["facts"]] == ["employer"]
    assert [(w["predicate"], w["reason"]) for w in context["withheld"]] == [("billing_address", "conflict")]
    assert [e.data["conflict_id"] for e in published if e.type == ev.CONFLICT_OPENED] == [office["conflict_id"]]


def test_high_stakes_tie_cut_by_a_later_claim_is_still_one_conflict(agent):
    agent.assert_fact(assertion_data(predicate="billing_address", value="1 Main St", valid_from="2025-01-01T00:00:00Z"))
    tie = agent.assert_fact(assertion_data(predicate="billing_address", value="2 High St",
                                           valid_from="2025-01-01T00:00:00Z"))

    agent.assert_fact(assertion_data(predicate="billing_address", value="3 Low Rd", kind="agent_inference",
                                     valid_from="2025-06-01T00:00:00Z"))

    assert tie["conflict_id"] is not None
    assert [str(c.id) for c in Conflict.objects.filter(tenant=agent.tenant, status=Conflict.OPEN)] == [
        tie["conflict_id"]]
    assert facts(agent, predicate="billing_address")[0]["conflict_id"] == tie["conflict_id"]


def test_tie_carried_on_by_new_claims_of_the_same_values_is_the_same_conflict(agent):
    # A later pair of the same two values ends the first pair and ties in
    # turn: one stretch of one tie, so one conflict holding all four.
    def send(value, valid_from):
        return agent.assert_fact(assertion_data(predicate="billing_address", value=value, valid_from=valid_from))

    send("1 Main St", "2025-01-01T00:00:00Z")
    first = send("2 High St", "2025-01-01T00:00:00Z")
    send("1 Main St", "2025-06-01T00:00:00Z")

    last = send("2 High St", "2025-06-01T00:00:00Z")

    assert (last["outcome"], last["conflict_id"]) == ("conflict", first["conflict_id"])
    (conflict,) = Conflict.objects.filter(tenant=agent.tenant, status=Conflict.OPEN)
    assert len(conflict.candidate_ids) == 4 and last["assertion_id"] in conflict.candidate_ids
    (fact,) = facts(agent, predicate="billing_address")
    assert fact["conflict_id"] == first["conflict_id"] and len(fact["candidates"]) == 4


def test_tie_that_outlasts_its_rival_is_a_conflict_not_a_supersession(agent, published):
    # The real DyKnow pair of acting Polish presidents: same start, the
    # second holds alone after the first ends. Nothing was superseded.
    agent.api("PUT", "/predicates/office", {"cardinality": "one", "stakes": "high"})
    first = agent.assert_fact(assertion_data(predicate="office", value="X", kind="system_record",
                                             valid_from="2010-07-08T00:00:00Z", valid_to="2010-07-09T00:00:00Z"))

    second = agent.assert_fact(assertion_data(predicate="office", value="Y", kind="system_record",
                                              valid_from="2010-07-08T00:00:00Z", valid_to="2010-08-06T00:00:00Z"))

    assert (second["outcome"], second["supersedes"]) == ("conflict", [])
    assert second["conflict_id"] == str(Conflict.objects.get(tenant=agent.tenant, status=Conflict.OPEN).id)
    assert [e.type for e in published if e.type == ev.FACT_SUPERSEDED] == []
    assert Event.objects.filter(assertion_id=first["assertion_id"], type=ev.FACT_SUPERSEDED).count() == 0


def test_low_stakes_tie_is_settled_by_the_later_statement(agent):
    agent.assert_fact(assertion_data(predicate="employer", value="Acme", valid_from="2025-01-01T00:00:00Z",
                                     stated_at="2025-02-01T00:00:00Z"))
    later = agent.assert_fact(assertion_data(predicate="employer", value="Globex", valid_from="2025-01-01T00:00:00Z",
                                             stated_at="2025-03-01T00:00:00Z"))

    assert later["outcome"] == "superseded_existing"
    (fact,) = facts(agent)
    assert (fact["value"], fact["rule"]) == ("Globex", "tie-stated-at")
    assert Conflict.objects.get(tenant=agent.tenant).status == Conflict.RESOLVED


def test_task_scope_never_closes_a_global_preference(agent):
    agent.api("PUT", "/predicates/package_manager", {"cardinality": "one", "stakes": "low"})
    preference = agent.assert_fact(assertion_data(predicate="package_manager", value="npm",
                                                  valid_from="2025-01-01T00:00:00Z"))

    this_time = agent.assert_fact(assertion_data(predicate="package_manager", value="pnpm", scope="task:x",
                                                 valid_from="2026-01-01T00:00:00Z"))

    assert (this_time["outcome"], this_time["supersedes"]) == ("created", [])
    (global_now,) = facts(agent, scope="global")
    assert (global_now["value"], global_now["valid_to"], global_now["assertion_id"]) == (
        "npm", None, preference["assertion_id"])
    assert sorted((f["scope"], f["value"]) for f in facts(agent)) == [("global", "npm"), ("task:x", "pnpm")]
    assert [v["status"] for v in history(agent, "package_manager")] == ["current"]


def test_ttl_ephemeral_predicate_stops_being_current(agent, clock):
    response = agent.api("PUT", "/predicates/mood", {"cardinality": "one", "stakes": "low", "ttl_seconds": 3600})
    assert response.status_code == 200
    agent.assert_fact(assertion_data(predicate="mood", value="tired"))
    assert values(facts(agent)) == ["tired"]

    clock.shift(3601)

    assert facts(agent) == []
    assert agent.get("/subjects/u-1/context")["facts"] == []
    (then,) = facts(agent, valid_at=T0.isoformat())
    assert then["valid_to"] == "2026-03-01T13:00:00Z"


# --------------------------------------------------------------------------- high stakes


def test_high_stakes_change_is_proposed_until_a_correction_confirms_it(agent):
    old = agent.assert_fact(assertion_data(predicate="billing_address", value="1 Main St",
                                           valid_from="2025-01-01T00:00:00Z"))

    proposed = agent.assert_fact(assertion_data(predicate="billing_address", value="2 High St",
                                                valid_from="2026-01-01T00:00:00Z"))

    assert (proposed["outcome"], proposed["rule"]) == ("proposed", "high-stakes-confirmation")
    assert values(facts(agent)) == ["1 Main St"]
    context = agent.get("/subjects/u-1/context")
    assert [f["value"] for f in context["facts"]] == ["1 Main St"]
    assert [(w["predicate"], w["reason"]) for w in context["withheld"]] == [("billing_address", "proposed")]
    assert {v["value"]: v["status"] for v in history(agent, "billing_address")} == {
        "1 Main St": "current", "2 High St": "proposed"}

    confirmed = agent.assert_fact(assertion_data(predicate="billing_address", value="2 High St", kind="correction",
                                                 valid_from="2026-01-01T00:00:00Z", source_id="prompt:1"))

    assert (confirmed["outcome"], confirmed["supersedes"]) == ("superseded_existing", [old["assertion_id"]])
    (now,) = facts(agent)
    assert now["value"] == "2 High St"
    assert sorted(s["assertion_id"] for s in now["sources"]) == sorted(
        [proposed["assertion_id"], confirmed["assertion_id"]])
    assert agent.get("/subjects/u-1/context")["withheld"] == []


def test_high_stakes_correction_applies_at_once(agent):
    agent.assert_fact(assertion_data(predicate="email", value="a@example.org", valid_from="2025-01-01T00:00:00Z"))

    corrected = agent.assert_fact(assertion_data(predicate="email", value="b@example.org", kind="correction",
                                                 valid_from="2026-01-01T00:00:00Z"))

    assert corrected["outcome"] == "superseded_existing"
    assert values(facts(agent)) == ["b@example.org"]


# --------------------------------------------------------------------------- predicate policy


def test_unknown_predicate_is_admitted_as_many_and_unclassified(agent):
    agent.assert_fact(assertion_data(predicate="favourite_colour", value="blue", valid_from="2025-01-01T00:00:00Z"))
    agent.assert_fact(assertion_data(predicate="favourite_colour", value="red", valid_from="2026-01-01T00:00:00Z"))

    assert sorted(values(facts(agent))) == ["blue", "red"]
    listing = agent.get("/predicates")
    assert "favourite_colour" in listing["unclassified"]
    (policy,) = [p for p in listing["predicates"] if p["predicate"] == "favourite_colour"]
    assert (policy["cardinality"], policy["stakes"], policy["classified"]) == ("many", "low", False)


def test_one_predicate_s_policy_reads_as_it_stands(agent):
    unused = agent.api("GET", "/predicates/favourite_colour")
    assert (unused.status_code, unused.json()["origin"], unused.json()["cardinality"]) == (200, "unclassified", "many")

    agent.api("PUT", "/predicates/favourite_colour", {"cardinality": "one", "stakes": "low"})

    policy = agent.get("/predicates/favourite_colour")
    assert (policy["origin"], policy["cardinality"], policy["stakes"], policy["classified"]) == (
        "tenant", "one", "low", True)
    assert policy == next(p for p in agent.get("/predicates")["predicates"] if p["predicate"] == "favourite_colour")


def test_classifying_as_one_reruns_detection(agent):
    blue = agent.assert_fact(assertion_data(predicate="favourite_colour", value="blue",
                                            valid_from="2025-01-01T00:00:00Z"))
    red = agent.assert_fact(assertion_data(predicate="favourite_colour", value="red",
                                           valid_from="2026-01-01T00:00:00Z"))

    response = agent.api("PUT", "/predicates/favourite_colour", {"cardinality": "one", "stakes": "low"})

    assert response.status_code == 200
    assert (response.json()["classified"], response.json()["rerun"]["changed"]) == (True, 1)
    (now,) = facts(agent)
    assert (now["value"], now["assertion_id"]) == ("red", red["assertion_id"])
    (then,) = facts(agent, valid_at="2025-06-01T00:00:00Z")
    assert (then["assertion_id"], then["valid_to"]) == (blue["assertion_id"], "2026-01-01T00:00:00Z")
    assert "favourite_colour" not in agent.get("/predicates")["unclassified"]


def test_classifying_as_high_stakes_opens_a_conflict_over_existing_facts(agent):
    agent.assert_fact(assertion_data(predicate="tax_id", value="DE-1", valid_from="2025-01-01T00:00:00Z"))
    agent.assert_fact(assertion_data(predicate="tax_id", value="DE-2", valid_from="2025-01-01T00:00:00Z"))

    response = agent.api("PUT", "/predicates/tax_id", {"cardinality": "one", "stakes": "high"})

    assert response.json()["rerun"]["conflicts_opened"] == 1
    assert [f["status"] for f in facts(agent)] == ["conflict"]


def test_policy_change_does_not_rewrite_as_of_answers(agent, clock):
    agent.assert_fact(assertion_data(predicate="favourite_colour", value="blue", valid_from="2025-01-01T00:00:00Z"))
    agent.assert_fact(assertion_data(predicate="favourite_colour", value="red", valid_from="2026-01-01T00:00:00Z"))
    clock.shift(60)
    before_policy = datetime.now(timezone.utc).isoformat()
    clock.shift(60)

    agent.api("PUT", "/predicates/favourite_colour", {"cardinality": "one", "stakes": "low"})

    assert sorted(values(facts(agent, known_at=before_policy))) == ["blue", "red"]
    assert values(facts(agent)) == ["red"]


def test_bad_policy_is_refused_naming_the_field(agent):
    response = agent.api("PUT", "/predicates/mood", {"cardinality": "one", "stakes": "low", "ttl_seconds": -5})

    assert (response.status_code, response.json()["field"]) == (400, "ttl_seconds")


# --------------------------------------------------------------------------- as-of


def test_as_of_answer_equals_what_the_current_view_said_then(agent, clock):
    agent.assert_fact(assertion_data(predicate="speaks_language", value="German", valid_from="2020-01-01T00:00:00Z"))
    agent.assert_fact(assertion_data(predicate="speaks_language", value="English", valid_from="2021-01-01T00:00:00Z"))
    agent.assert_fact(assertion_data(predicate="employer", value="Acme", valid_from="2025-01-01T00:00:00Z"))
    agent.assert_fact(assertion_data(predicate="employer", value="Globex", valid_from="2025-01-01T00:00:00Z"))
    clock.shift(60)
    agent.api("PUT", "/predicates/employer", {"cardinality": "one", "stakes": "high"})
    clock.shift(60)
    then, snapshot = datetime.now(timezone.utc).isoformat(), facts(agent)
    clock.shift(60)

    agent.assert_fact(assertion_data(predicate="speaks_language", value="Basque", valid_from="2019-01-01T00:00:00Z"))
    agent.assert_fact(assertion_data(predicate="employer", value="Initech", kind="correction",
                                     valid_from="2025-01-01T00:00:00Z"))

    assert [f.get("value") or f["status"] for f in snapshot] == ["conflict", "English", "German"]
    assert facts(agent, known_at=then) == snapshot
    assert values(facts(agent)) == ["Initech", "Basque", "English", "German"]


# --------------------------------------------------------------------------- history, export, erasure


def test_history_shows_every_assertion_exactly_once(agent, clock):
    ids = [agent.assert_fact(assertion_data(predicate="billing_address", **kw))["assertion_id"] for kw in (
        {"value": "1 Main St", "valid_from": "2024-01-01T00:00:00Z"},
        {"value": "1 main st", "kind": "user_document", "valid_from": "2024-02-01T00:00:00Z"},
        {"value": "9 Guess Ave", "kind": "agent_inference", "valid_from": "2024-03-01T00:00:00Z"},
        {"value": "2 High St", "valid_from": "2025-01-01T00:00:00Z"},
        {"value": "3 Low Rd", "kind": "correction", "valid_from": "2025-06-01T00:00:00Z"},
        {"value": "4 Gone Ln", "valid_from": "2023-01-01T00:00:00Z", "valid_to": "2023-06-01T00:00:00Z"},
        {"value": "5 Erased Pl", "valid_from": "2022-01-01T00:00:00Z", "valid_to": "2022-06-01T00:00:00Z"},
    )]
    clock.shift(60)
    agent.api("POST", f"/assertions/{ids[5]}/retract", {"reason": "never lived there"})
    agent.api("POST", f"/assertions/{ids[6]}/erase")

    versions = history(agent, "billing_address")

    listed = [s["assertion_id"] for v in versions for s in v["sources"]]
    assert sorted(listed) == sorted(ids)
    assert {v["status"] for v in versions} == {
        "erased", "retracted", "superseded", "overruled", "proposed", "current"}
    assert [v["valid_from"] for v in versions] == sorted(v["valid_from"] for v in versions)


def test_export_holds_everything_about_the_subject(agent):
    fact = agent.assert_fact(assertion_data(predicate="employer", value="Acme", valid_from="2024-01-01T00:00:00Z"))
    agent.assert_fact(assertion_data(predicate="speaks_language", value="German"))
    agent.assert_fact(assertion_data(subject="u-2", predicate="employer", value="Other Person Corp"))

    exported = agent.get("/subjects/u-1/export")

    assert exported["subject"] == "u-1"
    assert sorted(f["value"] for f in exported["current"]) == ["Acme", "German"]
    assert sorted(k["predicate"] for k in exported["keys"]) == ["employer", "speaks_language"]
    assert fact["assertion_id"] in {e["assertion_id"] for e in exported["events"]}
    assert "Other Person Corp" not in json.dumps(exported)


def test_erase_destroys_value_and_evidence_everywhere_and_leaves_a_tombstone(agent, clock):
    berlin = agent.assert_fact(assertion_data(predicate="city_of_residence", value="Berlinchen", source_id="msg-42",
                                              valid_from="2024-01-01T00:00:00Z"))
    agent.assert_fact(assertion_data(predicate="city_of_residence", value="Munich", valid_from="2025-01-01T00:00:00Z"))
    clock.shift(60)
    before_erasure = datetime.now(timezone.utc).isoformat()
    clock.shift(60)

    response = agent.api("POST", f"/assertions/{berlin['assertion_id']}/erase")

    assert (response.status_code, response.json()["outcome"]) == (200, "erased")
    assert facts(agent, valid_at="2024-06-01T00:00:00Z") == []
    assert facts(agent, valid_at="2024-06-01T00:00:00Z", known_at=before_erasure) == []
    tombstone = next(v for v in history(agent, "city_of_residence") if v["assertion_id"] == berlin["assertion_id"])
    assert (tombstone["status"], tombstone["value"], tombstone["sources"][0]["evidence"]) == ("erased", None, "")
    assert Assertion.objects.filter(id=berlin["assertion_id"]).exists()
    dump = tenant_dump(agent.tenant) + json.dumps(agent.get("/subjects/u-1/export"))
    assert "berlinchen" not in dump.lower()
    # Nor can the value be recovered by hashing guesses against what is kept.
    assert content_hash(source_id="msg-42", value_key=normalise_value("Berlinchen")) not in dump
    assert Event.objects.filter(assertion_id=berlin["assertion_id"]).exclude(payload_hash="").count() == 0


def test_erasing_twice_keeps_the_first_tombstone(agent, clock):
    fact = agent.assert_fact(assertion_data(predicate="employer", value="Acme"))
    agent.api("POST", f"/assertions/{fact['assertion_id']}/erase")
    first = Assertion.objects.get(id=fact["assertion_id"]).erased_at
    before = row_counts(agent.tenant)
    clock.shift(60)

    again = agent.api("POST", f"/assertions/{fact['assertion_id']}/erase")

    assert (again.status_code, again.json()["outcome"]) == (200, "erased")
    assert Assertion.objects.get(id=fact["assertion_id"]).erased_at == first
    assert row_counts(agent.tenant) == before


def test_delete_subject_erases_everything_about_the_person(agent):
    agent.assert_fact(assertion_data(predicate="employer", value="Acme", subject_name="Ada Lovelace"))
    agent.assert_fact(assertion_data(predicate="speaks_language", value="Esperanto"))
    agent.assert_fact(assertion_data(subject="u-2", predicate="employer", value="Kept Corp"))

    response = agent.api("DELETE", "/subjects/u-1")

    assert (response.status_code, response.json()["erased_assertions"]) == (200, 2)
    assert facts(agent) == []
    assert {v["status"] for v in history(agent, "employer") + history(agent, "speaks_language")} == {"erased"}
    dump = tenant_dump(agent.tenant)
    assert ("Acme" in dump, "Esperanto" in dump, "Ada Lovelace" in dump, "Kept Corp" in dump) == (
        False, False, False, True)


# --------------------------------------------------------------------------- isolation


def test_another_tenants_key_sees_nothing(agent, other_agent):
    fact = agent.assert_fact(assertion_data(predicate="employer", value="Acme"))
    before = row_counts(agent.tenant)

    responses = [
        other_agent.api("GET", "/subjects/u-1/facts"),
        other_agent.api("GET", "/subjects/u-1/context"),
        other_agent.api("GET", "/subjects/u-1/history", predicate="employer"),
        other_agent.api("GET", "/subjects/u-1/export"),
        other_agent.api("POST", f"/assertions/{fact['assertion_id']}/retract", {"reason": "x"}),
        other_agent.api("POST", f"/assertions/{fact['assertion_id']}/erase"),
        other_agent.api("DELETE", "/subjects/u-1"),
    ]

    assert [r.status_code for r in responses] == [404] * 7
    assert row_counts(agent.tenant) == before
    assert values(facts(agent)) == ["Acme"]


def test_another_tenants_webhook_retraction_is_not_found(agent, other_agent):
    fact = agent.assert_fact(assertion_data(predicate="employer", value="Acme"))

    response = other_agent.webhook("fact.retracted", {"assertion_id": fact["assertion_id"]})

    assert response.status_code == 404
    assert values(facts(agent)) == ["Acme"]


def test_same_subject_id_in_two_tenants_are_two_people(agent, other_agent):
    agent.assert_fact(assertion_data(predicate="employer", value="Acme"))
    other_agent.assert_fact(assertion_data(predicate="employer", value="Globex"))

    assert (values(facts(agent)), values(facts(other_agent))) == (["Acme"], ["Globex"])


def test_without_a_key_the_api_answers_401(agent):
    response = agent.client.get("/api/v1/subjects/u-1/facts")

    assert response.status_code == 401


def test_a_write_resolves_with_the_tenant_ranking_in_force(agent):
    ledger.set_source_ranking(tenant=agent.tenant, actor="test", ranking=[
        "agent_inference", "user_statement", "correction", "system_record", "user_document"])
    agent.assert_fact(assertion_data(predicate="employer", value="Acme", valid_from="2024-01-01T00:00:00Z"))

    guessed = agent.assert_fact(assertion_data(predicate="employer", value="Globex", kind="agent_inference",
                                               valid_from="2024-01-01T00:00:00Z"))

    assert (guessed["outcome"], guessed["rule"]) == ("superseded_existing", "source-rank")


def test_a_policy_for_a_predicate_no_assertion_could_use_is_400_and_writes_nothing(agent):
    before = PredicatePolicy.objects.filter(tenant=agent.tenant).count()

    response = agent.api("PUT", "/predicates/bad name!", {"cardinality": "one", "stakes": "low"})

    assert (response.status_code, response.json()["field"]) == (400, "predicate")
    assert PredicatePolicy.objects.filter(tenant=agent.tenant).count() == before


def test_a_subject_takes_the_first_name_given_and_keeps_it(agent):
    agent.assert_fact(assertion_data(predicate="employer", value="Acme"))
    assert Subject.objects.get(tenant=agent.tenant, external_id="u-1").display_name == ""

    agent.assert_fact(assertion_data(predicate="employer", value="Globex", subject_name="Ada Lovelace"))
    agent.assert_fact(assertion_data(predicate="pet", value="cat", subject_name="Someone Else"))

    assert Subject.objects.get(tenant=agent.tenant, external_id="u-1").display_name == "Ada Lovelace"


def test_a_supersession_records_the_rule_that_decided_it(agent):
    # Equal rank, equal start: the tie rule, not a source rank the two do not differ in.
    munich = agent.assert_fact(assertion_data(value="Munich", valid_from="2026-11-01T00:00:00Z",
                                              stated_at="2026-11-01T00:00:00Z", source_id="m-1"))
    agent.assert_fact(assertion_data(value="Paris", valid_from="2026-11-01T00:00:00Z",
                                     stated_at="2026-11-02T00:00:00Z", source_id="m-2"))
    bonn = agent.assert_fact(assertion_data(value="Bonn", kind="correction", valid_from="2026-11-01T00:00:00Z",
                                            source_id="m-3"))

    rules = list(Event.objects.filter(type=ev.FACT_SUPERSEDED).order_by("id").values_list("rule", flat=True))

    assert rules[0] == "tie-stated-at"
    assert set(rules[1:]) == {"source-rank"} and bonn["supersedes"]
    assert Event.objects.filter(type=ev.FACT_SUPERSEDED, assertion_id=munich["assertion_id"]).exists()
