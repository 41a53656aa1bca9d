"""LoCoMo (``data/locomo/locomo10.json``): ten long conversations between
two people, with the facts a reader extracted about each speaker after
every session. The dashboard's demo users.

File shape (data README): a list of samples ``{"sample_id": "conv-26",
"conversation": {"speaker_a", "speaker_b", "session_N_date_time",
"session_N": [{"speaker", "dia_id", "text", "blip_caption"?}, ...]},
"observation": {"session_N_observation": {speaker: [[text, dia_id], ...]}},
...}``. ``dia_id`` is usually ``"D1:3"``; a few are lists
(``["D15:3", "D15:5"]``) or comma-separated (``"D22:21, D22:23"``).

Mapping (one assertion per observation, nothing dropped):

- subject: one per speaker per conversation (the same first name appears
  in several conversations), external id ``locomo-<sample id>-<speaker
  slug>`` (``locomo-conv-26-caroline``), ``subject_name`` the speaker's
  name; entity ``self``.
- predicate ``note`` (free text; cardinality ``many``), value the
  observation's text.
- source: kind ``user_statement``, id ``locomo:<sample id>:<dia ids joined
  by +>:<n>`` (``n`` counts observations citing the same turns in that
  conversation, from 0, in file order), extractor ``locomo-observation``,
  evidence the text of the cited turn(s) (joined by a blank line; a shared
  photo's caption is added in brackets). Some observations are attributed
  to the wrong speaker in the data set: kept as they are, for people to
  mark as never true in the dashboard.
- time zone: the session dates carry none (``"1:56 pm on 8 May, 2023"``);
  they are read as **UTC**. ``stated_at`` = ``valid_from`` = the session's
  date and time, so any delivery order resolves to the same view.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from facts.importers.common import DataError, ImportEvent, PredicateRule, assertion_event, iso, slug

DEFAULT_PATH = Path("..") / "shared" / "data" / "locomo" / "locomo10.json"
DATASET = "locomo"
EXTRACTOR = "locomo-observation"
SOURCE_KIND = "user_statement"
PREDICATE = "note"
DATE_FORMAT = "%I:%M %p on %d %B, %Y"
_SESSION = re.compile(r"^session_(\d+)$")
_OBSERVATION = re.compile(r"^session_(\d+)_observation$")


def session_time(text: str, *, where: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` read as UTC. Raises :class:`DataError`."""
    try:
        return datetime.strptime(" ".join(text.split()), DATE_FORMAT).replace(tzinfo=timezone.utc)
    except (TypeError, ValueError):
        raise DataError(f"{where}: unreadable session date {text!r}") from None


def dia_ids(raw: Any, *, where: str) -> list[str]:
    """The turn ids an observation cites: ``"D1:3"``, ``["D1:3", "D1:5"]`` or
    ``"D1:3, D1:5"`` -> ``["D1:3", ...]``. Raises :class:`DataError`."""
    parts = raw if isinstance(raw, list) else re.split(r"[,;]", raw) if isinstance(raw, str) else None
    ids = [str(p).strip() for p in (parts or []) if str(p).strip()]
    if not ids:
        raise DataError(f"{where}: observation without a turn id ({raw!r})")
    return ids


def subject_id(sample_id: str, speaker: str) -> str:
    return f"locomo-{slug(sample_id)}-{slug(speaker)}"


def _turn_text(turn: dict) -> str:
    text = " ".join(str(turn.get("text", "")).split())
    caption = turn.get("blip_caption")
    return f"{text} [shared a photo: {caption}]" if caption else text


def sample_events(sample: dict) -> Iterable[ImportEvent]:
    """The ``fact.asserted`` events of one conversation, in file order."""
    sample_id = sample.get("sample_id")
    conversation = sample.get("conversation")
    if not isinstance(sample_id, str) or not isinstance(conversation, dict):
        raise DataError(f"a sample without sample_id or conversation ({str(sample)[:80]!r})")
    turns: dict[str, dict] = {}
    for key, value in conversation.items():
        if _SESSION.match(key) and isinstance(value, list):
            turns.update({t["dia_id"]: t for t in value if isinstance(t, dict) and "dia_id" in t})
    seen: Counter = Counter()
    observations = sample.get("observation") or {}
    for key in sorted(observations, key=lambda k: int(_OBSERVATION.match(k).group(1)) if _OBSERVATION.match(k) else 0):
        match = _OBSERVATION.match(key)
        if not match:
            continue
        number = match.group(1)
        where = f"{sample_id} {key}"
        when = session_time(conversation.get(f"session_{number}_date_time"), where=where)
        for speaker, items in (observations[key] or {}).items():
            for i, item in enumerate(items or []):
                if not isinstance(item, list) or len(item) < 2 or not str(item[0]).strip():
                    raise DataError(f"{where} {speaker}[{i}]: expected [text, dia_id], got {item!r}")
                ids = dia_ids(item[1], where=f"{where} {speaker}[{i}]")
                cited = "+".join(ids)
                n = seen[cited]
                seen[cited] += 1
                evidence = "\n\n".join(_turn_text(turns[d]) for d in ids if d in turns)
                data = {
                    "subject": subject_id(sample_id, speaker), "subject_name": speaker, "entity": "self",
                    "predicate": PREDICATE, "value": " ".join(str(item[0]).split()),
                    "valid_from": iso(when), "stated_at": iso(when),
                    "source": {"kind": SOURCE_KIND, "id": f"locomo:{sample_id}:{cited}:{n}", "extractor": EXTRACTOR,
                               "evidence": evidence[:10_000]},
                }
                yield assertion_event(data=data, order_key=(iso(when), sample_id, int(number), speaker, i))


def load(path: Path) -> list[dict]:
    """The samples of ``locomo10.json``. Raises :class:`DataError` or
    ``OSError``."""
    with open(path, encoding="utf-8") as fh:
        try:
            samples = json.load(fh)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}: not JSON ({exc})") from None
    if not isinstance(samples, list):
        raise DataError(f"{path}: expected a list of conversations")
    return samples


def build_events(*, path: Path, conversations: set[str] | None = None) -> list[ImportEvent]:
    """Every observation of the file (or of the ``conversations`` sample ids
    given) as an event. Raises :class:`DataError` for a malformed entry or
    an unknown conversation id."""
    samples = load(path)
    known = {s.get("sample_id") for s in samples}
    if conversations and not conversations <= known:
        raise DataError(f"no such conversation: {', '.join(sorted(conversations - known))}")
    return [e for s in samples if not conversations or s.get("sample_id") in conversations for e in sample_events(s)]


def speakers(*, path: Path, conversations: set[str] | None = None) -> list[tuple[str, str]]:
    """``(subject external id, name)`` of every speaker, in file order."""
    out = []
    for s in load(path):
        if conversations and s.get("sample_id") not in conversations:
            continue
        conv = s["conversation"]
        out += [(subject_id(s["sample_id"], conv[k]), conv[k]) for k in ("speaker_a", "speaker_b")]
    return out


def predicate_rules() -> dict[str, PredicateRule]:
    """``note`` is free text and multi-valued: every observation stays."""
    return {PREDICATE: PredicateRule("many")}
