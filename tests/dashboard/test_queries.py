"""Dashboard reads: the memory list stays at a fixed number of queries
whatever the number of memories; search, filters and pagination; time
travel is exact as of a past day; the activity feed is in words."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dashboard import queries
from tests.dashboard.factories import projected_memories

pytestmark = pytest.mark.django_db


def home_queries(person) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = person.client.get("/")
    assert response.status_code == 200
    return len(ctx.captured_queries)


def test_memory_page_query_count_is_the_same_at_10_and_1000_memories(person, neighbour):
    projected_memories(subject=person.subject, count=10)
    projected_memories(subject=neighbour.subject, count=1000)

    at_ten = home_queries(person)
    at_thousand = home_queries(neighbour)

    assert at_ten == at_thousand
    assert at_thousand <= 12


def test_memory_page_htmx_partial_query_count_is_the_same_at_10_and_1000(person, neighbour):
    projected_memories(subject=person.subject, count=10)
    projected_memories(subject=neighbour.subject, count=1000)

    with CaptureQueriesContext(connection) as small:
        person.client.get("/?page=2", headers={"HX-Request": "true"})
    with CaptureQueriesContext(connection) as large:
        neighbour.client.get("/?page=2", headers={"HX-Request": "true"})

    assert len(small.captured_queries) == len(large.captured_queries)


def test_list_is_paginated_fifty_at_a_time(person):
    projected_memories(subject=person.subject, count=120)

    page, groups = queries.memory_page(subject=person.subject, filters=queries.MemoryFilters(), page=3)

    assert page.paginator.count == 121  # and the note the fixture sent
    assert len(page.object_list) == 21
    assert page.paginator.num_pages == 3


def test_search_finds_values_and_evidence(person):
    person.remember(predicate="city_of_residence", value="Munich",
                    source={"kind": "user_statement", "id": "m-1", "evidence": "We moved last week"})

    by_value = queries.memory_queryset(subject=person.subject, filters=queries.MemoryFilters(q="munich"),
                                       now=datetime.now(timezone.utc))
    by_evidence = queries.memory_queryset(subject=person.subject, filters=queries.MemoryFilters(q="moved last"),
                                          now=datetime.now(timezone.utc))

    assert [r.value for r in by_value] == ["Munich"]
    assert [r.value for r in by_evidence] == ["Munich"]


def test_filters_by_source_kind_entity_and_pending(person):
    person.remember(predicate="plan", value="Family", source={"kind": "system_record", "id": "billing:1"})
    person.remember(entity="Marc", predicate="employer", value="Globex")
    person.remember(predicate="billing_address", value="Alte Str. 1", valid_from="2025-03-01T00:00:00Z")
    person.remember(predicate="billing_address", value="Neue Str. 2", valid_from="2025-11-01T00:00:00Z")
    now = datetime.now(timezone.utc)

    def values(**kw):
        return [r.value for r in queries.memory_queryset(subject=person.subject, filters=queries.MemoryFilters(**kw),
                                                         now=now)]

    assert values(kind="system_record") == ["Family"]
    assert values(entity="Marc") == ["Globex"]
    assert values(pending=True) == ["Neue Str. 2"]


def test_list_puts_the_person_first_then_other_entities(person):
    person.remember(entity="Aaron", predicate="employer", value="Initech")
    person.remember(predicate="employer", value="Acme")

    page, groups = queries.memory_page(subject=person.subject, filters=queries.MemoryFilters())

    assert [g["label"] for g in groups] == ["About you", "About Aaron"]


def test_time_travel_is_exact_as_of_the_day_it_believed(person):
    march = datetime(2025, 3, 2, 12, tzinfo=timezone.utc)
    with time_machine.travel(march, tick=False):
        person.remember(predicate="city_of_residence", value="Berlin", valid_from="2025-03-01T00:00:00Z")
    with time_machine.travel(march + timedelta(days=270), tick=False):
        person.remember(predicate="city_of_residence", value="Munich", valid_from="2025-11-22T00:00:00Z")

    before_learning = queries.time_travel(subject=person.subject, believed_on=march + timedelta(days=30),
                                          about=datetime(2025, 12, 31, tzinfo=timezone.utc))
    row = next(r for r in before_learning["rows"] if r.predicate == "city_of_residence")

    assert (row.then, row.today, row.change) == ("Berlin", "Munich", "changed")


def test_time_travel_lists_what_is_new_and_what_is_gone(person):
    march = datetime(2025, 3, 2, 12, tzinfo=timezone.utc)
    with time_machine.travel(march, tick=False):
        acme = person.remember(predicate="employer", value="Acme", valid_from="2025-01-01T00:00:00Z",
                               valid_to="2025-06-01T00:00:00Z")
    person.remember(predicate="job_title", value="Designer", valid_from="2025-01-01T00:00:00Z")
    person.agent.api("POST", f"/assertions/{acme['assertion_id']}/retract", {"reason": "never worked there"})

    result = queries.time_travel(subject=person.subject, believed_on=march + timedelta(days=1),
                                 about=datetime(2025, 3, 1, tzinfo=timezone.utc))
    changes = {r.predicate: r.change for r in result["rows"]}

    assert changes["employer"] == "gone"
    assert changes["job_title"] == "new"


def test_time_travel_from_today_compares_today_about_the_same_day(person):
    person.remember(predicate="city_of_residence", value="Paris", valid_from="2024-01-01T00:00:00Z")
    person.remember(predicate="city_of_residence", value="Cologne", valid_from="2026-11-01T00:00:00Z",
                    source={"kind": "correction", "id": "c-1"})

    result = queries.time_travel(subject=person.subject, believed_on=datetime.now(timezone.utc),
                                 about=datetime(2024, 6, 1, 23, 59, tzinfo=timezone.utc))
    row = next(r for r in result["rows"] if r.predicate == "city_of_residence")

    assert (row.then, row.today, row.change) == ("Paris", "Paris", "same")
    assert result["counts"]["same"] == len(result["rows"])


def test_time_travel_page_says_today_is_about_the_same_day(person):
    person.remember(predicate="city_of_residence", value="Paris", valid_from="2024-01-01T00:00:00Z")
    today = datetime.now(timezone.utc).date().isoformat()

    response = person.client.get("/time-travel/", {"believed_on": today, "about": "2024-06-01"})

    text = " ".join(response.content.decode().split())
    assert "Compared with what it believes today about 1 June 2024:" in text


def test_activity_names_what_was_learned_and_replaced(person):
    person.remember(predicate="city_of_residence", value="Berlin", valid_from="2025-03-01T00:00:00Z")
    person.remember(predicate="city_of_residence", value="Munich", valid_from="2025-11-22T00:00:00Z")

    items, _ = queries.activity(subject=person.subject)

    texts = [i.text for i in items]
    assert "“Munich” replaced “Berlin” (where you live)." in texts
    assert "Learned “Berlin” (where you live), you said." in texts
