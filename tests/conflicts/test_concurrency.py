"""Concurrency on real transactions: answers racing for one prompt, workers
racing to open one prompt. The fact key and prompt row locks decide."""
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from django.test import Client

from conflicts import actions
from conflicts.models import ClarificationPrompt
from facts.models import Assertion, Conflict
from tests.conftest import TenantClient
from tests.conflicts.conftest import option_id
from tests.conflicts.factories import ALTE, NEUE, tie

pytestmark = pytest.mark.django_db(transaction=True)


def race(fn, args: list) -> list:
    """Run ``fn(arg)`` in one thread per arg, released together."""
    barrier = threading.Barrier(len(args))

    def run(arg):
        barrier.wait()
        try:
            return fn(arg)
        finally:
            connection.close()

    with ThreadPoolExecutor(len(args)) as pool:
        return list(pool.map(run, args))


def test_answers_at_once_one_wins_the_others_get_409_and_one_correction_is_recorded(agent, private_queue):
    for data in tie():
        agent.assert_fact(data)
    prompt = actions.open_conflict_prompt(conflict_id=str(Conflict.objects.get(tenant=agent.tenant).id))
    choices = [option_id(prompt, value=v) for v in (ALTE, NEUE, ALTE, NEUE)]

    def answer(choice):
        client = TenantClient(Client(), agent.slug, agent.api_key, agent.webhook_secret)
        return client.api("POST", f"/prompts/{prompt.id}/answer", {"choice": choice}).status_code

    codes = race(answer, choices)
    prompt.refresh_from_db()

    assert sorted(codes) == [200, 409, 409, 409]
    assert Assertion.objects.filter(tenant=agent.tenant, source_kind="correction").count() == 1
    assert prompt.status == "answered"


def test_workers_racing_to_open_a_prompt_open_one(agent, private_queue):
    for data in tie():
        agent.assert_fact(data)
    conflict_id = str(Conflict.objects.get(tenant=agent.tenant).id)

    opened = race(lambda _: actions.open_conflict_prompt(conflict_id=conflict_id).id, range(4))

    assert len(set(opened)) == 1
    assert ClarificationPrompt.objects.filter(tenant=agent.tenant).count() == 1
