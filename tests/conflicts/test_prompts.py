"""The words of prompts (conflicts/prompts.py): specific questions that show
their evidence, options, confirmations. Pure functions, no database."""
from datetime import datetime, timezone

import pytest

from conflicts import prompts

TODAY = datetime(2026, 11, 30, tzinfo=timezone.utc)


def evidence(value, stated_at, *, kind="user_statement", n=1) -> prompts.Evidence:
    return prompts.Evidence(assertion_id=f"a-{n}", value=value, stated_at=stated_at,
                            valid_from=datetime(2026, 3, 1, tzinfo=timezone.utc), source_kind=kind,
                            source_id=f"msg-{n}", evidence=f"I live at {value}")


def test_conflict_question_names_values_dates_and_channels():
    question = prompts.conflict_question(
        entity="self", predicate="billing_address",
        candidates=[evidence("Alte Str. 1, Berlin", datetime(2026, 3, 3, 9, tzinfo=timezone.utc)),
                    evidence("Neue Str. 2, Munich", datetime(2026, 11, 22, 18, tzinfo=timezone.utc), n=2)],
        valid_from=datetime(2026, 3, 1, tzinfo=timezone.utc), valid_to=None, today=TODAY)

    assert question == ("You mentioned Alte Str. 1, Berlin on 3 March (chat) and Neue Str. 2, Munich on 22 November "
                        "(chat) as your billing address. Which is current?")


def test_conflict_question_shows_other_years_other_sources_and_bounded_disputes():
    question = prompts.conflict_question(
        entity="Marc", predicate="employer",
        candidates=[evidence("Acme", datetime(2025, 1, 5, tzinfo=timezone.utc), kind="system_record"),
                    evidence("Initech", datetime(2026, 2, 1, tzinfo=timezone.utc), kind="user_document", n=2)],
        valid_from=datetime(2025, 1, 1, tzinfo=timezone.utc), valid_to=datetime(2026, 6, 1, tzinfo=timezone.utc),
        today=TODAY)

    assert question == ("We were told Acme on 5 January 2025 (system record) and Initech on 1 February (document) "
                        "as Marc's employer. Which was true from 1 January 2025 to 1 June?")


def test_proposal_question_asks_to_confirm_the_change():
    question = prompts.proposal_question(entity="self", predicate="payment_method",
                                         old={"last4": "1111"}, new={"last4": "2222", "brand": None})

    assert question == "Update your payment method from card ending 1111 to card ending 2222?"


@pytest.mark.parametrize("value, words", [
    ({"street": "Alte Str. 1", "postal_code": "10115", "city": "Berlin", "country": "DE"}, "Alte Str. 1, 10115 Berlin, DE"),
    ({"last4": "4242", "brand": "Visa"}, "Visa card ending 4242"),
    (True, "yes"),
    ("  spaced   out  ", "spaced out"),
    ("x" * 200, "x" * 119 + "…"),
])
def test_values_are_described_in_plain_words(value, words):
    assert prompts.describe_value(value) == words


def test_conflict_options_offer_each_candidate_neither_and_both_with_evidence():
    candidates = [evidence("a@example.com", TODAY), evidence("b@example.com", TODAY, n=2)]

    options = prompts.conflict_options(predicate="email", candidates=candidates)

    assert [(o["kind"], o["assertion_id"], o["label"]) for o in options] == [
        ("candidate", "a-1", "a@example.com"), ("candidate", "a-2", "b@example.com"),
        ("neither", None, "Neither, it is …"), ("both", None, "Both are true")]
    assert options[0]["evidence"] == "I live at a@example.com"
    assert options[0]["source"] == {"kind": "user_statement", "id": "msg-1", "extractor": "", "label": "chat"}


def test_both_is_not_offered_for_a_predicate_that_is_never_multi_valued():
    options = prompts.conflict_options(predicate="legal_name", candidates=[evidence("Ann", TODAY), evidence("Anna", TODAY, n=2)])

    assert [o["kind"] for o in options] == ["candidate", "candidate", "neither"]


def test_proposal_options_confirm_keep_or_neither():
    options = prompts.proposal_options(new=evidence("card ending 2222", TODAY, n=2), old=evidence("card ending 1111", TODAY))

    assert [(o["kind"], o["label"]) for o in options] == [
        ("confirm", "Yes, update to card ending 2222"), ("keep", "No, keep card ending 1111"),
        ("neither", "Neither, it is …")]


@pytest.mark.parametrize("action, before, chosen, words", [
    ("chose", ["Berlin"], "Munich", "I had Berlin since March; you chose Munich; updated."),
    ("chose", ["Berlin", "Munich"], "Munich", "I had both Berlin and Munich since March; you chose Munich; updated."),
    ("kept", ["card ending 1111"], "card ending 2222",
     "I had card ending 1111 since March; you kept it; the change to card ending 2222 is dropped."),
    ("said", ["Berlin", "Munich"], "Hamburg", "I had both Berlin and Munich since March; you said it is Hamburg; updated."),
    ("both", ["a@x.de", "b@x.de"], None,
     "I had both a@x.de and b@x.de since March; you said both are true; staff will check whether your email can "
     "have several values. Until then neither is used."),
])
def test_confirmations_say_what_was_held_what_was_chosen_and_what_happened(action, before, chosen, words):
    text = prompts.confirmation(action=action, before=before, chosen=chosen,
                                since=datetime(2026, 3, 1, tzinfo=timezone.utc), until=None, today=TODAY,
                                predicate="email")

    assert text == words


@pytest.mark.parametrize("rule, words", [
    ("system-of-record-authority", "I had Berlin since March; you said it is Hamburg; noted, but the system of record "
     "that owns this still says otherwise there, so your answer is not used until staff have checked it with you."),
    ("source-rank", "I had Berlin since March; you said it is Hamburg; noted, but a source that counts for more says "
     "otherwise there, so your answer is not used."),
])
def test_an_answer_that_lost_says_by_what_rule_not_updated(rule, words):
    text = prompts.confirmation(action="said", before=["Berlin"], chosen="Hamburg", overruled_by=rule,
                                since=datetime(2026, 3, 1, tzinfo=timezone.utc), until=None, today=TODAY)

    assert text == words
