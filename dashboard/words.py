"""Plain words for what the ledger holds: source badges, predicate labels,
values, and the history of a memory told as sentences (issue 4).

Pure functions over the shapes that ``facts/queries.py`` returns (API.md
"history" versions and sources); no database access.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

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


def badge(source: dict) -> dict:
    """``{"css": ..., "text": ...}`` for a source (API.md source object):
    you said / from <system> / from a document / inferred by the assistant /
    you corrected."""
    kind = source.get("kind") or ""
    text = {
        "user_statement": "you said",
        "correction": "you corrected",
        "system_record": f"from {system_name(source)}",
        "user_document": "from a document",
        "agent_inference": "inferred by the assistant",
    }.get(kind, kind.replace("_", " "))
    return {"css": BADGE_CLASSES.get(kind, "other"), "text": text}


def because(source: dict) -> str:
    """Why a later version took over, in the words of its source."""
    kind = source.get("kind")
    if kind == "user_statement":
        return "because you said so later"
    if kind == "correction":
        return "because you corrected it"
    if kind == "system_record":
        return f"because {system_name(source)} reported it later"
    if kind == "user_document":
        return "because a later document said so"
    return "because the assistant learned it later"


NEUTRAL_LABELS = {"note": "Notes", "city_of_residence": "Lives in", "speaks_language": "Languages"}


def heard(source: dict, value: str) -> str:
    """"You said “Berlin”", "billing reported “Family”", … ."""
    kind = source.get("kind")
    if kind == "user_statement":
        return f"You said {value}"
    if kind == "correction":
        return f"You corrected it to {value}"
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


def history_sentences(versions: list[dict]) -> list[Sentence]:
    """The events of a memory's versions in words, oldest first: what was
    learned when and from whom, what replaced what and why, what was marked
    never true, forgotten, or waits for an answer."""
    by_id = {v["assertion_id"]: v for v in versions}
    out: list[Sentence] = []
    for v in versions:
        value = f"“{value_text(v['value'])}”"
        for src in v["sources"]:
            learned = parse_iso(src["recorded_at"])
            if src.get("erased_at"):
                out.append(Sentence(parse_iso(src["erased_at"]),
                                    f"A memory was forgotten on {day(parse_iso(src['erased_at']))}. Nothing of it is kept."))
                continue
            span = f"true from {day(parse_iso(src['valid_from']))}"
            if src.get("valid_to"):
                span += f" until {day(parse_iso(src['valid_to']))}"
            out.append(Sentence(learned, f"{heard(src, value)}, {span}."))
            if src.get("retracted_at"):
                who = next((actor_words(e["actor"]) for e in src.get("events", []) if e["type"] == "fact.retracted"),
                           "you")
                out.append(Sentence(parse_iso(src["retracted_at"]),
                                    f"{who.capitalize()} marked {value} as never true. I no longer use it for any date."))
        if v["status"] == "erased":
            continue
        first = v["sources"][0] if v["sources"] else {}
        for old_id in v.get("supersedes", []):
            old = by_id.get(old_id)
            if old is not None:
                out.append(Sentence(parse_iso(v["recorded_at"]),
                                    f"{value} replaced “{value_text(old['value'])}” on "
                                    f"{day(parse_iso(v['valid_from']))}, {because(first)}."))
        if v["status"] == "proposed":
            out.append(Sentence(parse_iso(v["recorded_at"]),
                                f"{value} is waiting for your confirmation; until then I keep using the earlier answer."))
        elif v["status"] == "overruled":
            out.append(Sentence(parse_iso(v["recorded_at"]),
                                f"{value} is kept but not used, because a more reliable source says otherwise."))
        elif v["status"] == "conflict":
            out.append(Sentence(parse_iso(v["recorded_at"]),
                                f"{value} disagrees with another answer from a source I trust as much; I asked you which is right."))
    return sorted(out, key=lambda s: s.at)
