"""The importers on the real data sets (data/README.md), sent through the
same signed webhook path and batch endpoint an agent backend uses.

DyKnow is imported twice, into two tenants: in date order as signed webhooks,
and in a shuffled order with duplicates through the batch endpoint. The two
current views must be identical (DESIGN.md, "Invariants": order
independence), and known real answers must come back. YAGO11k is imported
per subject (a few real people), enough to show that inverse relations are
dropped, years keep their precision and multi-valued relations never lose a
value.
"""
from __future__ import annotations

import functools
import hashlib
import json
import random
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.utils import timezone as django_timezone

from facts.importers import dyknow, yago
from facts.importers.common import ImportEvent, ImportSummary, order_events, run_import
from facts.importers.sender import make_sender
from facts.models import Assertion, Conflict, CurrentFact, Subject, Tenant
from facts.projection import iso
from tests.facts.as_of import resolve_subject_as_of
from facts.resolve import timeline_digest
from facts.tenants import TenantCredentials
from tests.conftest import TenantClient, make_tenant_client

DATA = Path(settings.BASE_DIR) / ".." / "shared" / "data"
DYKNOW = DATA / "dyknow" / "grc_generated.json"
YAGO = DATA / "yago11k"
DUPLICATES = 40  # events sent twice more to the shuffled tenant: new ids, and replayed ids

pytestmark = pytest.mark.django_db


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


@functools.cache
def dyknow_answers() -> tuple[dyknow.Answer, ...]:
    return tuple(dyknow.read_answers(path=DYKNOW))


def dyknow_answer(subject: str, predicate: str, name: str) -> dyknow.Answer:
    """The one answer of the file for this subject, predicate and name."""
    (found,) = [a for a in dyknow_answers() if (a.subject, a.predicate, a.name) == (subject, predicate, name)]
    return found


def sender_for(agent: TenantClient, mode: str):
    return make_sender(credentials=TenantCredentials(agent.slug, agent.api_key, agent.webhook_secret), mode=mode)


def projection_digest(tenant: Tenant) -> str:
    """SHA-256 of a tenant's current-view projection by content: every row
    with its key, status, value, both bounds, rule and sources (kind and
    id), without server-made ids or recording times."""
    rows = []
    for r in CurrentFact.objects.filter(tenant=tenant).select_related("subject"):
        rows.append(json.dumps([
            r.subject.external_id, r.entity, r.predicate, r.scope_kind, r.scope_key, r.status, r.value_key,
            iso(r.valid_from), iso(r.valid_to), iso(r.asserted_valid_to), iso(r.stated_at), r.rule,
            [r.source.get("kind"), r.source.get("id")],
            sorted([s["kind"], s["id"]] for s in r.sources),
            sorted([c["source"]["kind"], c["source"]["id"], json.dumps(c["value"])] for c in r.candidates),
        ]))
    return hashlib.sha256("\n".join(sorted(rows)).encode()).hexdigest()


def recomputed_digest(tenant: Tenant) -> str:
    """SHA-256 over every key's timeline recomputed from the log now
    (``timeline_digest`` without ids)."""
    digests, now = [], django_timezone.now()
    for subject in Subject.objects.filter(tenant=tenant):
        for key, _, resolution in resolve_subject_as_of(subject=subject, known_at=now):
            digests.append(f"{subject.external_id}|{key.entity}|{key.predicate}|{key.scope}|"
                           f"{timeline_digest(resolution.segments, with_ids=False)}")
    return hashlib.sha256("\n".join(sorted(digests)).encode()).hexdigest()


def contexts(agent: TenantClient) -> dict:
    """The context endpoint's answer for every subject (it holds no ids)."""
    return {s: agent.get(f"/subjects/{s}/context") for s in
            Subject.objects.filter(tenant=agent.tenant).order_by("external_id").values_list("external_id", flat=True)}


def with_duplicates(events: list[ImportEvent], *, seed: int) -> list[ImportEvent]:
    """``events`` plus, at random places, :data:`DUPLICATES` of them sent
    again under a new id (answered ``duplicate``) and as many replayed under
    their own id (the first answer again)."""
    rng = random.Random(seed)
    again = [ImportEvent(f"{e.id}-again", e.envelope, e.order_key) for e in rng.sample(events, DUPLICATES)]
    replayed = rng.sample(events, DUPLICATES)
    out = list(events)
    for extra in again:
        out.insert(rng.randrange(len(out) + 1), extra)
    return out + replayed


@dataclass
class DyknowImports:
    dated: TenantClient
    shuffled: TenantClient
    dated_summary: ImportSummary
    shuffled_summary: ImportSummary
    answers: int


def import_in_thread(**kwargs) -> ImportSummary:
    """:func:`run_import` on this thread's own database connection."""
    try:
        return run_import(**kwargs)
    finally:
        connection.close()


@pytest.fixture(scope="module")
def dyknow_imports(django_db_setup, django_db_blocker):
    """DyKnow into two tenants at once (two threads, two connections): date
    order through signed webhooks; shuffled, with duplicates, through the
    batch endpoint. Committed for the module, deleted afterwards."""
    with django_db_blocker.unblock():
        events = dyknow.build_events(path=DYKNOW)
        rules = dyknow.predicate_rules(path=DYKNOW)
        dated = make_tenant_client(f"dyknow-dated-{uuid.uuid4().hex[:6]}")
        shuffled = make_tenant_client(f"dyknow-shuffled-{uuid.uuid4().hex[:6]}")
        with ThreadPoolExecutor(max_workers=2) as pool:
            dated_run = pool.submit(import_in_thread, sender=sender_for(dated, "webhook"), dataset="dyknow",
                                    events=order_events(events), predicates=rules, progress=False)
            shuffled_run = pool.submit(
                import_in_thread, sender=sender_for(shuffled, "batch"), dataset="dyknow",
                events=with_duplicates(order_events(events, shuffle=True, seed=20240611), seed=5),
                predicates=rules, batch_size=250, progress=False,
            )
            summaries = dated_run.result(), shuffled_run.result()
        yield DyknowImports(dated, shuffled, *summaries, len(events))
        Tenant.objects.filter(slug__in=[dated.slug, shuffled.slug]).delete()


# --------------------------------------------------------------------------- DyKnow: mapping


def test_dyknow_answer_dates_keep_their_precision():
    ciampi = dyknow_answer("italy", "president_of_italy", "Carlo Azeglio Ciampi")
    mcmillon = dyknow_answer("walmart", "chief_executive_officer", "Doug McMillon")
    nagle = dyknow_answer("glencore", "chief_executive_officer", "Gary Nagle")
    duke = dyknow_answer("walmart", "chief_executive_officer", "Mike Duke")

    assert (ciampi.valid_from, ciampi.valid_to, ciampi.precision) == (utc(1999, 5, 18), utc(2006, 5, 15), "day")
    assert (mcmillon.valid_from, mcmillon.valid_to, mcmillon.precision) == (utc(2014, 1, 1), None, "year")
    assert (nagle.valid_from, nagle.precision) == (utc(2021, 7, 1), "month")
    assert (duke.valid_from, duke.valid_to) == (utc(2009, 1, 1), utc(2014, 1, 1))


def test_dyknow_start_and_end_in_one_period_cover_that_period():
    olympic = dyknow_answer("cristiano-ronaldo", "member_of_sports_team", "Portugal Olympic football team")  # S=E=2004
    acting = dyknow_answer("poland", "president_of_the_republic_of_poland", "Bogdan Borusewicz")  # S=E=2010-07-08

    assert (olympic.valid_from, olympic.valid_to) == (utc(2004, 1, 1), utc(2005, 1, 1))
    assert (acting.valid_from, acting.valid_to) == (utc(2010, 7, 8), utc(2010, 7, 9))


def test_dyknow_point_and_end_only_answers_assert_only_what_is_known():
    portugal = dyknow_answer("cristiano-ronaldo", "member_of_sports_team",
                             "Portugal national association football team")  # S 2003, P 2021-06-27
    george_v = dyknow_answer("united-kingdom", "monarch_of_the_united_kingdom", "George V")  # E 1936-01-20 only

    assert (portugal.valid_from, portugal.valid_to) == (utc(2003, 1, 1), utc(2021, 6, 28))
    assert (george_v.valid_from, george_v.valid_to, george_v.precision) == (utc(1936, 1, 19), utc(1936, 1, 20), "day")


def test_dyknow_predicates_are_single_valued_and_a_few_high_stakes():
    rules = dyknow.predicate_rules(path=DYKNOW)

    assert {r.cardinality for r in rules.values()} == {"one"}
    assert {name for name, r in rules.items() if r.stakes == "high"} == dyknow.HIGH_STAKES
    assert {"president_of_italy", "chief_executive_officer", "member_of_sports_team"} <= rules.keys()


# --------------------------------------------------------------------------- DyKnow: whole file, two tenants


@pytest.mark.slow
def test_dyknow_every_answer_is_kept_in_both_tenants(dyknow_imports):
    d = dyknow_imports

    assert d.dated_summary.refused == 0
    assert d.shuffled_summary.refused == 0
    assert d.dated_summary.sent == d.answers == 1151
    assert d.shuffled_summary.sent == d.answers + 2 * DUPLICATES
    assert d.shuffled_summary.outcomes["duplicate"] >= DUPLICATES
    assert Assertion.objects.filter(tenant=d.dated.tenant).count() == d.answers
    assert Assertion.objects.filter(tenant=d.shuffled.tenant).count() == d.answers


@pytest.mark.slow
def test_dyknow_date_order_and_shuffled_order_give_identical_current_views(dyknow_imports):
    d = dyknow_imports

    assert CurrentFact.objects.filter(tenant=d.dated.tenant).count() > 1000
    assert projection_digest(d.dated.tenant) == projection_digest(d.shuffled.tenant)
    assert recomputed_digest(d.dated.tenant) == recomputed_digest(d.shuffled.tenant)
    assert contexts(d.dated) == contexts(d.shuffled)


@pytest.mark.slow
def test_dyknow_known_holders_past_and_present(dyknow_imports):
    agent = dyknow_imports.shuffled

    def holder(subject: str, predicate: str, valid_at: str | None = None):
        params = {"predicate": predicate, **({"valid_at": valid_at} if valid_at else {})}
        return [f["value"] for f in agent.get(f"/subjects/{subject}/facts", **params)["facts"]]

    assert holder("italy", "president_of_italy", "2000-01-01T00:00:00Z") == ["Carlo Azeglio Ciampi"]
    assert holder("italy", "president_of_italy") == ["Sergio Mattarella"]
    assert holder("united-states-of-america", "president_of_the_united_states", "1962-06-01T00:00:00Z") == ["John F. Kennedy"]
    assert holder("microsoft", "chief_executive_officer", "2010-01-01T00:00:00Z") == ["Steve Ballmer"]
    assert holder("microsoft", "chief_executive_officer") == ["Satya Nadella"]
    assert holder("united-nations", "general_secretary", "2000-01-01T00:00:00Z") == ["Kofi Annan"]


@pytest.mark.slow
def test_dyknow_supersession_closes_the_predecessor_at_the_successors_start(dyknow_imports):
    agent = dyknow_imports.dated

    versions = agent.get("/subjects/italy/history", predicate="president_of_italy")["versions"]
    ciampi = next(v for v in versions if v["value"] == "Carlo Azeglio Ciampi")

    assert ciampi["valid_from"] == "1999-05-18T00:00:00Z"
    assert ciampi["valid_to"] == "2006-05-15T00:00:00Z"
    assert ciampi["status"] == "superseded"
    assert ciampi["sources"][0]["id"].startswith("wikidata:dyknow:italy:president_of_italy:")


@pytest.mark.slow
def test_dyknow_precision_is_stored_with_each_assertion(dyknow_imports):
    tenant = dyknow_imports.shuffled.tenant

    def stored(subject: str, value: str):
        return Assertion.objects.get(tenant=tenant, subject__external_id=subject, value=value)

    mcmillon = stored("walmart", "Doug McMillon")
    assert (mcmillon.valid_from, mcmillon.valid_from_precision) == (utc(2014, 1, 1), "year")
    assert stored("glencore", "Gary Nagle").valid_from_precision == "month"
    assert stored("microsoft", "Satya Nadella").valid_from_precision == "day"


@pytest.mark.slow
def test_dyknow_genuine_ties_on_high_stakes_offices_stay_open_conflicts(dyknow_imports):
    agent = dyknow_imports.shuffled

    open_conflicts = Conflict.objects.filter(tenant=agent.tenant, status=Conflict.OPEN)
    china_1970 = agent.get("/subjects/china/facts", predicate="president_of_the_peoples_republic_of_china",
                           valid_at="1970-01-01T00:00:00Z")["facts"]

    assert sorted(c.fact_key.predicate for c in open_conflicts) == sorted(dyknow.HIGH_STAKES)
    assert [f["status"] for f in china_1970] == ["conflict"]
    assert sorted(c["value"] for c in china_1970[0]["candidates"]) == ["Dong Biwu", "Soong Ching-ling"]


@pytest.mark.slow
def test_dyknow_overlapping_teams_are_all_kept(dyknow_imports):
    agent = dyknow_imports.dated

    versions = agent.get("/subjects/cristiano-ronaldo/history", predicate="member_of_sports_team")["versions"]
    kept = {source["id"] for v in versions for source in v["sources"]}
    answered = {a.source_id for a in dyknow_answers() if a.subject == "cristiano-ronaldo"}
    resolved_ties = Conflict.objects.filter(tenant=agent.tenant, fact_key__subject__external_id="cristiano-ronaldo",
                                            status=Conflict.RESOLVED)

    assert kept == answered  # every answer of the file, the national team beside the club included
    assert len(answered) == 12
    assert resolved_ties.count() >= 1
    assert agent.get("/subjects/cristiano-ronaldo/context")["facts"][0]["value"] == "Al-Nassr"


# --------------------------------------------------------------------------- the command


def test_import_dyknow_command_sends_signed_webhooks_and_prints_a_summary(agent, capsys):
    call_command("import_dyknow", "--path", str(DYKNOW), "--tenant", agent.slug, "--api-key", agent.api_key,
                 "--secret", agent.webhook_secret, "--limit", "12", "--json")

    summary = json.loads(capsys.readouterr().out)

    assert summary["sent"] == 12
    assert summary["mode"] == "webhook"
    assert sum(summary["outcomes"].values()) == 12
    assert Assertion.objects.filter(tenant=agent.tenant, actor=f"webhook:{agent.slug}").count() == 12


def test_importing_twice_writes_nothing_new(agent):
    events = order_events(dyknow.build_events(path=DYKNOW), limit=30)
    rules = dyknow.predicate_rules(path=DYKNOW)

    first = run_import(sender=sender_for(agent, "webhook"), dataset="dyknow", events=events, predicates=rules,
                       progress=False)
    second = run_import(sender=sender_for(agent, "webhook"), dataset="dyknow", events=events, predicates=rules,
                        progress=False)

    assert first.outcomes == second.outcomes
    assert second.predicates_registered == 0
    assert Assertion.objects.filter(tenant=agent.tenant).count() == 30


# --------------------------------------------------------------------------- YAGO11k


def test_yago_inverse_relations_are_dropped():
    facts = yago.read_facts(directory=YAGO)

    assert len(facts) == 20509
    assert {f.predicate for f in facts} == set(yago.RULES)
    assert {f.split for f in facts} == set(yago.SPLITS)


def test_yago_years_are_inclusive_and_open_ends_stay_open():
    facts = {(f.subject, f.predicate, f.value): f for f in yago.read_facts(directory=YAGO)}

    zurich = facts[("albert-einstein", "works_at", "University of Zurich")]  # 1909-1911
    leiden = facts[("albert-einstein", "works_at", "Leiden University")]  # 1920-3000
    born = facts[("jeff-bezos", "was_born_in", "Albuquerque, New Mexico")]  # 1964-1964

    assert (zurich.valid_from, zurich.valid_to) == (utc(1909, 1, 1), utc(1912, 1, 1))
    assert (leiden.valid_from, leiden.valid_to) == (utc(1920, 1, 1), None)
    assert (born.valid_from, born.valid_to) == (utc(1964, 1, 1), None)


def test_yago_multi_valued_relations_never_lose_a_value(agent):
    events = yago.build_events(directory=YAGO, subjects=frozenset({"albert-einstein"}))

    summary = run_import(sender=sender_for(agent, "webhook"), dataset="yago11k", events=order_events(events),
                         predicates=yago.predicate_rules(), progress=False)
    in_1914 = agent.get("/subjects/albert-einstein/facts", predicate="works_at", valid_at="1914-06-01T00:00:00Z")
    prizes = agent.get("/subjects/albert-einstein/facts", predicate="has_won_prize")

    assert summary.sent == 16
    assert summary.refused == 0
    assert sorted(f["value"] for f in in_1914["facts"]) == [
        "ETH Zurich", "Humboldt University of Berlin", "Prussian Academy of Sciences"]
    assert len(prizes["facts"]) == 6


def test_yago_year_precision_is_stored(agent):
    events = yago.build_events(directory=YAGO, subjects=frozenset({"albert-einstein"}))

    run_import(sender=sender_for(agent, "batch"), dataset="yago11k", events=order_events(events),
               predicates=yago.predicate_rules(), progress=False)

    stored = Assertion.objects.filter(tenant=agent.tenant)
    assert stored.count() == 16
    assert set(stored.values_list("valid_from_precision", flat=True)) == {"year"}
    assert set(stored.values_list("source_kind", flat=True)) == {"user_document"}


def test_yago_a_later_marriage_ends_the_earlier_one_and_both_are_kept(agent):
    events = yago.build_events(directory=YAGO, subjects=frozenset({"tom-cruise"}))

    run_import(sender=sender_for(agent, "webhook"), dataset="yago11k", events=order_events(events, shuffle=True, seed=3),
               predicates=yago.predicate_rules(), progress=False)

    def spouse(valid_at: str):
        facts = agent.get("/subjects/tom-cruise/facts", predicate="is_married_to", valid_at=valid_at)["facts"]
        return [f["value"] for f in facts]

    versions = agent.get("/subjects/tom-cruise/history", predicate="is_married_to")["versions"]
    assert spouse("1989-01-01T00:00:00Z") == ["Nicole Kidman"]
    assert spouse("1995-01-01T00:00:00Z") == ["Katie Holmes"]
    assert sorted(v["value"] for v in versions) == ["Katie Holmes", "Nicole Kidman"]


def test_yago_rows_starting_after_today_are_imported_stated_on_arrival(agent):
    """A handful of YAGO11k rows start centuries ahead (a company "owns"
    something from 2844): their stated_at is left out, since the API
    refuses one from the future, and a second import writes nothing."""
    events = [e for e in yago.build_events(directory=YAGO) if e.data["valid_from"] > "2027"]
    rules = yago.predicate_rules()

    first = run_import(sender=sender_for(agent, "webhook"), dataset="yago", events=events, predicates=rules,
                       progress=False)
    second = run_import(sender=sender_for(agent, "webhook"), dataset="yago", events=events, predicates=rules,
                        progress=False)

    assert len(events) == 5 and all("stated_at" not in e.data for e in events)
    assert sum(first.outcomes.values()) == 5 and not set(first.outcomes) - {"created", "corroborated", "conflict",
                                                                            "superseded_existing", "overruled"}
    assert second.outcomes == first.outcomes  # replayed: the first answers, nothing written
    stored = Assertion.objects.filter(tenant=agent.tenant)
    assert stored.count() == 5 and all(a.stated_at <= a.recorded_at for a in stored)
