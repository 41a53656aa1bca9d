"""Who gets asked (DESIGN.md write rule step 6): low-stakes ties never
create prompts; high-stakes ones always do, exactly one per conflict,
whatever the delivery order, duplicates and repeated tasks included."""
from itertools import permutations

import pytest
from django.db import IntegrityError, connection
from django.test.utils import CaptureQueriesContext

from conflicts import actions, tasks
from conflicts.models import ClarificationPrompt
from conflicts.models import PromptRequest
from facts.models import Assertion, Conflict
from tests.conflicts.factories import ALTE, NEUE, change, tie

KOELN = "Dritte Str. 3, Köln"
THREE = tie(values=(ALTE, NEUE, KOELN), stated=("2026-03-03T10:00:00Z", "2026-11-22T10:00:00Z", "2026-11-25T10:00:00Z"))


@pytest.mark.parametrize("order", list(permutations(range(2))))
def test_low_stakes_ties_never_create_prompts(agent, ask, order):
    payloads = tie(predicate="city_of_residence", values=("Berlin", "Munich"))

    prompt = ask(agent, [payloads[i] for i in order])
    swept = actions.open_requested_prompts(stuck_after_seconds=0)
    conflict = Conflict.objects.get(tenant=agent.tenant)
    direct = actions.open_conflict_prompt(conflict_id=str(conflict.id))
    facts = agent.get("/subjects/u-1/facts")["facts"]

    assert (prompt, swept, direct) == (None, 0, None)
    assert (conflict.status, conflict.stakes, conflict.resolution_rule) == ("RESOLVED", "low", "tie-stated-at")
    assert [f["value"] for f in facts] == ["Munich"]


@pytest.mark.parametrize("order", list(permutations(range(3))))
def test_high_stakes_ties_get_exactly_one_prompt_whatever_the_delivery_order(agent, ask, order):
    sent = [THREE[i] for i in order] + [THREE[order[0]]]  # the first one again: a duplicate

    prompt = ask(agent, sent)
    conflict = Conflict.objects.get(tenant=agent.tenant, status=Conflict.OPEN)
    repeated = [tasks.open_conflict_prompt.apply(kwargs={"conflict_id": str(conflict.id)}).get() for _ in range(2)]
    swept = actions.open_requested_prompts(stuck_after_seconds=0)

    assert ClarificationPrompt.objects.filter(tenant=agent.tenant).count() == 1
    assert repeated == [str(prompt.id)] * 2 and swept == 0
    assert prompt.conflict_id == conflict.id
    assert [o["value"] for o in prompt.options if o["kind"] == "candidate"] == [ALTE, NEUE, KOELN]
    assert sorted(prompt.assertion_ids) == sorted(map(str, Assertion.objects.filter(tenant=agent.tenant)
                                                      .values_list("id", flat=True)))


def test_a_retracted_candidate_leaves_the_prompt_reworded_and_a_resolved_conflict_withdraws_it(agent, ask):
    prompt = ask(agent, THREE)
    koeln = Assertion.objects.get(tenant=agent.tenant, value=KOELN)
    neue = Assertion.objects.get(tenant=agent.tenant, value=NEUE)

    agent.api("POST", f"/assertions/{koeln.id}/retract", {"reason": "wrong person"})
    prompt.refresh_from_db()
    reworded = ([o["value"] for o in prompt.options if o["kind"] == "candidate"], prompt.status)
    agent.api("POST", f"/assertions/{neue.id}/retract", {"reason": "wrong person"})
    prompt.refresh_from_db()

    assert reworded == ([ALTE, NEUE], "pending")
    assert KOELN not in prompt.question
    assert (prompt.status, prompt.withdrawn_reason) == ("withdrawn", "resolved: tie-gone")


def test_a_correction_from_elsewhere_withdraws_the_prompt(agent, ask):
    prompt = ask(agent, tie())

    agent.assert_fact({**tie()[0], "value": NEUE, "source": {"kind": "correction", "id": "support-ticket-7"}})
    prompt.refresh_from_db()

    assert prompt.status == "withdrawn"
    assert agent.get("/subjects/u-1/prompts")["prompts"] == []


def test_a_prompt_whose_task_was_lost_is_opened_by_the_sweep_once(agent):
    for data in tie() + change():
        agent.assert_fact(data)  # no on-commit here: as if the broker had been down
    waiting = PromptRequest.objects.filter(tenant=agent.tenant, done_at__isnull=True).count()

    fresh = actions.open_requested_prompts(stuck_after_seconds=60)
    swept = actions.open_requested_prompts(stuck_after_seconds=0)
    again = actions.open_requested_prompts(stuck_after_seconds=0)

    assert (waiting, fresh, swept, again) == (2, 0, 2, 0)
    assert sorted(ClarificationPrompt.objects.filter(tenant=agent.tenant).values_list("kind", flat=True)) == [
        "conflict", "proposal"]


def test_a_proposal_asked_again_after_its_confirmation_is_retracted(agent, ask, inline_tasks):
    prompt = ask(agent, change())
    proposal = Assertion.objects.get(pk=prompt.proposal_assertion_id)
    confirmation = agent.assert_fact({**change()[1], "source": {"kind": "correction", "id": "support-ticket-9"}})
    prompt.refresh_from_db()
    withdrawn = prompt.status

    with inline_tasks():
        agent.api("POST", f"/assertions/{confirmation['assertion_id']}/retract", {"reason": "agent mistake"})
    prompt.refresh_from_db()

    assert withdrawn == "withdrawn"
    assert (prompt.status, prompt.proposal_assertion_id) == ("pending", proposal.id)
    assert ClarificationPrompt.objects.filter(tenant=agent.tenant).count() == 1


def test_a_tie_carried_on_by_the_same_values_asks_about_each_value_once(agent, ask):
    # Two more claims of the same two values, later, carry the tie on: one
    # conflict of four claims, asked about as two values, each quoted from
    # its latest statement.
    later = tie(valid_from="2026-06-01T00:00:00Z", stated=("2026-11-26T10:00:00Z", "2026-11-27T10:00:00Z"))
    later = [{**p, "source": {**p["source"], "id": f"{p['source']['id']}-again"}} for p in later]

    prompt = ask(agent, tie() + later)

    candidates = [o for o in prompt.options if o["kind"] == "candidate"]
    assert [o["value"] for o in candidates] == [ALTE, NEUE]
    assert [o["stated_at"] for o in candidates] == ["2026-11-26T10:00:00Z", "2026-11-27T10:00:00Z"]
    assert prompt.question.count(ALTE) == 1 and prompt.question.count(NEUE) == 1
    assert len(prompt.assertion_ids) == 4


def test_one_batch_asks_for_all_its_prompts_in_one_task(agent, monkeypatch, django_capture_on_commit_callbacks):
    """A batch whose events ask for several prompts records a request for
    each (one statement) and enqueues one task for all of them on commit;
    that task opens every prompt, and running it again opens none twice."""
    enqueued = []
    monkeypatch.setattr(actions, "enqueue", lambda task, kwargs, **_: enqueued.append((task.name, kwargs)))
    payloads = tie(subject="u-1") + change(subject="u-2") + change(subject="u-3")
    events = [{"id": f"e-{n}", "type": "fact.asserted", "data": data} for n, data in enumerate(payloads)]

    with django_capture_on_commit_callbacks(execute=True):
        response = agent.api("POST", "/assertions/batch", {"events": events})
    requests = PromptRequest.objects.filter(tenant=agent.tenant, done_at__isnull=True).count()
    (name, kwargs), = enqueued
    opened = [actions.open_prompts(**kwargs) for _ in range(2)]

    assert response.status_code == 200
    assert [r["outcome"] for r in response.json()["results"]] == ["created", "conflict", "created", "proposed",
                                                                  "created", "proposed"]
    assert (requests, name, len(kwargs["conflict_ids"]), len(kwargs["proposals"])) == (3, "conflicts.open_prompts", 1, 2)
    assert opened == [3, 3]
    assert sorted(ClarificationPrompt.objects.filter(tenant=agent.tenant).values_list("kind", "subject__external_id")) == [
        ("conflict", "u-1"), ("proposal", "u-2"), ("proposal", "u-3")]
    assert PromptRequest.objects.filter(tenant=agent.tenant, done_at__isnull=True).count() == 0


def _proposals(agent, subjects) -> list[list]:
    """Write a change on each subject's high-stakes payment method in one
    batch, the tasks held back; ``[tenant id, assertion id]`` of each proposal."""
    payloads = [p for s in subjects for p in change(subject=s)]
    events = [{"id": f"p-{n}", "type": "fact.asserted", "data": data} for n, data in enumerate(payloads)]
    results = agent.api("POST", "/assertions/batch", {"events": events}).json()["results"]
    return [[agent.tenant.id, r["assertion_id"]] for r in results if r["outcome"] == "proposed"]


@pytest.mark.parametrize("subjects", [2, 6])
def test_a_task_opens_its_proposals_prompts_with_as_many_queries_however_many_there_are(agent, monkeypatch, subjects):
    """The worker opens a batch's proposal prompts together: the keys
    locked in one statement, one query each for what it reads, one INSERT
    for the prompts (not a dozen statements per prompt)."""
    monkeypatch.setattr(actions, "enqueue", lambda *a, **k: True)
    proposals = _proposals(agent, [f"u-{n}" for n in range(subjects)])

    with CaptureQueriesContext(connection) as ctx:
        opened = actions.open_prompts(proposals=proposals)
    prompts = ClarificationPrompt.objects.filter(tenant=agent.tenant, kind="proposal")

    assert (len(proposals), opened, prompts.count()) == (subjects, subjects, subjects)
    assert sorted(str(p.proposal_assertion_id) for p in prompts) == sorted(a for _, a in proposals)
    assert all(p.options and "card ending 2222" in p.question for p in prompts)
    # Two savepoints (the test's transaction), the endpoints' lookup and ten statements of its own.
    assert len(ctx.captured_queries) == 13


def test_a_refused_insert_of_several_prompts_opens_them_one_by_one(agent, monkeypatch):
    """Should the one INSERT of a task's prompts break a unique constraint
    (a prompt of one of them stored meanwhile), nothing of it is kept and
    each prompt is created on its own, as a single one is."""
    monkeypatch.setattr(actions, "enqueue", lambda *a, **k: True)
    proposals = _proposals(agent, ["u-1", "u-2"])
    manager = type(ClarificationPrompt.objects)
    bulk_create = manager.bulk_create
    refused = []

    def refusing_bulk_create(self, objs, *args, **kwargs):
        bulk_create(self, objs, *args, **kwargs)  # written, then refused: the savepoint must drop them
        refused.append(len(objs))
        raise IntegrityError('duplicate key value violates unique constraint "prompt_one_per_proposal"')

    monkeypatch.setattr(manager, "bulk_create", refusing_bulk_create)
    opened = actions.open_proposal_prompts(tenant_id=agent.tenant.id, assertion_ids=[a for _, a in proposals])
    stored = ClarificationPrompt.objects.filter(tenant=agent.tenant)

    assert refused == [2] and stored.count() == 2
    assert {a: str(p.proposal_assertion_id) for a, p in opened.items()} == {a: a for _, a in proposals}
    assert {p.id for p in opened.values()} == set(stored.values_list("id", flat=True))


def test_proposal_prompts_name_unknown_and_malformed_assertions_none_and_write_nothing(agent, monkeypatch):
    monkeypatch.setattr(actions, "enqueue", lambda *a, **k: True)
    (tenant_id, proposal), = _proposals(agent, ["u-1"])
    unknown = "0192a3b4-0000-7000-8000-000000000000"
    before = ClarificationPrompt.objects.count()

    found = actions.open_proposal_prompts(tenant_id=tenant_id, assertion_ids=[unknown, "not-a-uuid"])
    other_tenant = actions.open_proposal_prompt(tenant_id=tenant_id + 1000, assertion_id=proposal)
    upper = actions.open_proposal_prompt(tenant_id=tenant_id, assertion_id=proposal.upper())

    assert found == {unknown: None, "not-a-uuid": None} and other_tenant is None
    assert ClarificationPrompt.objects.count() == before + 1
    assert str(upper.proposal_assertion_id) == proposal


def test_a_tie_resolved_and_opened_again_in_one_batch_leaves_one_open_conflict(agent, inline_tasks):
    """The batch path writes the conflicts it changes before those it
    opens: a stored open tie whose candidate is retracted (resolved) and a
    new value tying at the same valid time (opened again) make one resolved
    and one open row, as the unique constraint on open ties allows."""
    first, second = tie()
    with inline_tasks():
        agent.assert_fact(first)
        agent.assert_fact(second)
    stored = Conflict.objects.get(tenant=agent.tenant)
    neue = Assertion.objects.get(tenant=agent.tenant, value=NEUE)
    third = tie(values=(KOELN,), stated=("2026-11-25T10:00:00Z",))[0]
    events = [{"id": "r-1", "type": "fact.retracted", "data": {"assertion_id": str(neue.id), "reason": "wrong"}},
              {"id": "a-1", "type": "fact.asserted", "data": {**third, "source": {**third["source"], "id": "msg-3"}}}]

    with inline_tasks(), CaptureQueriesContext(connection) as sent:
        response = agent.api("POST", "/assertions/batch", {"events": events})
    conflicts = {c.status: c for c in Conflict.objects.filter(tenant=agent.tenant).exclude(pk=stored.pk)}
    stored.refresh_from_db()

    assert [r["outcome"] for r in response.json()["results"]] == ["retracted", "conflict"]
    # Written in one go: no unique violation sent the batch back to one item at a time.
    assert not [q for q in sent.captured_queries if q["sql"].startswith("ROLLBACK TO SAVEPOINT")]
    assert (stored.status, stored.resolution_rule) == ("RESOLVED", "tie-gone")
    assert list(conflicts) == ["OPEN"] and conflicts["OPEN"].valid_from == stored.valid_from
    assert sorted(Assertion.objects.filter(pk__in=conflicts["OPEN"].candidate_ids).values_list("value", flat=True)) == \
        sorted([ALTE, KOELN])
    assert agent.get("/subjects/u-1/facts")["facts"][0]["status"] == "conflict"
