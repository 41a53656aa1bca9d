"""The periodic tasks beat runs (CELERY_BEAT_SCHEDULE) exist, and the
nightly reconcile finds and repairs a drifting projection."""
from django.conf import settings

from conflicts import tasks
from facts.models import CurrentFact
from memoryui.celery import app
from tests.factories import assertion_data


def test_every_beat_entry_names_a_registered_task():
    names = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}

    assert names == {"conflicts.escalate_prompts", "conflicts.expire_prompts", "conflicts.sweep", "conflicts.reconcile",
                     "conflicts.purge_receipts"}
    assert names <= set(app.tasks)


def test_the_nightly_reconcile_repairs_a_projection_edited_behind_the_ledgers_back(agent):
    agent.assert_fact(assertion_data(value="Berlin", valid_from="2026-03-01T00:00:00Z"))
    CurrentFact.objects.filter(tenant=agent.tenant).update(value="Paris")

    first = tasks.reconcile.apply().get()
    second = tasks.reconcile.apply().get()

    assert (first["drifting"], first["repaired"], second["drifting"]) == (1, 1, 0)
    assert [f["value"] for f in agent.get("/subjects/u-1/facts")["facts"]] == ["Berlin"]
