"""The LoCoMo importer: each speaker a subject, each observation a ``note``
with the cited turn as evidence and the session date (UTC) as stated and
valid time, sent through the signed webhook path like a real agent."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

pytest.importorskip("facts.importers.common")  # the shared importer framework

from django.core.management import call_command  # noqa: E402

from facts.importers import locomo  # noqa: E402
from facts.models import Assertion, Subject  # noqa: E402

REAL_FILE = Path(__file__).resolve().parents[2] / locomo.DEFAULT_PATH

SAMPLE = {
    "sample_id": "conv-99",
    "conversation": {
        "speaker_a": "Ana", "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a cat!", "blip_caption": "a photo of a cat"},
            {"speaker": "Bo", "dia_id": "D1:2", "text": "Congrats. I start at the bakery Monday."},
            {"speaker": "Bo", "dia_id": "D1:3", "text": "Early shifts though."},
        ],
    },
    "observation": {"session_1_observation": {
        "Ana": [["Ana adopted a cat.", "D1:1"]],
        "Bo": [["Bo starts a bakery job.", "D1:2, D1:3"], ["Bo works early shifts.", ["D1:3"]]],
    }},
}


def test_observations_map_to_notes_with_evidence_and_utc_session_time():
    events = list(locomo.sample_events(SAMPLE))

    ana = events[0].data
    assert (ana["subject"], ana["subject_name"], ana["predicate"], ana["value"]) == (
        "locomo-conv-99-ana", "Ana", "note", "Ana adopted a cat.")
    assert ana["valid_from"] == ana["stated_at"] == "2023-05-08T13:56:00Z"
    assert ana["source"] == {"kind": "user_statement", "id": "locomo:conv-99:D1:1:0", "extractor": "locomo-observation",
                             "evidence": "I adopted a cat! [shared a photo: a photo of a cat]"}
    assert events[1].data["source"]["id"] == "locomo:conv-99:D1:2+D1:3:0"
    assert events[1].data["source"]["evidence"] == "Congrats. I start at the bakery Monday.\n\nEarly shifts though."
    assert events[2].data["source"]["id"] == "locomo:conv-99:D1:3:0"


def test_an_unreadable_session_date_names_where_it_is():
    broken = json.loads(json.dumps(SAMPLE))
    broken["conversation"]["session_1_date_time"] = "sometime in May"

    with pytest.raises(locomo.DataError, match="conv-99 session_1_observation"):
        list(locomo.sample_events(broken))


@pytest.mark.django_db
def test_command_imports_speakers_through_signed_webhooks_and_a_rerun_writes_nothing(agent):
    args = ["--tenant", agent.slug, "--api-key", agent.api_key, "--secret", agent.webhook_secret,
            "--conversations", "conv-26", "--limit", "24", "--json"]
    out = io.StringIO()

    call_command("import_locomo", *args, stdout=out)
    again = io.StringIO()
    call_command("import_locomo", *args, stdout=again)

    summary = json.loads(out.getvalue())
    assert (summary["sent"], summary["refused"]) == (24, 0)
    assert Assertion.objects.filter(tenant__slug=agent.slug).count() == 24
    assert json.loads(again.getvalue())["sent"] == 24
    assert Assertion.objects.filter(tenant__slug=agent.slug).count() == 24
    caroline = Subject.objects.get(tenant__slug=agent.slug, external_id="locomo-conv-26-caroline")
    assert caroline.display_name == "Caroline"
    first = agent.get("/subjects/locomo-conv-26-caroline/facts", predicate="note")["facts"][0]
    assert first["source"]["extractor"] == "locomo-observation"
    assert first["source"]["evidence"]


def test_the_real_file_yields_every_observation_once():
    events = locomo.build_events(path=REAL_FILE)

    assert len(events) == 2541
    assert len({e.data["source"]["id"] for e in events}) == len(events)
    assert all(e.data["source"]["evidence"] for e in events)
    assert len(locomo.speakers(path=REAL_FILE)) == 20
