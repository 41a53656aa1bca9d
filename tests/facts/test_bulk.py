"""The write path's plumbing (facts/bulk.py, facts/events.py): rows sent as
one JSON parameter or by COPY read back exactly as the ORM would store
them, written reads apply the fields' converters, and domain events reach
subscribers only once the rows they describe are written."""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from facts import events as ev
from facts.bulk import COPY_THRESHOLD, Select, array_text, fetch_together, insert_rows
from facts.models import Assertion, FactKey, Subject, Tenant, WebhookReceipt
from tests.factories import assertion_data

CEST = timezone(timedelta(hours=2))
ODD_TEXT = 'quote \' double " backslash \\ percent %s %(x)s ümlaut 🙂 \n newline'
NESTED = {"a": [1, 2.5, "ü", None, True, {"b": "%s"}], "empty": {}, "n": -0.0001}


@pytest.fixture
def key(db):
    tenant = Tenant.objects.create(slug=f"t-{uuid.uuid4().hex[:8]}", name="t")
    subject = Subject.objects.create(tenant=tenant, external_id="u-1")
    return FactKey.objects.create(tenant=tenant, subject=subject, entity="self", predicate="note",
                                  scope_kind="global", scope_key="")


def _row(key, n: int, **over) -> SimpleNamespace:
    values = dict(
        id=uuid.uuid4(), tenant_id=key.tenant_id, subject_id=key.subject_id, fact_key_id=key.id, value=NESTED,
        value_key=f"k{n}", valid_from=datetime(2020, 2, 29, 23, 59, 59, 123456, tzinfo=CEST),
        valid_to=None, valid_from_precision="day", stated_at=datetime(2021, 1, 1, tzinfo=timezone.utc),
        recorded_at=datetime(2026, 11, 30, 7, 0, 0, 1, tzinfo=timezone.utc), source_kind="user_statement",
        source_id=f"s{n}", extractor=ODD_TEXT, confidence=0.8125, evidence=ODD_TEXT, content_hash=f"c{n}",
        payload_hash=f"p{n}-{uuid.uuid4().hex}", actor="test",
    )
    values.update(over)
    return SimpleNamespace(**values)


STORED = ("value", "value_key", "valid_from", "valid_to", "valid_from_precision", "stated_at", "recorded_at",
          "source_kind", "extractor", "confidence", "evidence", "retracted_at", "erased_at", "actor")


@pytest.mark.parametrize("rows", [1, COPY_THRESHOLD], ids=["one JSON parameter", "COPY"])
def test_rows_read_back_as_given_whichever_way_they_go(key, rows):
    given = [_row(key, n) for n in range(rows)]
    given[0].value = "plain string"
    given[-1].value = None

    insert_rows(Assertion, given)

    stored = {a.id: a for a in Assertion.objects.filter(fact_key=key)}
    assert len(stored) == rows
    for row in given:
        a = stored[row.id]
        for name in STORED:
            assert getattr(a, name) == getattr(row, name, None), name
    assert stored[given[0].id].valid_from.utcoffset() == timedelta(0)  # the instant, not the offset, is kept


@pytest.mark.parametrize("rows", [1, COPY_THRESHOLD], ids=["one JSON parameter", "COPY"])
def test_json_values_orjson_refuses_are_stored_all_the_same(key, rows):
    """orjson encodes JSON columns; what it refuses (an integer past 64
    bits, a non-string key) goes through ``json`` and reads back the same."""
    given = [_row(key, n, value={"big": 2 ** 70, "list": [-(2 ** 64), 1]}) for n in range(max(rows, 2))]
    given[0].value = {1: "int key", "s": "ü"}

    insert_rows(Assertion, given)

    stored = {a.id: a.value for a in Assertion.objects.filter(fact_key=key)}
    assert stored[given[-1].id] == {"big": 2 ** 70, "list": [-(2 ** 64), 1]}
    assert stored[given[0].id] == {"1": "int key", "s": "ü"}


def test_a_small_insert_is_one_statement_with_one_parameter(key, django_assert_num_queries):
    with django_assert_num_queries(1) as captured:
        insert_rows(Assertion, [_row(key, n) for n in range(3)])
    assert captured.captured_queries[0]["sql"].count("jsonb_populate_recordset") == 1
    assert Assertion.objects.filter(fact_key=key).count() == 3


def test_ignore_conflicts_skips_only_the_rows_already_there(key):
    tenant_id = key.tenant_id
    insert_rows(WebhookReceipt, [{"tenant_id": tenant_id, "webhook_id": "a", "status_code": 200, "response": {"x": 1}}])

    insert_rows(WebhookReceipt, [
        {"tenant_id": tenant_id, "webhook_id": "a", "status_code": 200, "response": {"x": 2}},
        {"tenant_id": tenant_id, "webhook_id": "b", "status_code": 200, "response": {"x": 3}},
    ], ignore_conflicts=True)

    assert dict(WebhookReceipt.objects.filter(tenant_id=tenant_id).values_list("webhook_id", "response")) == {
        "a": {"x": 1}, "b": {"x": 3}}


def test_select_applies_the_fields_converters(key):
    row = _row(key, 1)
    insert_rows(Assertion, [row])

    dicts, models, nothing = fetch_together(
        Select(Assertion, ("id", "value", "valid_from"), "fact_key_id = %s", [key.id]),
        Select(FactKey, where="id = ANY(%s)", params=[[key.id]], as_model=True),
        Select.NOTHING,
    )

    assert dicts == [{"id": row.id, "value": NESTED, "valid_from": row.valid_from}]
    assert [(m.pk, m.predicate, m.scope) for m in models] == [(key.id, "note", "global")]
    assert nothing == []


def test_select_refuses_a_column_name_for_an_attname(key):
    with pytest.raises(ValueError):
        Select(Assertion, ("fact_key",), "TRUE")


def test_subscribers_see_the_rows_an_event_describes(agent, monkeypatch):
    """A subscriber reading the ledger during a write (the outbox's winner
    lookup does) finds the assertion the event names: domain events are
    held until the write's rows are sent."""
    seen: dict[str, bool] = {}

    def subscriber(event: ev.DomainEvent) -> None:
        if event.type == ev.FACT_ASSERTED:
            seen[event.data["assertion_id"]] = Assertion.objects.filter(pk=event.data["assertion_id"]).exists()

    monkeypatch.setattr(ev, "_subscribers", [*ev._subscribers, subscriber])

    first = agent.assert_fact(assertion_data(value="Berlin"))
    second = agent.assert_fact(assertion_data(value="Munich", valid_from="2026-05-01T00:00:00Z"))

    assert seen == {first["assertion_id"]: True, second["assertion_id"]: True}


def test_held_events_are_dropped_when_the_write_fails(db, monkeypatch):
    delivered: list[ev.DomainEvent] = []
    monkeypatch.setattr(ev, "_subscribers", [delivered.append])

    with pytest.raises(RuntimeError):
        with ev.held():
            ev.publish(ev.DomainEvent("x", 1, None))
            raise RuntimeError("the write failed")
    with ev.held() as release:
        ev.publish(ev.DomainEvent("y", 1, None))
        assert delivered == []
        release()
    ev.publish(ev.DomainEvent("z", 1, None))

    assert [e.type for e in delivered] == ["y", "z"]


def test_an_after_delivery_hook_finishes_each_delivery_once(db, monkeypatch):
    """Subscribers keep work in the delivery's scratch dict; the hook gets
    it once all events of the delivery are in, a fresh dict each time, and
    not at all when a subscriber raised."""
    finished: list[list[str]] = []

    def subscriber(event: ev.DomainEvent) -> None:
        if event.type == "boom":
            raise RuntimeError("subscriber failed")
        ev.keep("types", event.type)

    monkeypatch.setattr(ev, "_subscribers", [subscriber])
    monkeypatch.setattr(ev, "_after_delivery", [lambda kept: finished.append(kept.get("types", []))])

    with ev.held() as release:
        for name in ("a", "b", "c"):
            ev.publish(ev.DomainEvent(name, 1, None))
        assert finished == []
        release()
    ev.publish(ev.DomainEvent("d", 1, None))
    with pytest.raises(RuntimeError):
        with ev.held() as release:
            ev.publish(ev.DomainEvent("e", 1, None))
            ev.publish(ev.DomainEvent("boom", 1, None))
            release()

    assert finished == [["a", "b", "c"], ["d"]]
    assert ev.keep("types", "outside") is None


# ---------------------------------------------------------------- prepared statements

def _prepared_names() -> set[str]:
    from django.db import connection
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements")
        return {row[0] for row in cursor.fetchall()}


def _session():
    from django.db import connection

    from facts.bulk import PreparedStatements
    connection.ensure_connection()
    return PreparedStatements.of(connection.connection)


@pytest.fixture(autouse=True)
def _fresh_session(request):
    """Prepared-statement tests start and end with a session that has
    prepared nothing (the test database's connection outlives a test)."""
    if not request.node.name.startswith(("test_a_fixed", "test_a_rollback", "test_after_an", "test_named",
                                         "test_past_the", "test_a_prepared")):
        yield
        return
    from django.db import connection

    from facts.bulk import PreparedStatements

    def forget() -> None:
        connection.ensure_connection()
        with connection.cursor() as cursor:
            cursor.execute("DEALLOCATE ALL")
        PreparedStatements._sessions.pop(connection.connection, None)

    request.getfixturevalue("db")
    forget()
    yield
    forget()


def _payloads(key) -> Select:
    return Select(Assertion, ("payload_hash", "value"), "fact_key_id = %s AND value_key LIKE %s", [key.id, "k%%"])


def test_a_fixed_statement_is_prepared_once_and_answers_as_sent_plain(key, settings, django_assert_num_queries):
    settings.MEMORYUI_PREPARED_STATEMENTS = False
    insert_rows(Assertion, [_row(key, n, value=ODD_TEXT) for n in range(3)])
    plain, = fetch_together(_payloads(key))
    assert not _session().names and not _prepared_names()
    settings.MEMORYUI_PREPARED_STATEMENTS = True

    with django_assert_num_queries(2) as captured:
        first, = fetch_together(_payloads(key))
        again, = fetch_together(_payloads(key))

    assert sorted(map(str, first)) == sorted(map(str, again)) == sorted(map(str, plain)) and len(plain) == 3
    assert all(r["value"] == ODD_TEXT for r in first)
    names = _session().names
    assert len(names) == 1 and names == _prepared_names()
    # The log shows the statement as written, its parameters bound: not "EXECUTE mu_…".
    assert all("facts_assertion" in q["sql"] and "EXECUTE" not in q["sql"] for q in captured.captured_queries)


def test_a_rollback_keeps_the_session_s_statements(key):
    from django.db import IntegrityError, transaction

    row = _row(key, 1)
    insert_rows(Assertion, [row])
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_rows(Assertion, [_row(key, 2, id=row.id)])  # the same primary key
    names = _session().names
    assert names and names <= _prepared_names() and not _session().off
    insert_rows(Assertion, [_row(key, 3)])
    assert Assertion.objects.filter(fact_key=key).count() == 2


def test_after_an_unexpected_error_the_session_sends_statements_as_they_are(key):
    from django.db import ProgrammingError, transaction

    with pytest.raises(ProgrammingError), transaction.atomic():
        fetch_together(_payloads(key), ("SELECT no_such_column FROM facts_assertion WHERE id = %s", [uuid.uuid4()]))
    assert _session().off
    left = _prepared_names()  # what the failed round trip prepared before its error, never used
    insert_rows(Assertion, [_row(key, 1)])
    assert fetch_together(_payloads(key))[0][0]["payload_hash"].startswith("p1-")
    assert _prepared_names() == left  # nothing prepared since


def test_named_placeholders_used_twice_are_one_parameter(key):
    from facts.bulk import PreparedCursor

    insert_rows(Assertion, [_row(key, 1)])
    sql = ("SELECT count(*) FROM facts_assertion WHERE fact_key_id = %(key)s AND subject_id = %(subject)s "
           "AND (fact_key_id = %(key)s OR value_key LIKE 'x%%')")
    for _ in range(2):
        with PreparedCursor() as cursor:
            cursor.execute(sql, {"key": key.id, "subject": key.subject_id})
            assert cursor.fetchone() == (1,)
    with connection_cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements WHERE name = ANY(%s)", [list(_session().names)])
        texts = [r[0] for r in cursor.fetchall()]
    assert any("fact_key_id = $1 AND subject_id = $2 AND (fact_key_id = $1" in t for t in texts)


def test_a_prepared_statement_is_planned_once_on_its_generic_plan(key):
    """PostgreSQL left to choose (plan_cache_mode=auto) planned this lookup
    afresh on every execution; the sessions run it on one generic plan."""
    insert_rows(Assertion, [_row(key, n) for n in range(3)])
    lookup = Select(Assertion, ("id",), "fact_key_id = ANY(%s) AND value_key = ANY(%s)",
                    [[key.id], ["k1"]])
    for _ in range(8):  # past the five executions PostgreSQL plans afresh before it weighs a generic plan
        assert len(lookup.fetch()) == 1
    with connection_cursor() as cursor:
        cursor.execute("SHOW plan_cache_mode")
        assert cursor.fetchone() == ("force_generic_plan",)
        cursor.execute("SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE %s",
                       ["%value_key = ANY($2)%"])
        assert cursor.fetchall() == [(8, 0)]


_TEXTS = st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12),
                 max_size=8)
_BIGINTS = st.lists(st.integers(min_value=-2**63, max_value=2**63 - 1), max_size=8)


@hypothesis_settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=_TEXTS, numbers=_BIGINTS)
def test_a_list_argument_of_a_prepared_statement_reads_back_as_sent(db, texts, numbers):
    """Lists go to ``EXECUTE`` as array text (``array_text``) when they can:
    whatever the strings hold (quotes, braces, commas, backslashes, control
    characters, ``NULL``, empty) or the integers' size, PostgreSQL reads
    the values sent."""
    from facts.bulk import PreparedCursor

    with PreparedCursor() as cursor:
        cursor.execute("SELECT %s::text[], %s::bigint[], cardinality(%s::text[])",
                       [texts + ["NULL", "", "{a,b}"], numbers, texts])
        assert cursor.fetchone() == (texts + ["NULL", "", "{a,b}"], numbers, len(texts))


def test_list_arguments_go_as_one_text_each_when_they_can(db):
    from facts.bulk import PreparedStatements

    hashes = [uuid.uuid4().hex for _ in range(3)]
    _, params, _ = PreparedStatements().compose([
        ("SELECT 1 FROM facts_assertion WHERE payload_hash = ANY(%s) AND fact_key_id = ANY(%s) AND id = ANY(%s) "
         "AND value_key = ANY(%s) AND source_id = ANY(%s)",
         [hashes, [1, 2], [uuid.UUID(int=1)], ['say "hi"'], [True]])])

    assert params == ["{" + ",".join(f'"{h}"' for h in hashes) + "}", "{1,2}", [uuid.UUID(int=1)], ['say "hi"'], [True]]
    assert array_text([[1], [2]]) == [[1], [2]] and array_text([1, "a"]) == [1, "a"] and array_text([2**64]) == [2**64]


def test_past_the_limit_statements_go_as_they_are(key, monkeypatch):
    from facts.bulk import PreparedStatements

    monkeypatch.setattr(PreparedStatements, "LIMIT", len(_session().names) + 1)
    insert_rows(Assertion, [_row(key, 1)])  # the last one prepared
    before = set(_session().names)
    assert fetch_together(_payloads(key))[0][0]["payload_hash"].startswith("p1-")
    assert _session().names == before


def connection_cursor():
    from django.db import connection
    return connection.cursor()


def test_timestamps_are_read_by_the_compiled_loader_as_django_reads_them(db):
    import psycopg
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT '2020-02-29 23:59:59.123456+02'::timestamptz, '0001-01-01 00:00:00+00'::timestamptz, "
                       "'1969-07-20 20:17:40-05'::timestamptz, NULL::timestamptz")
        got = cursor.fetchone()
    loader = connection.connection.adapters.get_loader(1184, psycopg.pq.Format.TEXT)
    assert loader.__name__ == "CompiledTzLoader" and loader.timezone is timezone.utc
    assert got == (datetime(2020, 2, 29, 21, 59, 59, 123456, tzinfo=timezone.utc), datetime(1, 1, 1, tzinfo=timezone.utc),
                   datetime(1969, 7, 21, 1, 17, 40, tzinfo=timezone.utc), None)
    assert all(t.tzinfo is timezone.utc for t in got[:3])  # Django's time zone, not the server's ZoneInfo
