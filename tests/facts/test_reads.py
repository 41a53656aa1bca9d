"""The lean read paths (API.md, "Reads"; issue 6, performance): the current
view's items built by PostgreSQL equal the ones the Python builder makes,
authentication is one cheap query that a revocation stops at once, and each
read keeps a small, fixed number of queries."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

from facts import queries
from facts.models import ApiKey, Assertion, CurrentFact, Event, LoginLink, PredicatePolicy, SourceRanking
from facts.projection import iso
from facts.resolve import DEFAULT_RANKING
from facts.tenants import create_or_rotate_tenant, tenant_for_api_key
from tests.factories import assertion_data

TIMES = [
    datetime(2025, 1, 1, tzinfo=timezone.utc),
    datetime(2025, 1, 1, 0, 0, 0, 1, tzinfo=timezone.utc),
    datetime(2025, 6, 30, 23, 59, 59, 999999, tzinfo=timezone.utc),
    datetime(2025, 6, 30, 23, 59, 59, 500000, tzinfo=timezone.utc),
    datetime(1, 1, 1, tzinfo=timezone.utc),
    datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc),
    datetime(2024, 2, 29, 12, 30, tzinfo=timezone(timedelta(hours=5, minutes=30))),
]


@pytest.mark.parametrize("value", TIMES, ids=str)
def test_sql_iso_formats_times_like_iso(db, value):
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {queries._iso_sql('%(t)s::timestamptz')}", {"t": value})
        assert cursor.fetchone()[0] == iso(value.astimezone(timezone.utc))


def test_sql_iso_of_null_is_null(db):
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {queries._iso_sql('NULL::timestamptz')}")
        assert cursor.fetchone()[0] is None


def _populate(agent):
    """Values of every shape, microsecond times, a bounded claim, a scoped
    fact, a multi-valued key, a high-stakes conflict and a proposal."""
    agent.assert_fact(assertion_data(predicate="employer", value="Acme", valid_from="2024-01-01T00:00:00.000001Z"))
    agent.assert_fact(assertion_data(predicate="employer", value="Zürich AG ✓", valid_from="2025-02-03T04:05:06.5Z",
                                     valid_to="2027-01-01T00:00:00Z"))
    agent.assert_fact(assertion_data(predicate="speaks_language", value="German"))
    agent.assert_fact(assertion_data(predicate="speaks_language", value="English"))
    agent.assert_fact(assertion_data(predicate="note", value={"b": [1, 2.5, None, True], "a": "\"quoted\"\n"}))
    agent.assert_fact(assertion_data(predicate="note", value=42))
    agent.assert_fact(assertion_data(predicate="job_title", value="Engineer", scope="project:p-1"))
    agent.assert_fact(assertion_data(predicate="billing_address", value="1 Main St", valid_from="2025-01-01T00:00:00Z"))
    agent.assert_fact(assertion_data(predicate="billing_address", value="2 High St", valid_from="2025-01-01T00:00:00Z"))
    agent.assert_fact(assertion_data(predicate="legal_name", value="Ann Smith", valid_from="2024-01-01T00:00:00Z"))
    agent.assert_fact(assertion_data(predicate="legal_name", value="Ann Jones", valid_from="2025-05-01T00:00:00Z"))


def test_stored_items_equal_python_built_items(agent):
    _populate(agent)
    rows = list(CurrentFact.objects.filter(tenant=agent.tenant))
    assert {r.status for r in rows} >= {"value", "conflict"}
    with connection.cursor() as cursor:
        cursor.execute("SELECT f.id, f.item FROM facts_currentfact f WHERE f.tenant_id = %s", [agent.tenant.id])
        built = {row_id: json.loads(text) for row_id, text in cursor.fetchall()}
    for row in rows:
        if row.status in ("value", "conflict"):
            assert built[row.id] == queries.fact_item_from_row(row), row.predicate


def test_a_stored_item_follows_an_update_of_its_row(agent):
    # Whoever changes a projection row (a rebuild, a repair), its item
    # follows: the trigger of migration facts/0005 rebuilds it.
    agent.assert_fact(assertion_data(predicate="employer", value="Acme"))
    row = CurrentFact.objects.get(tenant=agent.tenant, predicate="employer")
    CurrentFact.objects.filter(pk=row.pk).update(valid_to=datetime(2031, 2, 3, 4, 5, 6, 700000, tzinfo=timezone.utc),
                                                  value="Globex")
    row.refresh_from_db()
    with connection.cursor() as cursor:
        cursor.execute("SELECT item FROM facts_currentfact WHERE id = %s", [row.pk])
        item = json.loads(cursor.fetchone()[0])

    assert item == queries.fact_item_from_row(row)
    assert (item["value"], item["valid_to"]) == ("Globex", "2031-02-03T04:05:06.700000Z")


@pytest.mark.parametrize("valid_at", [None, "2024-06-01T00:00:00Z", "2025-02-03T04:05:06.5Z", "2030-01-01T00:00:00Z"])
def test_facts_now_body_equals_python_built_body(agent, valid_at):
    _populate(agent)
    tenant = agent.tenant
    at = datetime.fromisoformat(valid_at.replace("Z", "+00:00")) if valid_at else None
    body = json.loads(queries.facts_at_json(tenant=tenant, external_id="u-1", valid_at=at))
    subject = queries.get_subject(tenant=tenant, external_id="u-1")
    expected = [queries.fact_item_from_row(r) for r in sorted(
        queries.current_rows(subject=subject, valid_at=at or datetime.fromisoformat(body["valid_at"].replace("Z", "+00:00"))),
        key=queries._row_order)]
    assert body["facts"] == expected and expected
    assert body["subject"] == "u-1" and body["known_at"].endswith("Z")
    assert queries.facts_at(tenant=tenant, external_id="u-1", valid_at=at)["facts"] == expected


def test_facts_now_over_http_is_json_and_filters(agent):
    _populate(agent)
    response = agent.api("GET", "/subjects/u-1/facts")
    assert response.status_code == 200 and response["Content-Type"] == "application/json; charset=utf-8"
    assert [f["predicate"] for f in response.json()["facts"]] == sorted(f["predicate"] for f in response.json()["facts"])
    only = agent.get("/subjects/u-1/facts", predicate="job_title", scope="project:p-1")["facts"]
    assert [(f["value"], f["scope"]) for f in only] == [("Engineer", "project:p-1")]
    assert agent.get("/subjects/u-1/facts", predicate="job_title")["facts"] == only
    assert agent.get("/subjects/u-1/facts", predicate="job_title", scope="global")["facts"] == []
    assert agent.get("/subjects/u-1/facts", entity="someone-else")["facts"] == []


def test_reads_of_an_unknown_or_foreign_subject_are_404(agent, other_agent):
    _populate(agent)
    other_agent.assert_fact(assertion_data(subject="u-2", predicate="employer", value="Other"))
    past = "2020-01-01T00:00:00Z"
    for path, params in [("/subjects/u-2/facts", {}), ("/subjects/u-2/facts", {"known_at": past}),
                         ("/subjects/u-2/context", {}), ("/subjects/u-2/history", {"predicate": "employer"}),
                         ("/subjects/u-1/history", {"predicate": "pet"})]:
        response = agent.api("GET", path, **params)
        assert response.status_code == 404, (path, params)
    assert other_agent.get("/subjects/u-2/facts")["facts"][0]["value"] == "Other"


def test_a_subject_without_facts_reads_empty(agent):
    agent.assert_fact(assertion_data(subject="u-3", predicate="employer", value="Acme"))
    response = agent.api("POST", "/assertions/" + agent.get("/subjects/u-3/facts")["facts"][0]["assertion_id"]
                         + "/retract", {"reason": "wrong person"})
    assert response.status_code == 200, response.content
    assert agent.get("/subjects/u-3/facts")["facts"] == []
    assert agent.get("/subjects/u-3/context") == {"subject": "u-3", "facts": [], "withheld": []}


def test_context_withholds_conflicts_and_proposals(agent):
    _populate(agent)
    context = agent.get("/subjects/u-1/context")
    assert [(w["predicate"], w["reason"]) for w in context["withheld"]] == [
        ("billing_address", "conflict"), ("legal_name", "proposed")]
    assert ("legal_name", "Ann Smith") in [(f["predicate"], f["value"]) for f in context["facts"]]
    note = [f["value"] for f in context["facts"] if f["predicate"] == "note"]
    assert sorted(note, key=json.dumps) == sorted([42, {"b": [1, 2.5, None, True], "a": "\"quoted\"\n"}], key=json.dumps)
    assert all(f["since"].endswith("Z") for f in context["facts"])


def test_context_items_equal_the_projection_rows(agent):
    _populate(agent)
    now = datetime.now(timezone.utc)
    rows = [r for r in CurrentFact.objects.filter(tenant=agent.tenant, status="value")
            if r.valid_from <= now and (r.valid_to is None or r.valid_to > now)]
    expected = sorted((r.entity, r.predicate, queries._scope_text(r.scope_kind, r.scope_key),
                       json.dumps(r.value, sort_keys=True), r.source["kind"], iso(r.valid_from)) for r in rows)
    assert any(".000001Z" in e[-1] or ".500000Z" in e[-1] for e in expected)
    facts = agent.get("/subjects/u-1/context")["facts"]
    assert sorted((f["entity"], f["predicate"], f["scope"], json.dumps(f["value"], sort_keys=True), f["source_kind"],
                   f["since"]) for f in facts) == expected


def test_reads_take_a_fixed_number_of_queries(agent):
    _populate(agent)
    known_at = iso(datetime.now(timezone.utc))
    agent.get("/subjects/u-1/facts")  # records last_used_at
    expected = [("/subjects/u-1/facts", {}, 1), ("/subjects/u-1/context", {}, 1),
                ("/subjects/u-1/history", {"predicate": "employer"}, 4),
                ("/subjects/u-1/facts", {"known_at": known_at}, 3)]
    for path, params, count in expected:
        with CaptureQueriesContext(connection) as ctx:
            response = agent.api("GET", path, **params)
        assert response.status_code == 200
        assert len(ctx.captured_queries) == count, (path, [q["sql"][:120] for q in ctx.captured_queries])


# --------------------------------------------------------------------------- policy


def test_policies_at_follows_the_versions_in_force_at_each_transaction_time(agent):
    tenant = agent.tenant
    t1 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    PredicatePolicy.objects.create(tenant=tenant, predicate="shoe_size", cardinality="one", stakes="high",
                                   authority="user", ttl_seconds=3600, recorded_at=t1)
    PredicatePolicy.objects.create(tenant=tenant, predicate="shoe_size", cardinality="many", stakes="low",
                                   authority="user", recorded_at=t1 + timedelta(days=2))
    PredicatePolicy.objects.create(tenant=tenant, predicate="employer", cardinality="many", stakes="low",
                                   authority="system_record", recorded_at=t1)
    custom = ("user_statement", "correction", "system_record", "user_document", "agent_inference")
    SourceRanking.objects.create(tenant=tenant, ranking=list(custom), recorded_at=t1 + timedelta(days=1))
    predicates = {"shoe_size", "employer", "plan", "never_seen"}

    def shape(at):
        policies = queries.policies_at(tenant_id=tenant.id, predicates=predicates, at=at)
        return {p: (v.cardinality, v.stakes, v.authority, v.ttl_seconds) for p, v in policies.items()}, {
            v.ranking for v in policies.values()}

    unclassified, catalogue_plan = ("many", "low", "user", None), ("one", "low", "system_record", None)
    assert shape(t1 - timedelta(days=1)) == ({"shoe_size": unclassified, "employer": ("one", "low", "user", None),
                                              "plan": catalogue_plan, "never_seen": unclassified}, {DEFAULT_RANKING})
    assert shape(t1) == ({"shoe_size": ("one", "high", "user", 3600), "employer": ("many", "low", "system_record", None),
                          "plan": catalogue_plan, "never_seen": unclassified}, {DEFAULT_RANKING})
    assert shape(t1 + timedelta(days=1))[1] == {custom}
    assert shape(t1 + timedelta(days=3))[0]["shoe_size"] == unclassified


# --------------------------------------------------------------------------- authentication


def test_revoked_key_is_refused_on_the_next_request(agent):
    assert agent.api("GET", "/subjects/nobody/facts").status_code == 404
    ApiKey.objects.filter(tenant=agent.tenant).update(revoked_at=datetime.now(timezone.utc))
    response = agent.api("GET", "/subjects/nobody/facts")
    assert response.status_code == 401 and response.json()["field"] == "Authorization"


def test_rotating_credentials_refuses_the_old_key_at_once(agent):
    assert tenant_for_api_key(agent.api_key).slug == agent.slug
    fresh = create_or_rotate_tenant(slug=agent.slug)
    assert tenant_for_api_key(agent.api_key) is None
    tenant = tenant_for_api_key(fresh.api_key)
    assert (tenant.id, tenant.slug) == (agent.tenant.id, agent.slug)
    assert tenant.prompt_expiry_seconds == agent.tenant.prompt_expiry_seconds


def test_unknown_or_empty_key_is_refused(agent):
    assert tenant_for_api_key("") is None
    assert tenant_for_api_key("mui_not-a-key") is None
    response = agent.client.get("/api/v1/subjects/u-1/facts", headers={"Authorization": "Bearer mui_nope"})
    assert response.status_code == 401


def test_last_used_at_is_recorded_at_most_once_a_minute(agent):
    start = datetime(2026, 5, 1, 12, 0, tzinfo=timezone.utc)
    key = ApiKey.objects.get(tenant=agent.tenant, revoked_at__isnull=True)
    with time_machine.travel(start, tick=False) as clock:
        with CaptureQueriesContext(connection) as ctx:
            tenant_for_api_key(agent.api_key)
        assert len(ctx.captured_queries) == 2
        key.refresh_from_db()
        assert key.last_used_at == start
        clock.shift(timedelta(seconds=59))
        with CaptureQueriesContext(connection) as ctx:
            tenant_for_api_key(agent.api_key)
        assert len(ctx.captured_queries) == 1
        clock.shift(timedelta(seconds=2))
        tenant_for_api_key(agent.api_key)
        key.refresh_from_db()
        assert key.last_used_at == start + timedelta(seconds=61)


# The hot reads (facts now, context) check the key in their own statement.
FOLDED_READS = [("/subjects/u-1/facts", {}), ("/subjects/nobody/facts", {}), ("/subjects/u-1/context", {}),
                ("/subjects/nobody/context", {}), ("/subjects/u-1/facts", {"known_at": "2020-01-01T00:00:00Z"}),
                ("/subjects/u-1/facts", {"valid_at": "not a time"}), ("/subjects/u-1/facts", {"scope": "bad:"}),
                ("/subjects/u\x00/facts", {}), ("/subjects/u\x00/context", {}), ("/subjects/u-1/facts", {"entity": "\x00"})]


def _get(agent, key: str, path: str, **params):
    from urllib.parse import urlencode

    query = f"?{urlencode(params)}" if params else ""
    return agent.client.get(f"/api/v1{path}{query}", headers={"Authorization": f"Bearer {key}"})


@pytest.mark.parametrize("path,params", FOLDED_READS)
def test_folded_reads_refuse_an_unknown_or_revoked_key_before_anything_else(agent, other_agent, path, params):
    agent.assert_fact(assertion_data(predicate="employer", value="Acme"))
    refusal = _get(agent, "mui_nope", "/subjects/u-1/history", predicate="employer")
    assert refusal.status_code == 401
    for key in ("mui_nope", other_agent.api_key + "x"):
        response = _get(agent, key, path, **params)
        assert (response.status_code, response.json()) == (401, refusal.json()), (key, path, params)
    answer = _get(agent, agent.api_key, path, **params)
    assert answer.status_code in (200, 400, 404)
    if "\x00" in path + "".join(params.values()):  # PostgreSQL cannot hold the value: refused, naming it
        assert (answer.status_code, answer.json()["field"]) == (400, "entity" if params else "subject")
    ApiKey.objects.filter(tenant=agent.tenant).update(revoked_at=datetime.now(timezone.utc))
    response = _get(agent, agent.api_key, path, **params)
    assert (response.status_code, response.json()) == (401, refusal.json())


def test_folded_reads_answer_as_before_with_a_live_key(agent, other_agent):
    agent.assert_fact(assertion_data(predicate="employer", value="Acme"))
    other_agent.assert_fact(assertion_data(subject="u-2", predicate="employer", value="Other"))
    assert agent.get("/subjects/u-1/facts")["facts"][0]["value"] == "Acme"
    assert agent.get("/subjects/u-1/context")["facts"][0]["value"] == "Acme"
    for path in ("/subjects/u-2/facts", "/subjects/u-2/context"):  # another tenant's subject
        response = agent.api("GET", path)
        assert (response.status_code, response.json()) == (404, {"detail": "no such subject", "field": None})
    response = agent.api("GET", "/subjects/u-1/facts", valid_at="not a time")
    assert response.status_code == 400 and response.json()["field"] == "valid_at"


@pytest.mark.parametrize("path", ["/subjects/u-1/facts", "/subjects/nobody/facts", "/subjects/u-1/context",
                                  "/subjects/nobody/context"])
def test_folded_reads_record_last_used_at_at_most_once_a_minute(agent, path):
    agent.assert_fact(assertion_data(predicate="employer", value="Acme"))
    start = datetime(2026, 5, 1, 12, 0, tzinfo=timezone.utc)
    key = ApiKey.objects.get(tenant=agent.tenant, revoked_at__isnull=True)
    assert key.last_used_at is None
    status = 404 if "nobody" in path else 200
    with time_machine.travel(start, tick=False) as clock:
        with CaptureQueriesContext(connection) as ctx:
            assert agent.api("GET", path).status_code == status
        assert len(ctx.captured_queries) == 2  # the read with the key check, then the key's use
        key.refresh_from_db()
        assert key.last_used_at == start
        clock.shift(timedelta(seconds=59))
        with CaptureQueriesContext(connection) as ctx:
            assert agent.api("GET", path).status_code == status
        assert len(ctx.captured_queries) == 1
        key.refresh_from_db()
        assert key.last_used_at == start
        clock.shift(timedelta(seconds=2))
        assert agent.api("GET", path).status_code == status
        key.refresh_from_db()
        assert key.last_used_at == start + timedelta(seconds=61)


def test_hot_reads_are_prepared_statements_logged_with_their_parameters(agent, settings):
    _populate(agent)
    agent.get("/subjects/u-1/facts")
    with CaptureQueriesContext(connection) as ctx:
        facts = agent.api("GET", "/subjects/u-1/facts").content
        context = agent.api("GET", "/subjects/u-1/context").content
    assert [q["sql"].count("'u-1'") for q in ctx.captured_queries] == [1, 1]
    assert not any("EXECUTE" in q["sql"] for q in ctx.captured_queries)  # logged as written
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements WHERE statement LIKE %s",
                       ["%k.key_hash = $%"])
        prepared = [row[0] for row in cursor.fetchall()]
    # The facts and context statements (a statement prepared in a round trip
    # shows that round trip's text, so others of this session may match too).
    assert len(prepared) >= 2 and any("string_agg" in p for p in prepared)
    # Without prepared statements (MEMORYUI_PREPARED_STATEMENTS=0) the same answers.
    settings.MEMORYUI_PREPARED_STATEMENTS = False
    with CaptureQueriesContext(connection) as ctx:
        assert agent.api("GET", "/subjects/u-1/facts").content.split(b'"facts"')[1] == facts.split(b'"facts"')[1]
        assert agent.api("GET", "/subjects/u-1/context").content == context
    assert len(ctx.captured_queries) == 2


def test_as_of_reads_equal_the_current_view_and_filter_by_key(agent):
    _populate(agent)
    known_at = iso(datetime.now(timezone.utc))
    as_of = agent.get("/subjects/u-1/facts", known_at=known_at)["facts"]
    assert as_of == agent.get("/subjects/u-1/facts")["facts"] and as_of
    only = agent.get("/subjects/u-1/facts", known_at=known_at, predicate="job_title", scope="project:p-1")["facts"]
    assert only == [f for f in as_of if f["predicate"] == "job_title"] and only
    assert agent.get("/subjects/u-1/facts", known_at=known_at, entity="someone-else")["facts"] == []
    assert agent.get("/subjects/u-1/facts", known_at="2020-01-01T00:00:00Z")["facts"] == []


def test_history_of_a_key_lists_every_assertion(agent):
    _populate(agent)
    versions = agent.get("/subjects/u-1/history", predicate="employer")["versions"]
    assert [v["value"] for v in versions] == ["Acme", "Zürich AG ✓"]
    assert versions[0]["superseded_by"] == versions[1]["assertion_id"]
    assert all(len(v["sources"]) == 1 and v["events"] for v in versions)


# Path and query parameters PostgreSQL cannot hold as text: 400 naming the
# parameter, nothing written (a statement failing on them was a 500).
NUL_REQUESTS = [
    ("GET", "/subjects/u\x00/facts", {}, "subject"), ("GET", "/subjects/u-1/facts", {"predicate": "a\x00"}, "predicate"),
    ("GET", "/subjects/u\x00/context", {}, "subject"), ("GET", "/subjects/u\x00/export", {}, "subject"),
    ("GET", "/subjects/u-1/history", {"predicate": "employer", "entity": "\x00"}, "entity"),
    ("GET", "/subjects/u\x00/prompts", {}, "subject"), ("GET", "/subjects/u-1/prompts", {"status": "\x00"}, "status"),
    ("DELETE", "/subjects/u\x00", {}, "subject"), ("POST", "/subjects/u\x00/login-link", {}, "subject"),
]


@pytest.mark.parametrize("method,path,params,field", NUL_REQUESTS)
def test_parameters_postgresql_cannot_hold_are_refused_naming_them(agent, method, path, params, field):
    from urllib.parse import urlencode

    agent.assert_fact(assertion_data(predicate="employer", value="Acme"))
    models = (Assertion, Event, ApiKey, LoginLink)
    before = {m.__name__: m.objects.count() for m in models}
    query = f"?{urlencode(params)}" if params else ""
    response = getattr(agent.client, method.lower())(f"/api/v1{path}{query}",
                                                     headers={"Authorization": f"Bearer {agent.api_key}"})
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field
    assert "NUL" in response.json()["detail"]
    assert {m.__name__: m.objects.count() for m in models} == before


def test_an_unexpected_error_is_a_json_500_in_the_api_shape(agent, monkeypatch, caplog):
    # A bug or a lost database must not answer an agent backend with
    # Django's HTML error page (API.md: every error is {"detail", "field"}).
    def broken(**kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(queries, "facts_at_json_for_key", broken)

    response = agent.api("GET", "/subjects/u-1/facts")

    assert response.status_code == 500 and response["Content-Type"].startswith("application/json")
    assert response.json() == {"detail": "internal server error", "field": None}
    assert any(r.name == "django.request" and r.exc_info for r in caplog.records)


def test_an_as_of_read_carries_values_orjson_refuses(agent):
    """The as-of body is encoded by orjson; an integer past 64 bits goes
    through ``json`` instead and reads back whole, as it does now."""
    agent.assert_fact(assertion_data(predicate="note", value={"big": 2 ** 70, "text": "ü"}))
    known_at = iso(datetime.now(timezone.utc))

    as_of = agent.get("/subjects/u-1/facts", known_at=known_at)["facts"]

    assert [f["value"] for f in as_of] == [{"big": 2 ** 70, "text": "ü"}]
    assert as_of == agent.get("/subjects/u-1/facts")["facts"]


@pytest.mark.parametrize("ahead, status", [(timedelta(days=365 * 70), 400), (timedelta(minutes=6), 400),
                                           (timedelta(minutes=4), 200)])
def test_a_known_at_in_the_future_is_400_naming_it(agent, ahead, status):
    """Transaction time is what was believed at a moment that has passed:
    what will be believed in 2099 is not known yet (a few minutes of clock
    skew are allowed)."""
    _populate(agent)

    response = agent.api("GET", "/subjects/u-1/facts", known_at=iso(datetime.now(timezone.utc) + ahead))

    assert response.status_code == status
    if status == 400:
        assert response.json()["field"] == "known_at"
