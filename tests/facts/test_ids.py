"""Assertion ids are UUIDv7: valid UUIDs, time-ordered, unique under a
frozen clock (issue 6: primary-key inserts append)."""
from __future__ import annotations

import uuid
from datetime import datetime, timezone

import time_machine

from facts.models import Assertion, new_assertion_id


def test_new_assertion_id_is_a_plain_uuid7():
    aid = new_assertion_id()
    assert type(aid) is uuid.UUID
    assert aid.version == 7 and aid.variant == uuid.RFC_4122
    assert uuid.UUID(str(aid)) == aid


def test_assertion_default_id_is_uuid7():
    assert Assertion().id.version == 7


def test_ids_sort_by_creation_and_carry_the_time():
    before_ms = int(datetime.now(timezone.utc).timestamp() * 1000)
    ids = [new_assertion_id() for _ in range(1000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert ids[0].int >> 80 >= before_ms  # the first 48 bits: Unix time in milliseconds


def test_ids_stay_unique_and_increasing_when_the_clock_stands_still_or_goes_back():
    with time_machine.travel(datetime(2021, 1, 1, tzinfo=timezone.utc), tick=False):
        frozen = [new_assertion_id() for _ in range(100)]
    with time_machine.travel(datetime(2020, 1, 1, tzinfo=timezone.utc), tick=False):
        earlier_clock = [new_assertion_id() for _ in range(10)]
    ids = frozen + earlier_clock
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
