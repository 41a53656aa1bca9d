"""Plain words for what the ledger holds: source badges, predicate labels,
values, and the history of a memory told as sentences (issue 4).

Pure functions over the shapes that ``facts/queries.py`` returns (API.md
"history" versions and sources) and over event-log rows; no database access.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from facts.resolve import RULE_SYSTEM_OF_RECORD

BADGE_CLASSES = {
    "user_statement": "said",
    "correction": "corrected",
    "system_record": "system",
    "user_document": "document",
    "agent_inference": "inferred",
}

PREDICATE_LABELS = {
    "note": "Things you mentioned",
    "city_of_residence": "Where you live",
    "employer": "Where you work",
    "job_title": "Your job title",
    "speaks_language": "Languages you speak",
    "pet": "Pets",
    "legal_name": "Your legal name",
    "email": "Your e-mail address",
    "billing_address": "Your billing address",
    "payment_method": "Your payment method",
    "plan": "Your plan",
}

SOURCE_KIND_FILTERS = [
    ("user_statement", "You said"),
    ("correction", "You corrected"),
    ("system_record", "From a connected system"),
    ("user_document", "From a document"),
    ("agent_inference", "Inferred by the assistant"),
]

STATUS_LABELS = {
    "current": "true now",
    "scheduled": "starts later",
    "ended": "no longer true",
    "superseded": "replaced",
    "overruled": "kept, not used",
    "proposed": "waiting for you",
    "retracted": "never true",
    "conflict": "undecided",
    "erased": "forgotten",
}


def system_name(source: dict) -> str:
    """The system a ``system_record`` came from: the source id's prefix
    before ``:`` (``crm:42`` -> ``crm``), else the extractor's name before
    ``@``, else "a connected system"."""
    source_id = source.get("id") or ""
    if ":" in source_id:
        return source_id.split(":", 1)[0]
    extractor = (source.get("extractor") or "").split("@", 1)[0]
    return extractor or "a connected system"


def decided_by(source: dict) -> str | None:
    """Who a ``correction`` answered for: ``"you"`` for the person's answer
    to a question (source id ``prompt:<id>``), ``"support"`` for a staff
    decision (a review, or a question answered in the console), ``None``
    for any other source (a correction the person made themselves)."""
    if source.get("kind") != "correction":
        return None
    if (source.get("extractor") or "").startswith("staff-review") or (source.get("id") or "").startswith("review:"):
        return "support"
    if (source.get("id") or "").startswith("prompt:"):
        return "you"
    return None


def badge(source: dict) -> dict:
    """``{"css": ..., "text": ...}`` for a source (API.md source object):
    you said / from <system> / from a document / inferred by the assistant /
    you corrected / you confirmed (an answer to a question) / support
    confirmed (a staff decision)."""
    kind = source.get("kind") or ""
    who = decided_by(source)
    if who:
        return {"css": BADGE_CLASSES[kind], "text": f"{who} confirmed"}
    text = {
        "user_statement": "you said",
        "correction": "you corrected",
        "system_record": f"from {system_name(source)}",
        "user_document": "from a document",
        "agent_inference": "inferred by the assistant",
    }.get(kind, kind.replace("_", " "))
    return {"css": BADGE_CLASSES.get(kind, "other"), "text": text}


def because(source: dict, rule: str = "valid-time-supersession") -> str:
    """Why a version took over, in the words of its source and of the rule
    the event log recorded (``facts.resolve`` ``RULE_*``; DESIGN.md write
    rule steps 4 to 6)."""
    kind = source.get("kind")
    if kind == "correction":
        who = decided_by(source)
        return f"because {who} confirmed it" if who else "because you corrected it"
    if rule == "system-of-record-authority":
        return f"because {system_name(source)} keeps the official record of this"
    if rule in TIE_RULES:
        return TIE_RULES[rule][0]
    if rule != "valid-time-supersession":
        return "because it comes from a source I trust more"
    if kind == "user_statement":
        return "because you said so later"
    if kind == "system_record":
        return f"because {system_name(source)} reported it later"
    if kind == "user_document":
        return "because a later document said so"
    return "because the assistant learned it later"


# Equal rank and equal start (write rule step 6): why the winner took over,
# why the other was kept but not used, and the loser's short label.
TIE_RULES = {
    "tie-stated-at": ("because it was said later, by a source I trust as much",
                      "because a source I trust as much said otherwise later", "said earlier, not used"),
    "tie-content-hash": ("because it was picked by a fixed rule between sources I trust as much",
                         "because a source I trust as much said otherwise and I picked one by a fixed rule",
                         "not picked, not used"),
    "tie-confirmed-by-correction": ("because you chose it", "because you chose another answer", "not chosen, not used"),
}


def not_used_because(rule: str) -> str:
    """Why a version was kept but not used, by the rule the event log
    recorded for it: a higher-ranked source (step 4), the system of record
    (step 4), or a tie between equals (step 6)."""
    if rule in TIE_RULES:
        return TIE_RULES[rule][1]
    if rule == "system-of-record-authority":
        return "because the system that keeps the official record of this said otherwise"
    if rule in ("source-rank", "valid-time-supersession", ""):
        return "because a more reliable source said otherwise"
    return "because another answer was used instead"


def overruled_label(rule: str) -> str:
    """The short label of a version kept but not used, by its rule."""
    return TIE_RULES[rule][2] if rule in TIE_RULES else STATUS_LABELS["overruled"]


# Events whose rule says why an assertion stands where it does.
_RULED_EVENTS = ("fact.asserted", "fact.status_changed", "fact.superseded")


def status_words(version: dict) -> str:
    """A version's status (API.md "history") in words: for one kept but not
    used, by the rule its latest event recorded (a tie is not a lower rank)."""
    if version["status"] != "overruled":
        return STATUS_LABELS.get(version["status"], version["status"])
    rules = [e["rule"] for e in version.get("events", []) if e["type"] in _RULED_EVENTS and e["rule"]]
    return overruled_label(rules[-1] if rules else "")


def decision_text(source: dict, value: Any) -> str | None:
    """What was decided, for a correction that answered a question or a
    review (:func:`decided_by`), instead of the stored evidence (which
    repeats the question): "You chose “2 High St” when I asked: …"."""
    who = decided_by(source)
    if who is None:
        return None
    evidence = source.get("evidence") or ""
    question = evidence.removeprefix("Answer to: ") if evidence.startswith("Answer to: ") else ""
    asked = f" when I asked: {question}" if who == "you" else f" when you were asked: {question}"
    return f"{_capital(who)} chose “{value_text(value)}”" + (asked if question else ".")


NEUTRAL_LABELS = {"note": "Notes", "city_of_residence": "Lives in", "speaks_language": "Languages"}


def heard(source: dict, value: str) -> str:
    """"You said “Berlin”", "billing reported “Family”", … ."""
    kind = source.get("kind")
    if kind == "user_statement":
        return f"You said {value}"
    if kind == "correction":
        who = decided_by(source)
        return f"{_capital(who)} confirmed {value}" if who else f"You corrected it to {value}"
    if kind == "system_record":
        return f"{system_name(source).capitalize()} reported {value}"
    if kind == "user_document":
        return f"A document said {value}"
    return f"The assistant inferred {value}"


def predicate_label(predicate: str, entity: str = "self") -> str:
    """A heading for a predicate: about the person a known second-person
    label ("Where you work"), about anyone else the name made readable
    ("Employer")."""
    if entity == "self" and predicate in PREDICATE_LABELS:
        return PREDICATE_LABELS[predicate]
    return NEUTRAL_LABELS.get(predicate) or predicate.replace("_", " ").strip().capitalize()


def short(text: str, limit: int = 60) -> str:
    """``text`` cut at a word boundary to at most ``limit`` characters."""
    if len(text) <= limit:
        return text
    return text[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:.") + "…"


def entity_label(entity: str) -> str:
    return "About you" if entity == "self" else f"About {entity}"


def value_text(value: Any) -> str:
    """A value as a person reads it: strings as they are, objects as
    ``key: value`` pairs, booleans as yes/no."""
    if value is None:
        return "(forgotten)"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return ", ".join(f"{str(k).replace('_', ' ')}: {value_text(v)}" for k, v in value.items())
    return str(value)


def parse_iso(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def day(moment: datetime | None) -> str:
    """``8 May 2023`` (UTC)."""
    return f"{moment.day} {moment:%b %Y}" if moment else ""


def actor_words(actor: str) -> str:
    if actor.startswith("user:"):
        return "you"
    if actor.startswith("staff:"):
        return "support"
    return "the assistant's service"


@dataclass(frozen=True)
class Sentence:
    at: datetime
    text: str
    same_day: bool = False  # another sentence falls on the same day: show the time too


# What a new assertion's outcome (API.md) meant when it arrived.
ARRIVAL_OUTCOMES = {
    "corroborated": " It agrees with what I already knew.",
    "proposed": " It needed your confirmation before I would use it.",
    "conflict": " It disagreed with an answer from a source I trust as much.",
}


def history_sentences(versions: list[dict], events: list[dict]) -> list[Sentence]:
    """A memory's event log in words, one sentence per event a person would
    notice, in the order memoryui recorded them (transaction time): what was
    learned when and from whom, what replaced what and why, what was kept
    but not used, marked never true, forgotten, or asked about.

    ``events`` are the key's event-log rows in that order (``type``, ``at``
    as an aware UTC datetime, ``rule``, ``actor``, ``assertion_id``,
    ``before``, ``after``, ``data``; ids as text), as
    :func:`dashboard.queries.memory_events` reads them; ``versions`` (API.md
    "history") give the values and sources the ids stand for. Each sentence
    names what its event named and says what was so at that moment, so
    later events never rewrite it. Erased values are never named."""
    sources = {s["assertion_id"]: (v, s) for v in versions for s in v["sources"]}
    rules = {(e["at"], e["before"][0], e["after"][0]): e["rule"] for e in events
             if e["type"] == "fact.superseded" and e["before"] and e["after"]}
    told: set[tuple] = set()  # (replaced, by): a pair the log records again is told once
    out = []
    for event in events:
        aid, kind = event["assertion_id"], event["type"]
        if kind == "fact.asserted":
            # What this arrival replaced, as the ledger answered it (API.md "supersedes").
            pairs = [(old, aid) for old in event["before"]]
        elif kind == "fact.superseded" and event["before"] and event["after"]:
            pairs = [(event["before"][0], event["after"][0])]
        else:
            pairs = []
        if kind != "fact.superseded":
            text = _event_sentence(event, sources)
            if text:
                out.append(Sentence(event["at"], text))
        for old, new in pairs:
            if (old, new) not in told:
                told.add((old, new))
                rule = rules.get((event["at"], old, new), event["rule"])
                out.append(Sentence(event["at"], _replaced(old, new, rule, sources)))
    days = Counter(s.at.date() for s in out)
    return [replace(s, same_day=days[s.at.date()] > 1) for s in out]


def _name(assertion_id, sources: dict) -> str:
    """“Berlin”, or words for a value that is not to be named."""
    version, src = sources.get(assertion_id, (None, None))
    if version is None:
        return "another answer"
    if src.get("erased_at") or version["status"] == "erased":
        return "something since forgotten"
    return f"“{value_text(version['value'])}”"


def _replaced(old_id, new_id, rule: str, sources: dict) -> str:
    """"“Bonn” replaced “Berlin” on 1 Mar 2026, because you corrected it":
    from the later of the two starts, in the words of the replacing source."""
    old, new = sources.get(old_id, (None, {}))[1], sources.get(new_id, (None, {}))[1]
    starts = [parse_iso(x["valid_from"]) for x in (old, new) if x]
    when = f" on {day(max(starts))}" if starts else ""
    return _capital(f"{_name(new_id, sources)} replaced {_name(old_id, sources)}{when}, {because(new, rule)}.")


def _event_sentence(event: dict, sources: dict) -> str | None:
    """One event (not a supersession: see :func:`_replaced`) in words, or
    None for one a person would not notice."""
    aid, kind, data = event["assertion_id"], event["type"], event.get("data") or {}
    src = sources.get(aid, (None, {}))[1]
    what = _name(aid, sources)
    if kind == "fact.asserted":
        if not src or src.get("erased_at"):
            return "I learned something that has since been forgotten."
        span = f"true from {day(parse_iso(src['valid_from']))}"
        if src.get("valid_to"):
            span += f" until {day(parse_iso(src['valid_to']))}"
        if data.get("outcome") == "overruled":
            return f"{heard(src, what)}, {span}. It was kept but not used, {not_used_because(event['rule'])}."
        return f"{heard(src, what)}, {span}." + ARRIVAL_OUTCOMES.get(data.get("outcome"), "")
    if kind == "fact.status_changed":
        to, was = data.get("to"), data.get("from")
        if to == "overruled":
            return f"From then on {what} was kept but not used, {not_used_because(event['rule'])}."
        if to == "proposed":
            return f"From then on {what} needed your confirmation before I would use it."
        if to == "conflict":
            return f"From then on {what} disagreed with an answer from a source I trust as much."
        if to == "winning" and was == "proposed":
            return _capital(f"{what} was confirmed, and I used it from then on.")
        if to == "winning":
            return f"From then on I used {what}."
        return None
    who = actor_words(event["actor"]).capitalize()
    if kind == "fact.retracted":
        return f"{who} marked {what} as never true. I no longer use it for any date."
    if kind == "fact.erased":
        return f"A memory was forgotten on {day(event['at'])}. Nothing of it is kept."
    if kind == "fact.restored":
        return f"{who} undid the removal of {what}: it counts again."
    if kind in ("conflict.opened", "conflict.auto_resolved"):
        both = " and ".join(_name(i, sources) for i in event["after"])
        if kind == "conflict.opened":
            return _capital(f"{both} disagreed, from sources I trust as much; I asked you which is right.")
        how = "I went with the one said last" if event["rule"] == "tie-stated-at" else "I picked one by a fixed rule"
        return _capital(f"{both} disagreed, from sources I trust as much; {how}.")
    if kind == "conflict.resolved":
        return "The disagreement was settled."
    return None


def _capital(text: str) -> str:
    return text[0].upper() + text[1:]


def overruled_correction(rule: str) -> str:
    """Why a correction the person made was kept but not used, by the rule
    that overruled it (DESIGN.md write rule step 4): a system of record
    owning the predicate (staff get a follow-up), or a source the tenant's
    ranking puts above corrections."""
    if rule == RULE_SYSTEM_OF_RECORD:
        return ("But the system of record that owns this still says otherwise there, so your correction is not "
                "used until staff have checked it with you.")
    return "But a source that counts for more says otherwise there, so your correction is not used."
