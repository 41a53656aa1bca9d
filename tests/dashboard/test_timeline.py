"""The history picture's geometry and the words under it (pure functions)."""
from __future__ import annotations

from datetime import datetime, timezone

from dashboard.timeline import WIDTH, build_timeline
from dashboard.words import badge, history_sentences

NOW = datetime(2026, 1, 15, tzinfo=timezone.utc)


def source(aid: str, *, kind="user_statement", recorded="2025-03-02T09:00:00Z", retracted=None, erased=None, **extra):
    return {"assertion_id": aid, "kind": kind, "id": f"msg-{aid}", "extractor": "", "evidence": "",
            "valid_from": "2025-03-01T00:00:00Z", "valid_to": None, "stated_at": recorded, "recorded_at": recorded,
            "retracted_at": retracted, "erased_at": erased, "status": "", "events": [], **extra}


def version(aid, value, start, end, status, *, sources=None, supersedes=()):
    return {"assertion_id": aid, "value": value, "valid_from": start, "valid_to": end, "stated_at": start,
            "recorded_at": (sources or [source(aid)])[0]["recorded_at"], "status": status, "rule": "",
            "supersedes": list(supersedes), "superseded_by": None, "sources": sources or [source(aid)], "events": []}


BERLIN = version("a", "Berlin", "2025-03-01T00:00:00Z", "2025-11-22T00:00:00Z", "superseded")
MUNICH = version("b", "Munich", "2025-11-22T00:00:00Z", None, "current",
                 sources=[source("b", recorded="2025-11-22T18:00:00Z", valid_from="2025-11-22T00:00:00Z")],
                 supersedes=["a"])


def test_one_bar_per_version_placed_on_valid_time():
    timeline = build_timeline(versions=[BERLIN, MUNICH], now=NOW)

    berlin, munich = timeline.bars
    assert (berlin.status, munich.status) == ("superseded", "current")
    assert berlin.x < munich.x
    assert abs(berlin.x + berlin.width - munich.x) < 0.2  # Munich starts where Berlin ends
    assert munich.open_end and munich.x + munich.width == WIDTH - 14
    assert berlin.x < timeline.now_x < munich.x + munich.width


def test_a_label_that_would_run_past_the_right_edge_ends_at_it():
    late = version("e", "Cologne", "2026-01-10T00:00:00Z", None, "overruled")

    berlin, cologne = build_timeline(versions=[BERLIN, late], now=NOW).bars

    assert (berlin.label_anchor, berlin.label_x) == ("start", berlin.x)
    assert (cologne.label_anchor, cologne.label_x) == ("end", WIDTH - 14)


def test_a_forgotten_bar_says_so_once_and_gets_a_legend_entry():
    erased = version("d", None, "2025-03-01T00:00:00Z", None, "erased",
                     sources=[source("d", erased="2025-12-24T00:00:00Z")])

    timeline = build_timeline(versions=[erased, MUNICH], now=NOW)

    assert (timeline.bars[0].label, timeline.bars[0].status_label) == ("forgotten", "")
    assert timeline.extra_legend == [("erased", "forgotten")]


def test_learned_and_retracted_moments_are_marked():
    retracted = version("c", "German", "2025-04-01T00:00:00Z", None, "retracted",
                        sources=[source("c", retracted="2025-12-01T00:00:00Z")])

    timeline = build_timeline(versions=[retracted], now=NOW)

    assert [m.kind for m in timeline.markers] == ["learned", "retracted"]
    assert timeline.markers[0].x < timeline.markers[1].x


def test_ticks_are_round_dates_and_leave_room_for_today():
    timeline = build_timeline(versions=[BERLIN, MUNICH], now=NOW)

    assert timeline.ticks
    assert all(abs(t.x - timeline.now_x) > 48 for t in timeline.ticks)
    assert all(t.label[:3] in ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
               for t in timeline.ticks)


def event(type_, aid, at, *, before=(), after=(), rule="", actor="agent", **data):
    return {"type": type_, "assertion_id": aid, "at": datetime.fromisoformat(at), "rule": rule, "actor": actor,
            "before": list(before), "after": list(after), "data": data}


def test_the_change_is_told_in_words():
    events = [
        event("fact.asserted", "a", "2025-03-02T09:00:00Z", after=["a"], outcome="created"),
        event("fact.asserted", "b", "2025-11-22T18:00:00Z", before=["a"], after=["b"],
              rule="valid-time-supersession", outcome="superseded_existing"),
        event("fact.superseded", "a", "2025-11-22T18:00:00Z", before=["a"], after=["b"],
              rule="valid-time-supersession"),
    ]

    sentences = [s.text for s in history_sentences([BERLIN, MUNICH], events)]

    assert sentences == [
        "You said “Berlin”, true from 1 Mar 2025.",
        "You said “Munich”, true from 22 Nov 2025.",
        "“Munich” replaced “Berlin” on 22 Nov 2025, because you said so later.",
    ]


def test_a_replacement_by_a_more_reliable_source_says_so():
    inferred = version("a", "Berlin", "2025-03-01T00:00:00Z", None, "superseded",
                       sources=[source("a", kind="agent_inference")])
    said = version("b", "Munich", "2025-03-01T00:00:00Z", None, "current", sources=[source("b")])
    events = [event("fact.asserted", "b", "2025-11-22T18:00:00Z", before=["a"], after=["b"], rule="source-rank",
                    outcome="superseded_existing")]

    assert history_sentences([inferred, said], events)[-1].text == (
        "“Munich” replaced “Berlin” on 1 Mar 2025, because it comes from a source I trust more.")


def test_a_forgotten_version_is_told_without_its_value():
    erased = version("d", None, "2025-03-01T00:00:00Z", None, "erased",
                     sources=[source("d", erased="2025-12-24T00:00:00Z")])
    events = [event("fact.asserted", "d", "2025-03-02T09:00:00Z", after=["d"], outcome="created"),
              event("fact.erased", "d", "2025-12-24T00:00:00Z", rule="erasure")]

    assert [s.text for s in history_sentences([erased], events)] == [
        "I learned something that has since been forgotten.",
        "A memory was forgotten on 24 Dec 2025. Nothing of it is kept."]


def test_badges_name_the_source_in_plain_words():
    assert [badge(s)["text"] for s in (
        {"kind": "user_statement"}, {"kind": "correction"}, {"kind": "system_record", "id": "crm:42"},
        {"kind": "system_record", "id": "x", "extractor": "billing-sync@4"}, {"kind": "user_document"},
        {"kind": "agent_inference"})] == [
        "you said", "you corrected", "from crm", "from billing-sync", "from a document", "inferred by the assistant"]
