"""The words of clarification prompts: questions, options, confirmations.

Pure functions (no database), so that the wording is tested on its own.
Questions are specific and show their evidence (the conflicts issue):

    You mentioned Alte Str. 1, Berlin on 3 March (chat) and Neue Str. 2,
    Munich on 22 November (chat) as your billing address. Which is current?

    Update your payment method from card ending 1111 to card ending 2222?

Dates are shown in UTC as "3 March", with the year when it is not the year
of ``today``.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from facts.resolve import RULE_SYSTEM_OF_RECORD

# How a source kind is named to the person (DESIGN.md, vocabulary).
CHANNELS = {
    "user_statement": "chat",
    "user_document": "document",
    "system_record": "system record",
    "agent_inference": "inferred by the assistant",
    "correction": "your correction",
}
_PERSONAL_KINDS = {"user_statement", "user_document", "correction"}

# Predicates that can never hold two values at once: "both are true" is not
# offered for them. Every other single-valued predicate might really be
# multi-valued (two e-mail addresses, two cards), so the option is offered and
# choosing it opens a staff task to reclassify.
NEVER_MULTI_VALUED = frozenset({
    "legal_name", "date_of_birth", "birth_date", "birthday", "place_of_birth", "plan", "age", "gender",
    "nationality_at_birth", "marital_status",
})

MAX_VALUE_CHARS = 120
_ADDRESS_ORDER = ("line1", "street", "address", "line2", "postal_code", "postcode", "zip", "city", "region", "state",
                  "country")


@dataclass(frozen=True)
class Evidence:
    """One assertion as a prompt quotes it. ``stated_at`` is UTC."""

    assertion_id: str
    value: Any
    stated_at: datetime
    valid_from: datetime
    source_kind: str
    source_id: str
    extractor: str = ""
    evidence: str = ""


def describe_value(value: Any) -> str:
    """A value in plain words: strings as they are, a card as "card ending
    1111" (``{"last4": "1111", "brand": "Visa"}`` -> "Visa card ending
    1111"), an address object as its parts joined with commas, booleans as
    yes/no. Truncated to 120 characters."""
    if isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, dict):
        text = _describe_object(value)
    elif value is None:
        text = "nothing"
    else:
        text = str(value)
    text = " ".join(text.split())
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def _describe_object(value: dict) -> str:
    last4 = value.get("last4") or value.get("last_four")
    if last4:
        brand = value.get("brand")
        return f"{brand} card ending {last4}" if brand else f"card ending {last4}"
    keys = [k for k in _ADDRESS_ORDER if value.get(k)] or sorted(value)
    parts: list[str] = []
    for k in keys:
        part = describe_value(value[k]) if isinstance(value[k], dict) else str(value[k])
        if k in ("city",) and parts and keys[keys.index(k) - 1] in ("postal_code", "postcode", "zip"):
            parts[-1] = f"{parts[-1]} {part}"
        else:
            parts.append(part)
    return ", ".join(parts)


def channel(source_kind: str) -> str:
    """Where a claim came from, in the person's words ("chat", "document")."""
    return CHANNELS.get(source_kind, source_kind.replace("_", " "))


def day(moment: datetime, *, today: datetime) -> str:
    """"3 March", or "3 March 2025" when the year differs from ``today``'s."""
    text = f"{moment.day} {moment:%B}"
    return text if moment.year == today.year else f"{text} {moment.year}"


def month(moment: datetime, *, today: datetime) -> str:
    """"March", or "March 2025" when the year differs from ``today``'s."""
    return f"{moment:%B}" if moment.year == today.year else f"{moment:%B} {moment.year}"


def subject_of(*, entity: str, predicate: str) -> str:
    """"your billing address", or "Marc's employer" for another entity."""
    name = predicate.replace("_", " ")
    if entity == "self":
        return f"your {name}"
    return f"{entity}'s {name}" if not entity.endswith("s") else f"{entity}' {name}"


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def conflict_question(*, entity: str, predicate: str, candidates: list[Evidence], valid_from: datetime,
                      valid_to: datetime | None, today: datetime) -> str:
    """The question for an OPEN conflict (DESIGN.md write rule step 6), e.g.
    "You mentioned A on 3 March (chat) and B on 22 November (chat) as your
    billing address. Which is current?". A bounded dispute asks "Which was
    true from 1 March to 1 June?". Candidates are quoted in the order given."""
    mentions = [f"{describe_value(c.value)} on {day(c.stated_at, today=today)} ({channel(c.source_kind)})"
                for c in candidates]
    verb = "You mentioned" if all(c.source_kind in _PERSONAL_KINDS for c in candidates) else "We were told"
    if valid_to is None:
        ask = "Which is current?"
    else:
        ask = f"Which was true from {day(valid_from, today=today)} to {day(valid_to, today=today)}?"
    return f"{verb} {_join(mentions)} as {subject_of(entity=entity, predicate=predicate)}. {ask}"


def proposal_question(*, entity: str, predicate: str, old: Any, new: Any) -> str:
    """The confirmation asked for a high-stakes change (DESIGN.md write rule
    step 7): "Update your payment method from card ending 1111 to card
    ending 2222?"."""
    return (f"Update {subject_of(entity=entity, predicate=predicate)} from {describe_value(old)} "
            f"to {describe_value(new)}?")


def option(c: Evidence, *, kind: str, label: str) -> dict:
    """One answerable option quoting its evidence."""
    return {
        "kind": kind, "assertion_id": c.assertion_id, "value": c.value, "label": label, "evidence": c.evidence,
        "source": {"kind": c.source_kind, "id": c.source_id, "extractor": c.extractor, "label": channel(c.source_kind)},
        "stated_at": c.stated_at.isoformat().replace("+00:00", "Z"),
    }


def neither_option() -> dict:
    return {"kind": "neither", "assertion_id": None, "value": None, "label": "Neither, it is …", "evidence": "",
            "source": None, "stated_at": None}


def both_option() -> dict:
    return {"kind": "both", "assertion_id": None, "value": None, "label": "Both are true", "evidence": "",
            "source": None, "stated_at": None}


def offers_both(predicate: str) -> bool:
    """Whether "both are true" is offered: every single-valued predicate that
    may really be multi-valued (not in :data:`NEVER_MULTI_VALUED`)."""
    return predicate not in NEVER_MULTI_VALUED


def conflict_options(*, predicate: str, candidates: list[Evidence]) -> list[dict]:
    """Each candidate, "neither, it is …", and "both are true" when
    :func:`offers_both`."""
    opts = [option(c, kind="candidate", label=describe_value(c.value)) for c in candidates]
    opts.append(neither_option())
    if offers_both(predicate):
        opts.append(both_option())
    return opts


def proposal_options(*, new: Evidence, old: Evidence | None) -> list[dict]:
    """"Yes, update to …", "No, keep …" (when something is in force) and
    "neither, it is …"."""
    opts = [option(new, kind="confirm", label=f"Yes, update to {describe_value(new.value)}")]
    if old is not None:
        opts.append(option(old, kind="keep", label=f"No, keep {describe_value(old.value)}"))
    opts.append(neither_option())
    return opts


def _had(values: list[Any], *, since: datetime, until: datetime | None, today: datetime) -> str:
    described = [describe_value(v) for v in values]
    had = f"both {_join(described)}" if len(described) == 2 else _join(described)
    if until is None:
        return f"I had {had} since {month(since, today=today)}"
    return f"I had {had} from {month(since, today=today)} to {month(until, today=today)}"


def _overruled(rule: str) -> str:
    """Why an answer was recorded but not used, by the rule that overruled
    it: a system of record owning the predicate (staff get a follow-up), or
    a source the tenant's ranking puts above a correction."""
    if rule == RULE_SYSTEM_OF_RECORD:
        return ("noted, but the system of record that owns this still says otherwise there, "
                "so your answer is not used until staff have checked it with you.")
    return "noted, but a source that counts for more says otherwise there, so your answer is not used."


def confirmation(*, action: str, before: list[Any], chosen: Any, since: datetime, until: datetime | None,
                 today: datetime, entity: str = "self", predicate: str = "", overruled_by: str | None = None) -> str:
    """What the person is told after answering, in plain words, e.g. "I had
    Berlin since March; you chose Munich; updated.".

    ``action`` is ``chose`` (a candidate or a confirmed change), ``kept``
    (a rejected change), ``said`` (neither: a new value) or ``both``.
    ``before`` are the values held until now (the tied candidates, or the
    value in force under a proposal). ``overruled_by``: the rule by which
    the answer, recorded, lost (DESIGN.md write rule step 4: a system of
    record owning the predicate, or the source ranking), so nothing was
    updated.
    """
    had = _had(before, since=since, until=until, today=today) if before else "I had nothing"
    done = _overruled(overruled_by) if overruled_by else "updated."
    if action == "chose":
        return f"{had}; you chose {describe_value(chosen)}; {done}"
    if action == "kept":
        return f"{had}; you kept it; the change to {describe_value(chosen)} is dropped."
    if action == "said":
        return f"{had}; you said it is {describe_value(chosen)}; {done}"
    if action == "both":
        return (f"{had}; you said both are true; staff will check whether "
                f"{subject_of(entity=entity, predicate=predicate)} can have several values. Until then neither is used.")
    raise ValueError(f"unknown action {action!r}")
