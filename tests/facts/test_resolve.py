"""The pure resolution function (DESIGN.md, "The write rule" and "The
resolution function"), without a database: one test per rule, then
properties over random claim sets."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from facts.resolve import (
    FATE_CONFLICT, FATE_OVERRULED, FATE_PROPOSED, FATE_WINNING, RULE_CARDINALITY_MANY, RULE_CORROBORATION,
    RULE_SOURCE_RANK, RULE_SYSTEM_OF_RECORD, RULE_TIE_CONFLICT, RULE_TIE_CONTENT_HASH,
    RULE_TIE_STATED_AT, RULE_VALID_TIME, SEGMENT_CONFLICT, SEGMENT_VALUE, SOURCE_KINDS, Policy, content_hash,
    normalise_value, resolve, timeline_digest,
)
from tests.facts.factories import HIGH, MANY, ONE, SYSTEM_OWNED, at, claim, policy


def answer(resolution, day):
    """``(status, value_key)`` of each segment holding at ``day``."""
    return [(s.status, s.value_key) for s in resolution.at(at(day))]


def bounds(segment):
    return segment.valid_from, segment.valid_to


# --------------------------------------------------------------------------- values


def test_values_compare_in_normalised_form():
    assert normalise_value("  Berlin ") == normalise_value("berlin")
    assert normalise_value("New\u00a0 York") == normalise_value("new york")
    assert normalise_value("Cafe\u0301") == normalise_value("Café")
    assert normalise_value({"b": 1, "a": "X"}) == normalise_value({"a": "x", "b": 1.0})
    assert normalise_value("1") != normalise_value(1)


def test_content_hash_depends_on_source_and_value_only():
    assert content_hash(source_id="m-1", value_key='"berlin"') == content_hash(source_id="m-1", value_key='"berlin"')
    assert content_hash(source_id="m-1", value_key='"berlin"') != content_hash(source_id="m-2", value_key='"berlin"')


def test_unknown_source_kind_is_refused():
    with pytest.raises(ValueError):
        resolve([claim(kind="rumour")], ONE)


# --------------------------------------------------------------------------- step 2: corroboration


def test_same_value_overlapping_is_one_fact_with_two_sources():
    first = claim("Acme", valid_from="2024-01-01")
    second = claim("ACME ", kind="agent_inference", valid_from="2024-06-01")

    resolution = resolve([first, second], ONE)

    (segment,) = resolution.segments
    assert bounds(segment) == (at("2024-01-01"), None)
    assert [c.id for c in segment.sources] == [first.id, second.id]
    assert segment.rule == RULE_CORROBORATION


# --------------------------------------------------------------------------- step 3: cardinality


def test_many_five_languages_stay_five():
    languages = [claim(lang, valid_from=f"2020-0{i + 1}-01") for i, lang in enumerate(
        ["English", "German", "French", "Spanish", "Italian"])]

    resolution = resolve(languages, MANY)

    assert sorted(v for _, v in answer(resolution, "2026-01-01")) == sorted(
        normalise_value(x) for x in ["English", "German", "French", "Spanish", "Italian"])
    assert {s.rule for s in resolution.segments} == {RULE_CARDINALITY_MANY}
    assert set(resolution.fate.values()) == {FATE_WINNING}


def test_many_same_value_from_two_sources_is_one_segment():
    resolution = resolve([claim("German", valid_from="2020-01-01"), claim("german", valid_from="2021-01-01")], MANY)

    (segment,) = resolution.segments
    assert len(segment.sources) == 2


# --------------------------------------------------------------------------- step 4: precedence


def test_inference_never_overrules_the_user():
    said = claim("Acme", kind="user_statement", valid_from="2024-01-01")
    guessed = claim("Globex", kind="agent_inference", valid_from="2025-01-01")

    resolution = resolve([said, guessed], ONE)

    assert answer(resolution, "2025-06-01") == [(SEGMENT_VALUE, said.value_key)]
    assert resolution.fate[guessed.id] == FATE_OVERRULED
    assert resolution.segments[-1].rule == RULE_SOURCE_RANK


def test_correction_overrules_everything_from_any_valid_time():
    stated = claim("Acme", kind="user_statement", valid_from="2024-01-01")
    record = claim("Initech", kind="system_record", valid_from="2024-01-01")
    later = claim("Globex", kind="user_statement", valid_from="2025-01-01")
    corrected = claim("Umbrella", kind="correction", valid_from="2024-01-01")

    resolution = resolve([stated, record, later, corrected], ONE)

    assert answer(resolution, "2024-06-01") == [(SEGMENT_VALUE, corrected.value_key)]
    assert answer(resolution, "2026-01-01") == [(SEGMENT_VALUE, corrected.value_key)]
    assert {resolution.fate[c.id] for c in (stated, record, later)} == {FATE_OVERRULED}


def test_system_of_record_owns_its_predicate():
    billed = claim("pro", kind="system_record", valid_from="2024-01-01")
    said = claim("free", kind="user_statement", valid_from="2025-01-01")

    resolution = resolve([billed, said], SYSTEM_OWNED)

    assert answer(resolution, "2025-06-01") == [(SEGMENT_VALUE, billed.value_key)]
    assert resolution.fate[said.id] == FATE_OVERRULED
    assert resolution.segments[-1].rule == RULE_SYSTEM_OF_RECORD


def test_without_authority_the_user_outranks_the_system_record():
    billed = claim("Berlin", kind="system_record", valid_from="2024-01-01")
    said = claim("Munich", kind="user_statement", valid_from="2024-01-01")

    resolution = resolve([billed, said], ONE)

    assert answer(resolution, "2024-06-01") == [(SEGMENT_VALUE, said.value_key)]


def test_tenant_ranking_decides_precedence():
    documents_first = Policy(cardinality="one", ranking=(
        "correction", "user_document", "user_statement", "system_record", "agent_inference"))
    said = claim("Acme", kind="user_statement", valid_from="2024-01-01")
    document = claim("Globex", kind="user_document", valid_from="2024-01-01")

    assert answer(resolve([said, document], documents_first), "2024-06-01") == [(SEGMENT_VALUE, document.value_key)]


def test_higher_rank_that_ends_hands_back_to_the_lower_one():
    corrected = claim("Acme", kind="correction", valid_from="2024-01-01", valid_to="2025-01-01")
    guessed = claim("Globex", kind="agent_inference", valid_from="2024-06-01")

    resolution = resolve([corrected, guessed], ONE)

    assert answer(resolution, "2024-09-01") == [(SEGMENT_VALUE, corrected.value_key)]
    assert answer(resolution, "2025-06-01") == [(SEGMENT_VALUE, guessed.value_key)]


# --------------------------------------------------------------------------- step 5: valid time


def test_employer_change_is_a_version_history_not_a_conflict():
    old = claim("Acme", valid_from="2020-01-01")
    new = claim("Globex", valid_from="2023-06-01")

    resolution = resolve([new, old], ONE)

    first, second = resolution.segments
    assert (first.value_key, bounds(first)) == (old.value_key, (at("2020-01-01"), at("2023-06-01")))
    assert (second.value_key, bounds(second)) == (new.value_key, (at("2023-06-01"), None))
    assert second.rule == RULE_VALID_TIME
    assert resolution.superseded_by == {old.id: new.id}
    assert resolution.conflicts() == []


def test_old_document_pasted_today_lands_in_history():
    current = claim("Globex", valid_from="2024-01-01", recorded_at="2024-01-02")
    pasted = claim("Acme", valid_from="2023-01-01", recorded_at="2026-03-01")

    resolution = resolve([current, pasted], ONE)

    assert answer(resolution, "2026-03-01") == [(SEGMENT_VALUE, current.value_key)]
    assert answer(resolution, "2023-06-01") == [(SEGMENT_VALUE, pasted.value_key)]
    assert resolution.end[pasted.id] == at("2024-01-01")


def test_supersession_is_permanent_a_bounded_later_claim_does_not_revive():
    old = claim("Acme", valid_from="2020-01-01")
    interlude = claim("Globex", valid_from="2022-01-01", valid_to="2023-01-01")

    resolution = resolve([old, interlude], ONE)

    assert answer(resolution, "2022-06-01") == [(SEGMENT_VALUE, interlude.value_key)]
    assert answer(resolution, "2024-01-01") == []


def test_lower_rank_later_claim_does_not_close_a_higher_one():
    said = claim("Acme", kind="user_statement", valid_from="2020-01-01")
    later_document = claim("Globex", kind="user_document", valid_from="2023-01-01")

    resolution = resolve([said, later_document], ONE)

    assert resolution.end[said.id] is None
    assert answer(resolution, "2024-01-01") == [(SEGMENT_VALUE, said.value_key)]


def test_reported_bounds_are_the_longest_stretch_of_the_same_value():
    first = claim("Acme", valid_from="2020-01-01", valid_to="2022-01-01")
    second = claim("acme", valid_from="2022-01-01", valid_to="2024-01-01")
    third = claim("ACME", kind="agent_inference", valid_from="2023-01-01")

    (segment,) = resolve([first, second, third], ONE).segments

    assert bounds(segment) == (at("2020-01-01"), None)


def test_ttl_ends_a_claim():
    brief = claim("hungry", valid_from="2026-01-01T09:00:00")

    resolution = resolve([brief], policy(ttl_seconds=3600))

    assert answer(resolution, "2026-01-01T09:59:59") == [(SEGMENT_VALUE, brief.value_key)]
    assert answer(resolution, "2026-01-01T10:00:00") == []


def test_ttl_and_valid_to_the_earlier_wins():
    brief = claim("hungry", valid_from="2026-01-01T09:00:00", valid_to="2026-01-01T09:30:00")

    assert resolve([brief], policy(ttl_seconds=3600)).end[brief.id] == at("2026-01-01T09:30:00")


# --------------------------------------------------------------------------- step 6: ties


def test_low_stakes_tie_goes_to_the_later_statement():
    earlier = claim("Acme", valid_from="2024-01-01", stated_at="2024-02-01")
    later = claim("Globex", valid_from="2024-01-01", stated_at="2024-03-01")

    resolution = resolve([later, earlier], ONE)

    assert answer(resolution, "2024-06-01") == [(SEGMENT_VALUE, later.value_key)]
    assert resolution.segments[0].rule == RULE_TIE_STATED_AT
    assert [(t[0], t[1]) for t in resolution.ties] == [(at("2024-01-01"), RULE_TIE_STATED_AT)]


def test_low_stakes_tie_same_statement_time_falls_to_content_hash():
    one = claim("Acme", valid_from="2024-01-01", source_id="m-1")
    two = claim("Globex", valid_from="2024-01-01", source_id="m-2")
    expected = min((one, two), key=lambda c: c.content_hash)

    resolution = resolve([one, two], ONE)

    assert answer(resolution, "2024-06-01") == [(SEGMENT_VALUE, expected.value_key)]
    assert resolution.segments[0].rule == RULE_TIE_CONTENT_HASH


def test_high_stakes_tie_is_an_open_conflict():
    home = claim("1 Main St", valid_from="2024-01-01")
    office = claim("2 High St", valid_from="2024-01-01")

    resolution = resolve([home, office], HIGH)

    (segment,) = resolution.segments
    assert segment.status == SEGMENT_CONFLICT
    assert {c.id for c in segment.candidates} == {home.id, office.id}
    assert {resolution.fate[home.id], resolution.fate[office.id]} == {FATE_CONFLICT}


def test_one_tie_is_recorded_once_however_many_pieces_it_spans():
    home = claim("1 Main St", valid_from="2024-01-01")
    office = claim("2 High St", valid_from="2024-01-01")
    guessed = claim("3 Low Rd", kind="agent_inference", valid_from="2025-01-01")

    resolution = resolve([home, office, guessed], HIGH)

    assert [(t[0], t[1]) for t in resolution.ties] == [(at("2024-01-01"), RULE_TIE_CONFLICT)]
    assert [s.valid_from for s in resolution.conflicts()] == [at("2024-01-01")]


def test_tie_carried_on_by_new_claims_of_the_same_values_holds_them_all():
    home = claim("1 Main St", valid_from="2024-01-01")
    office = claim("2 High St", valid_from="2024-01-01")
    home_again = claim("1 Main St", valid_from="2025-01-01", source_id="m-3")
    office_again = claim("2 High St", valid_from="2025-01-01", source_id="m-4")

    resolution = resolve([home, office, home_again, office_again], HIGH)

    (tie,) = resolution.ties
    (segment,) = resolution.conflicts()
    assert tie[0] == segment.valid_from == at("2024-01-01")
    assert {c.id for c in tie[2]} == {c.id for c in segment.candidates} == {
        home.id, office.id, home_again.id, office_again.id}


def test_correction_settles_a_high_stakes_tie():
    home = claim("1 Main St", valid_from="2024-01-01")
    office = claim("2 High St", valid_from="2024-01-01")
    answered = claim("2 High St", kind="correction", valid_from="2024-01-01", source_id="prompt:1")

    resolution = resolve([home, office, answered], HIGH)

    assert answer(resolution, "2024-06-01") == [(SEGMENT_VALUE, office.value_key)]
    assert resolution.conflicts() == []


# --------------------------------------------------------------------------- step 7: confirm


def test_high_stakes_change_below_correction_is_proposed():
    old = claim("1 Main St", valid_from="2024-01-01")
    new = claim("2 High St", valid_from="2025-01-01")

    resolution = resolve([old, new], HIGH)

    assert resolution.fate[new.id] == FATE_PROPOSED
    assert answer(resolution, "2025-06-01") == [(SEGMENT_VALUE, old.value_key)]


def test_correction_confirms_a_proposal():
    old = claim("1 Main St", valid_from="2024-01-01")
    new = claim("2 High St", valid_from="2025-01-01")
    confirmed = claim("2 High St", kind="correction", valid_from="2025-01-01")

    resolution = resolve([old, new, confirmed], HIGH)

    assert resolution.fate[new.id] == FATE_WINNING
    assert answer(resolution, "2025-06-01") == [(SEGMENT_VALUE, new.value_key)]
    assert answer(resolution, "2024-06-01") == [(SEGMENT_VALUE, old.value_key)]


def test_confirming_one_of_two_changes_with_the_same_start_overrules_the_other():
    # The correction decides the instant it starts at: a change it outranks
    # that starts there too no longer changes the answer, so it is not a
    # pending proposal but a lower-ranked claim that loses.
    old = claim("1 Main St", valid_from="2024-01-01")
    green = claim("2 High St", valid_from="2025-01-01")
    red = claim("3 Low Rd", valid_from="2025-01-01")
    confirmed = claim("2 High St", kind="correction", valid_from="2025-01-01")

    before = resolve([old, green, red], HIGH)
    after = resolve([old, green, red, confirmed], HIGH)

    assert (before.fate[green.id], before.fate[red.id]) == (FATE_PROPOSED, FATE_PROPOSED)
    assert (after.fate[green.id], after.fate[red.id]) == (FATE_WINNING, FATE_OVERRULED)
    assert answer(after, "2025-06-01") == [(SEGMENT_VALUE, green.value_key)]


def test_a_correction_starting_later_does_not_decide_a_change_before_it():
    old = claim("1 Main St", valid_from="2024-01-01")
    change = claim("2 High St", valid_from="2025-01-01")
    later = claim("3 Low Rd", kind="correction", valid_from="2025-06-01")

    assert resolve([old, change, later], HIGH).fate[change.id] == FATE_PROPOSED


def test_high_stakes_correction_applies_at_once():
    old = claim("1 Main St", valid_from="2024-01-01")
    corrected = claim("2 High St", kind="correction", valid_from="2025-01-01")

    resolution = resolve([old, corrected], HIGH)

    assert answer(resolution, "2025-06-01") == [(SEGMENT_VALUE, corrected.value_key)]
    assert FATE_PROPOSED not in resolution.fate.values()


def test_high_stakes_first_value_is_not_a_proposal():
    first = claim("1 Main St", valid_from="2024-01-01")

    assert resolve([first], HIGH).fate == {first.id: FATE_WINNING}


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 2, 0)])
def test_proposals_are_decided_in_valid_time_order(order):
    # The 2025 claim is a proposal against 2024's value; the 2026 claim,
    # equal to the value in force, is not, whatever order they arrive in.
    base = claim("1 Main St", valid_from="2024-01-01")
    proposal = claim("2 High St", valid_from="2025-01-01")
    same_again = claim("1 main st", valid_from="2026-01-01")
    arriving = [(base, proposal, same_again)[i] for i in order]

    resolution = resolve(arriving, HIGH)

    assert resolution.fate == {base.id: FATE_WINNING, proposal.id: FATE_PROPOSED, same_again.id: FATE_WINNING}


# --------------------------------------------------------------------------- digests


def test_timeline_digest_ignores_ids_unless_asked():
    one = [claim("Acme", valid_from="2024-01-01", source_id="m-1", id="x")]
    two = [claim("Acme", valid_from="2024-01-01", source_id="m-1", id="y")]

    assert timeline_digest(resolve(one, ONE).segments) == timeline_digest(resolve(two, ONE).segments)
    assert timeline_digest(resolve(one, ONE).segments, with_ids=True) != timeline_digest(
        resolve(two, ONE).segments, with_ids=True)


# --------------------------------------------------------------------------- properties

EPOCH = datetime(2024, 1, 1, tzinfo=timezone.utc)
POLICIES = st.builds(
    Policy,
    cardinality=st.sampled_from(["one", "many"]),
    stakes=st.sampled_from(["low", "high"]),
    authority=st.sampled_from(["user", "system_record"]),
    ttl_seconds=st.one_of(st.none(), st.sampled_from([86400 * 3, 86400 * 20])),
)


@st.composite
def claims(draw, max_size=8, days=30):
    """Claims on one key: few values, ``days`` days of valid time, any kind."""
    n = draw(st.integers(min_value=0, max_value=max_size))
    out = []
    for i in range(n):
        start = draw(st.integers(min_value=0, max_value=days))
        length = draw(st.one_of(st.none(), st.integers(min_value=1, max_value=20)))
        stated = draw(st.integers(min_value=0, max_value=3))
        out.append(claim(
            draw(st.sampled_from(["A", "B", "C"])), kind=draw(st.sampled_from(SOURCE_KINDS)),
            valid_from=EPOCH + timedelta(days=start),
            valid_to=None if length is None else EPOCH + timedelta(days=start + length),
            stated_at=EPOCH + timedelta(days=start + stated), source_id=draw(st.sampled_from(["s1", "s2", "s3"])),
            id=f"c{i}",
        ))
    return out


def probe_times(cs):
    points = {c.valid_from for c in cs} | {c.valid_to for c in cs if c.valid_to}
    return sorted({p + d for p in points for d in (timedelta(0), timedelta(hours=12), -timedelta(hours=12))})


@settings(max_examples=150, deadline=None)
@given(cs=claims(), p=POLICIES, seed=st.randoms(use_true_random=False))
def test_property_order_and_duplicates_do_not_matter(cs, p, seed):
    shuffled = cs + cs[: len(cs) // 2]
    seed.shuffle(shuffled)

    assert timeline_digest(resolve(shuffled, p).segments, with_ids=True) == timeline_digest(
        resolve(cs, p).segments, with_ids=True)
    assert resolve(shuffled, p).fate == resolve(cs, p).fate


@settings(max_examples=150, deadline=None)
@given(cs=claims(), p=POLICIES)
def test_property_single_valued_has_at_most_one_answer_at_any_time(cs, p):
    resolution = resolve(cs, Policy(cardinality="one", stakes=p.stakes, authority=p.authority,
                                    ttl_seconds=p.ttl_seconds))

    assert all(len(resolution.at(t)) <= 1 for t in probe_times(cs))


@settings(max_examples=150, deadline=None)
@given(cs=claims(), p=POLICIES)
def test_property_every_answer_is_held_by_a_top_ranked_live_claim(cs, p):
    resolution = resolve(cs, p)
    proposals = {c.id for c in cs if resolution.fate[c.id] == FATE_PROPOSED}

    for t in probe_times(cs):
        holding = [c for c in cs if c.id not in proposals and c.valid_from <= t
                   and (resolution.end[c.id] is None or t < resolution.end[c.id])]
        for segment in resolution.at(t):
            rivals = [c for c in holding if p.cardinality == "one" or c.value_key == segment.value_key]
            top = max(p.rank(c.source_kind) for c in rivals)
            leading_values = {c.value_key for c in rivals if p.rank(c.source_kind) == top}
            answered = {segment.value_key} if segment.status == SEGMENT_VALUE else {
                c.value_key for c in segment.candidates}
            assert answered <= leading_values


@settings(max_examples=150, deadline=None)
@given(cs=claims(), p=POLICIES)
def test_property_many_keeps_every_value_that_holds(cs, p):
    p = Policy(cardinality="many", stakes=p.stakes, authority=p.authority, ttl_seconds=p.ttl_seconds)
    resolution = resolve(cs, p)

    for t in probe_times(cs):
        expected = {c.value_key for c in cs if c.valid_from <= t and (resolution.end[c.id] is None
                                                                      or t < resolution.end[c.id])}
        assert {s.value_key for s in resolution.at(t)} == expected


@settings(max_examples=150, deadline=None)
@given(cs=claims(), p=POLICIES)
def test_property_reported_bounds_are_maximal(cs, p):
    segments = resolve(cs, p).segments

    for a in segments:
        for b in segments:
            touching = a.valid_to is not None and a.valid_to == b.valid_from
            same = a.status == b.status and a.value_key == b.value_key and (
                a.status == SEGMENT_VALUE or {c.value_key for c in a.candidates} == {c.value_key for c in b.candidates})
            assert not (touching and same)


@settings(max_examples=150, deadline=None)
@given(cs=claims(), p=POLICIES)
def test_property_every_claim_has_a_fate_and_proposals_take_no_part(cs, p):
    resolution = resolve(cs, p)
    proposals = {cid for cid, fate in resolution.fate.items() if fate == FATE_PROPOSED}
    in_timeline = {c.id for s in resolution.segments for c in s.sources + s.candidates}

    assert set(resolution.fate) == {c.id for c in cs}
    assert not proposals & in_timeline


@settings(max_examples=150, deadline=None)
@given(cs=claims(), p=POLICIES)
def test_property_supersession_only_by_equal_or_higher_rank_later_different_value(cs, p):
    resolution = resolve(cs, p)
    by_id = {c.id: c for c in cs}

    for closed, closer in resolution.superseded_by.items():
        a, b = by_id[closed], by_id[closer]
        assert b.valid_from > a.valid_from and b.value_key != a.value_key
        assert p.rank(b.source_kind) >= p.rank(a.source_kind)
        assert resolution.end[closed] == b.valid_from


@settings(max_examples=150, deadline=None)
@given(cs=claims(max_size=6).filter(bool), p=POLICIES, seed=st.randoms(use_true_random=False))
def test_property_removing_a_claim_removes_it_from_every_answer(cs, p, seed):
    removed = seed.choice(cs)

    resolution = resolve([c for c in cs if c is not removed], p)

    assert removed.id not in {c.id for s in resolution.segments for c in s.sources + s.candidates}
    assert removed.id not in resolution.fate



@settings(max_examples=150, deadline=None)
@given(cs=claims(), p=POLICIES)
def test_property_each_open_conflict_is_one_tie(cs, p):
    resolution = resolve(cs, p)
    open_ties = [t[0] for t in resolution.ties if t[1] == RULE_TIE_CONFLICT]

    assert sorted(open_ties) == [s.valid_from for s in resolution.conflicts()]


@settings(max_examples=300, deadline=None)
@given(cs=claims(days=3), p=POLICIES)
def test_property_each_conflict_candidate_is_in_its_tie(cs, p):
    # The ledger names a new claim's conflict by the tie that holds it
    # (facts/ledger.py, _commit_assertion): every candidate of an open
    # conflict must be among the claims of the tie recorded at its start.
    resolution = resolve(cs, p)
    tied = {t[0]: {c.id for c in t[2]} for t in resolution.ties if t[1] == RULE_TIE_CONFLICT}

    for segment in resolution.conflicts():
        assert {c.id for c in segment.candidates} <= tied[segment.valid_from]
