"""Console pages show ids by a part that tells records apart: assertion ids
are UUIDv7, whose first characters are the minute they were written in, so
the pages show the random tail, with the full id in a ``title``."""
from __future__ import annotations

import html
import re

import pytest

from console import services
from facts.models import Assertion, Event
from tests.factories import assertion_data

pytestmark = pytest.mark.django_db

SHORT_ID = re.compile(r'<code[^>]*\btitle="([0-9a-f-]{36})"[^>]*>([^<]*)</code>')


def shown_ids(response) -> dict[str, str]:
    """Full id -> the text shown for it, for every id the page shortens."""
    return {full: html.unescape(text) for full, text in SHORT_ID.findall(response.content.decode())}


def assert_told_apart(shown: dict[str, str], ids: list) -> None:
    texts = [shown.get(str(i)) for i in ids]
    assert all(t is not None and t.endswith(str(i)[-12:]) for t, i in zip(texts, ids)), (texts, ids)
    assert len(set(texts)) == len(ids)


def test_the_event_log_tells_assertions_written_in_the_same_minute_apart(world, people):
    for city in ("Munich", "Hamburg", "Cologne", "Bremen"):
        world.agent.assert_fact(assertion_data(subject=world.subject, predicate="favourite_city", value=city))
    ids = list(Event.objects.filter(subject__external_id=world.subject, assertion_id__isnull=False)
               .values_list("assertion_id", flat=True).distinct())

    response = people["agent"].get(f"/console/{world.slug}/subjects/{world.subject}/")

    assert len(ids) >= 5
    assert len({str(i)[:8] for i in ids}) < len(ids)  # the prefix alone would not tell them apart
    assert_told_apart(shown_ids(response), ids)


def test_a_revocation_tells_its_restored_copies_and_the_batch_apart(world, people):
    for i, value in enumerate(["Initech", "Umbrella", "Hooli"]):
        world.agent.assert_fact(assertion_data(subject=f"u-bulk-{i}", predicate="employer", value=value,
                                               source={"kind": "agent_inference", "id": f"inf-{i}",
                                                       "extractor": "profile-inference@0.9"}))
    revoked = people["admin"].post(f"/console/{world.slug}/revocations/revoke",
                                   {"extractor": "profile-inference@0.9", "reason": "guesses", "expected": 3},
                                   follow=True)
    batch = services.revocations(tenant=world.agent.tenant)[0]
    services.undo_revocation(tenant=world.agent.tenant, batch_id=batch.id, actor="staff:ops")
    copies = list(Assertion.objects.filter(tenant=world.agent.tenant, extractor="profile-inference@0.9",
                                           retracted_at__isnull=True).values_list("id", flat=True))

    response = people["agent"].get(f"/console/{world.slug}/revocations/{batch.id}/")

    assert len(copies) == 3
    assert_told_apart(shown_ids(response), copies)
    assert str(batch.id) in shown_ids(response)
    assert f"Batch {batch.id}</h1>" in response.content.decode()
    assert f"batch …{str(batch.id)[-12:]}" in revoked.content.decode()


def test_a_decided_task_shows_its_correction_by_a_telling_part(world, people):
    people["agent"].post(f"/console/{world.slug}/queue/{world.task.id}/decide",
                         {"decision": "confirm", "note": "called them"})
    correction = Assertion.objects.get(tenant=world.agent.tenant, source_kind="correction")

    response = people["agent"].get(f"/console/{world.slug}/queue/{world.task.id}/")

    assert_told_apart(shown_ids(response), [correction.id])
