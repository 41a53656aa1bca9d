"""The memory page's "What happened" list: the key's event log told in
words, in the order memoryui learned things, each change naming what it
actually replaced."""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

pytestmark = pytest.mark.django_db

MORNING = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)


def move(person, value: str, since: str, *, kind: str = "user_statement", minutes: int) -> dict:
    """The person's city from ``since``, learned ``minutes`` after 09:00 on 30 November 2026."""
    with time_machine.travel(MORNING + timedelta(minutes=minutes), tick=False):
        return person.remember(predicate="city_of_residence", value=value, valid_from=f"{since}T00:00:00Z",
                               source={"kind": kind, "id": f"{kind}-{value}", "evidence": f"I live in {value}"})


def story(person, assertion_id: str) -> list[tuple[str, str]]:
    """``(time shown, sentence)`` of each row of the page's "What happened"."""
    response = person.client.get(f"/memories/{assertion_id}/")
    assert response.status_code == 200
    html = response.content.decode()
    section = html[html.index('<ol class="story'):html.index("</ol>")]
    return re.findall(r"<li><time[^>]*>([^<]*)</time><span>([^<]*)</span></li>", section.replace("&#x27;", "'"))


def test_what_happened_is_the_event_log_in_the_order_it_was_learned(person):
    paris = move(person, "Paris", "2024-01-01", minutes=0)
    move(person, "Berlin", "2026-03-01", minutes=5)
    bonn = move(person, "Bonn", "2026-03-01", kind="correction", minutes=10)
    move(person, "Munich", "2026-06-01", minutes=15)
    move(person, "Cologne", "2026-11-01", kind="correction", minutes=20)
    assert bonn["supersedes"] and bonn["outcome"] == "superseded_existing"

    assert [text for _, text in story(person, paris["assertion_id"])] == [
        "You said “Paris”, true from 1 Jan 2024.",
        "You said “Berlin”, true from 1 Mar 2026.",
        "“Berlin” replaced “Paris” on 1 Mar 2026, because you said so later.",
        "You corrected it to “Bonn”, true from 1 Mar 2026.",
        "“Bonn” replaced “Berlin” on 1 Mar 2026, because you corrected it.",
        "From then on “Berlin” was kept but not used, because a more reliable source said otherwise.",
        "You said “Munich”, true from 1 Jun 2026. It was kept but not used, because a more reliable source "
        "said otherwise.",
        "You corrected it to “Cologne”, true from 1 Nov 2026.",
        "“Cologne” replaced “Bonn” on 1 Nov 2026, because you corrected it.",
    ]


def test_rows_of_the_same_day_show_their_time(person):
    paris = move(person, "Paris", "2024-01-01", minutes=-24 * 60)
    move(person, "Berlin", "2026-03-01", minutes=5)

    shown = [when for when, _ in story(person, paris["assertion_id"])]

    assert shown == ["29 Nov 2026", "30 Nov 2026, 09:05", "30 Nov 2026, 09:05"]


def test_what_happened_is_not_rewritten_by_later_changes(person):
    paris = move(person, "Paris", "2024-01-01", minutes=0)
    move(person, "Berlin", "2026-03-01", minutes=5)
    move(person, "Munich", "2026-06-01", minutes=10)
    move(person, "Bonn", "2026-03-01", kind="correction", minutes=15)
    move(person, "Cologne", "2026-11-01", minutes=20)
    move(person, "Cologne", "2026-11-01", kind="correction", minutes=25)

    texts = [text for _, text in story(person, paris["assertion_id"])]

    # Munich did replace Berlin when it arrived, though a correction overruled both later.
    assert texts.index("“Munich” replaced “Berlin” on 1 Jun 2026, because you said so later.") \
        < texts.index("You corrected it to “Bonn”, true from 1 Mar 2026.")
    # Cologne was kept but not used when it was said, whatever came after.
    assert ("You said “Cologne”, true from 1 Nov 2026. It was kept but not used, because a more reliable source "
            "said otherwise.") in texts
    # And it was the correction that replaced Bonn.
    assert "“Cologne” replaced “Bonn” on 1 Nov 2026, because you corrected it." in texts
    assert "“Cologne” replaced “Bonn” on 1 Nov 2026, because you said so later." not in texts


def test_memory_page_query_count_does_not_grow_with_the_events(person, neighbour):
    few = move(person, "Paris", "2024-01-01", minutes=0)
    many = move(neighbour, "Paris", "2024-01-01", minutes=0)
    for i, city in enumerate(["Berlin", "Bonn", "Munich", "Cologne", "Hamburg", "Leipzig"], start=1):
        move(neighbour, city, f"2025-{i:02d}-01", minutes=i)

    counts = []
    for who, memory in ((person, few), (neighbour, many)):
        with CaptureQueriesContext(connection) as ctx:
            assert who.client.get(f"/memories/{memory['assertion_id']}/").status_code == 200
        counts.append(len(ctx.captured_queries))

    assert counts[0] == counts[1]


def test_a_tie_between_equals_is_told_as_a_tie_everywhere(person):
    # Two statements, same rank and same start: the one said last wins (tie-stated-at), not a better source.
    munich = move(person, "Munich", "2026-11-01", minutes=0)
    paris = move(person, "Paris", "2026-11-01", minutes=5)
    assert paris["rule"] == "tie-stated-at"

    texts = [text for _, text in story(person, paris["assertion_id"])]
    html = person.client.get(f"/memories/{munich['assertion_id']}/").content.decode()
    bars = html[html.index("<svg"):html.index("</svg>")]

    assert texts[-3:] == [
        "“Paris” replaced “Munich” on 1 Nov 2026, because it was said later, by a source I trust as much.",
        "From then on “Munich” was kept but not used, because a source I trust as much said otherwise later.",
        "“Munich” and “Paris” disagreed, from sources I trust as much; I went with the one said last.",
    ]
    assert not [t for t in texts if "trust more" in t or "more reliable" in t]
    assert "Munich · said earlier, not used" in re.sub(r"<[^>]+>\s*", "", bars)
    assert "Right now: <strong class=\"status status--overruled\">said earlier, not used</strong>" in html


def test_a_lower_ranked_source_is_still_told_as_less_reliable(person):
    move(person, "Bonn", "2026-11-01", kind="correction", minutes=0)
    munich = move(person, "Munich", "2026-11-01", minutes=5)

    texts = [text for _, text in story(person, munich["assertion_id"])]

    assert texts[-1] == ("You said “Munich”, true from 1 Nov 2026. It was kept but not used, because a more "
                         "reliable source said otherwise.")
