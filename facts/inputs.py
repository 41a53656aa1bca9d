"""Admission: validate and normalise inbound payloads (write rule step 1).

Every parser here raises :class:`InputError` naming the offending field
(dotted path, e.g. ``data.source.kind``); callers turn it into a 400
``{"detail", "field"}`` and write nothing. Times follow API.md: RFC 3339
with an explicit offset, stored as UTC; a time without an offset is refused,
never guessed.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from facts.resolve import SOURCE_KINDS, content_hash, normalise_value

MAX_VALUE_BYTES = 4096
# Envelope (2) + event list (2) + data (1) + a value nested MAX_VALUE_DEPTH deep.
MAX_VALUE_DEPTH = 8
MAX_BODY_DEPTH = 5 + MAX_VALUE_DEPTH
MAX_EVIDENCE_CHARS = 10_000
_NAME_RE = re.compile(r"[A-Za-z0-9_.:\-]{1,200}")  # whole string: fullmatch (``$`` would let a final newline in)
_PRECISIONS = ("year", "month", "day", "second")
# How far a sender's clock may run ahead of ours: a stated_at (or a read's
# known_at) later than now by more than this is refused. Standard
# Webhooks' timestamp tolerance.
CLOCK_SKEW = timedelta(minutes=5)


class InputError(ValueError):
    """Malformed input. ``field`` is the dotted path of the culprit (or
    ``None``), ``detail`` a sentence a developer can act on."""

    def __init__(self, detail: str, field: str | None = None, status: int = 400) -> None:
        super().__init__(detail)
        self.detail = detail
        self.field = field
        self.status = status

    def as_body(self) -> dict:
        return {"detail": self.detail, "field": self.field}


@dataclass(frozen=True)
class AssertionInput:
    """A validated ``fact.asserted`` payload; datetimes are UTC.

    ``payload_hash`` is the SHA-256 of the payload as sent (canonical JSON,
    before server defaults), the key of write rule step 1's duplicate check.
    """

    subject: str
    entity: str
    predicate: str
    value: Any
    value_key: str
    scope_kind: str
    scope_key: str
    valid_from: datetime
    valid_to: datetime | None
    valid_from_precision: str
    stated_at: datetime
    source_kind: str
    source_id: str
    extractor: str
    confidence: float | None
    evidence: str
    subject_name: str
    payload_hash: str

    @property
    def content_hash(self) -> str:
        return content_hash(source_id=self.source_id, value_key=self.value_key)


def parse_time(raw: Any, field: str) -> datetime:
    """Parse an RFC 3339 time with an explicit offset into UTC.

    Raises :class:`InputError` for anything else, including a time without
    an offset (API.md: "rejected with 400, never guessed").
    """
    if not isinstance(raw, str) or not raw:
        raise InputError("must be an RFC 3339 time string such as 2026-03-01T00:00:00Z", field)
    text = raw.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"is not an RFC 3339 time: {raw!r}", field) from None
    if "T" not in text.upper() and " " not in text:
        raise InputError("must include a time of day and an offset, e.g. 2026-03-01T00:00:00Z", field)
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise InputError("has no UTC offset; add Z or +HH:MM (times are never guessed)", field)
    try:
        return parsed.astimezone(timezone.utc)
    except OverflowError:
        raise InputError("falls outside the years 1 to 9999 once in UTC", field) from None


def parse_optional_time(raw: Any, field: str) -> datetime | None:
    return None if raw is None else parse_time(raw, field)


def _name(raw: Any, field: str, default: str | None = None) -> str:
    if raw is None and default is not None:
        return default
    if raw is None:
        raise InputError("is required: 1-200 characters of letters, digits, _ . : -", field)
    if not isinstance(raw, str) or not _NAME_RE.fullmatch(raw):
        raise InputError("must be 1-200 characters of letters, digits, _ . : -", field)
    return raw


def parse_name(raw: Any, field: str) -> str:
    """A subject, entity or predicate name: 1-200 letters, digits, ``_ .
    : -``. Raises :class:`InputError`."""
    return _name(raw, field)


def _text(raw: Any, field: str, *, required: bool, limit: int = 300) -> str:
    if raw is None and not required:
        return ""
    if not isinstance(raw, str) or (required and not raw.strip()):
        raise InputError("must be a non-empty string" if required else "must be a string", field)
    if len(raw) > limit:
        raise InputError(f"is longer than {limit} characters", field)
    return raw


def parse_scope(raw: Any, field: str) -> tuple[str, str]:
    """``global``, ``project:x`` or ``task:y`` -> ``(scope_kind, scope_key)``."""
    if raw is None or raw == "global":
        return "global", ""
    if isinstance(raw, str) and ":" in raw:
        kind, _, key = raw.partition(":")
        if kind in ("project", "task") and key and len(key) <= 200:
            return kind, key
    raise InputError("must be 'global', 'project:<key>' or 'task:<key>'", field)


def _value(raw: Any, field: str) -> Any:
    if raw is None:
        raise InputError("is required (a JSON scalar or small object)", field)
    if isinstance(raw, list):
        raise InputError("must be a scalar or an object, not a list (send one assertion per value)", field)
    if isinstance(raw, str) and not raw.strip():
        raise InputError("must not be empty", field)
    if isinstance(raw, float) and not math.isfinite(raw):
        raise InputError("must be a finite number", field)
    if _depth(raw) > MAX_VALUE_DEPTH:
        raise InputError(f"nests deeper than {MAX_VALUE_DEPTH} levels", field)
    # A string of n characters is at most 6n + 2 bytes of JSON (a \uXXXX
    # escape is the longest), so a short one needs no encoding to check.
    if not (isinstance(raw, str) and 6 * len(raw) + 2 <= MAX_VALUE_BYTES) and len(
            json.dumps(raw, ensure_ascii=False).encode()) > MAX_VALUE_BYTES:
        raise InputError(f"is larger than {MAX_VALUE_BYTES} bytes", field)
    return raw


def _depth(node: Any) -> int:
    if isinstance(node, dict):
        return 1 + max((_depth(v) for v in node.values()), default=0)
    if isinstance(node, list):
        return 1 + max((_depth(v) for v in node), default=0)
    return 0


def parse_assertion(data: Any, *, received_at: datetime, prefix: str = "data") -> AssertionInput:
    """Validate one ``fact.asserted`` ``data`` object (API.md, "Inbound events").

    Defaults: ``entity`` ``self``, ``scope`` ``global``, ``stated_at`` the
    time of receipt, ``valid_from`` ``stated_at``. A ``stated_at`` later
    than ``received_at`` by more than :data:`CLOCK_SKEW` is refused.
    Raises :class:`InputError`.
    """
    if not isinstance(data, dict):
        raise InputError("must be an object", prefix)
    f = lambda name: f"{prefix}.{name}"  # noqa: E731
    subject = _name(data.get("subject"), f("subject"))
    entity = _text(data.get("entity"), f("entity"), required=True, limit=200) if data.get("entity") is not None else "self"
    predicate = _name(data.get("predicate"), f("predicate"))
    value = _value(data.get("value"), f("value"))
    scope_kind, scope_key = parse_scope(data.get("scope"), f("scope"))
    source = data.get("source")
    if not isinstance(source, dict):
        raise InputError("is required: an object with kind and id", f("source"))
    kind = source.get("kind")
    if kind not in SOURCE_KINDS:
        raise InputError(f"must be one of {', '.join(SOURCE_KINDS)}", f("source.kind"))
    source_id = _text(source.get("id"), f("source.id"), required=True)
    extractor = _text(source.get("extractor"), f("source.extractor"), required=False, limit=200)
    evidence = _text(source.get("evidence"), f("source.evidence"), required=False, limit=MAX_EVIDENCE_CHARS)
    confidence = source.get("confidence")
    if confidence is not None and (isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 <= confidence <= 1):
        raise InputError("must be a number between 0 and 1", f("source.confidence"))
    stated_at = parse_optional_time(data.get("stated_at"), f("stated_at")) or received_at
    if stated_at > received_at + CLOCK_SKEW:
        # A statement's time decides ties (DESIGN.md, "tie-stated-at"): one
        # from the future would win every tie on its key until then.
        raise InputError("is later than the time of receipt: something cannot have been said in the future "
                         "(valid_from may be in the future)", f("stated_at"))
    valid_from = parse_optional_time(data.get("valid_from"), f("valid_from")) or stated_at
    valid_to = parse_optional_time(data.get("valid_to"), f("valid_to"))
    if valid_to is not None and valid_to <= valid_from:
        raise InputError("must be after valid_from (valid time is half-open [valid_from, valid_to))", f("valid_to"))
    precision = data.get("valid_from_precision", "second")
    if precision not in _PRECISIONS:
        raise InputError(f"must be one of {', '.join(_PRECISIONS)}", f("valid_from_precision"))
    subject_name = _text(data.get("subject_name"), f("subject_name"), required=False, limit=200)
    canonical = json.dumps(
        {k: v for k, v in data.items() if k != "subject_name"}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return AssertionInput(
        subject=subject, entity=entity, predicate=predicate, value=value, value_key=normalise_value(value),
        scope_kind=scope_kind, scope_key=scope_key, valid_from=valid_from, valid_to=valid_to,
        valid_from_precision=precision, stated_at=stated_at, source_kind=kind, source_id=source_id,
        extractor=extractor, confidence=float(confidence) if confidence is not None else None,
        evidence=evidence, subject_name=subject_name,
        payload_hash=hashlib.sha256(canonical.encode()).hexdigest(),
    )


@dataclass(frozen=True)
class RetractionInput:
    """A validated ``fact.retracted`` payload: one assertion, or every
    assertion of a subject from one source id."""

    assertion_id: str | None
    subject: str | None
    source_id: str | None
    reason: str


def parse_retraction(data: Any, prefix: str = "data") -> RetractionInput:
    """Validate ``{"assertion_id"}`` or ``{"subject", "source_id"}`` plus
    ``reason``. Raises :class:`InputError`."""
    if not isinstance(data, dict):
        raise InputError("must be an object", prefix)
    reason = _text(data.get("reason"), f"{prefix}.reason", required=False, limit=2000)
    if data.get("assertion_id") is not None:
        return RetractionInput(parse_uuid(data["assertion_id"], f"{prefix}.assertion_id"), None, None, reason)
    if data.get("subject") is None and data.get("source_id") is None:
        raise InputError("is required (or subject and source_id)", f"{prefix}.assertion_id")
    subject = _name(data.get("subject"), f"{prefix}.subject")
    source_id = _text(data.get("source_id"), f"{prefix}.source_id", required=True)
    return RetractionInput(None, subject, source_id, reason)


def parse_uuid(raw: Any, field: str) -> str:
    import uuid

    try:
        return str(uuid.UUID(str(raw)))
    except (ValueError, TypeError, AttributeError):
        raise InputError("is not a valid id", field) from None


def parse_json_body(body: bytes) -> Any:
    """Decode a request body as JSON (RFC 8259) that PostgreSQL can store.

    Raises :class:`InputError` (field ``body``) when it is not valid UTF-8
    JSON, holds ``NaN``/``Infinity`` or a number too large for a double,
    nests deeper than :data:`MAX_BODY_DEPTH`, or holds a string PostgreSQL
    refuses: a NUL character (``\\u0000``) or an unpaired surrogate."""
    try:
        text = body.decode("utf-8")
        parsed = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        detail = "nests too deeply" if isinstance(exc, RecursionError) else f"is not valid JSON: {exc}"
        raise InputError(detail, "body") from None
    # A NUL or a surrogate can only come from a \u escape (strict JSON
    # refuses raw control characters; valid UTF-8 holds no surrogates), so
    # a body without such escapes and not too deep needs no walk over every
    # string; anything else gets the walk that names where it is.
    if _SUSPECT_ESCAPE.search(text) or _deeper_than(parsed, MAX_BODY_DEPTH):
        _check_storable(parsed, depth=0)
    return parsed


_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


def _deeper_than(root: Any, limit: int) -> bool:
    """Whether a node of ``root`` sits deeper than ``limit`` (the root at 0,
    a container's keys and items one deeper), as :func:`_check_storable`
    counts; visits containers only."""
    stack = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        if children and depth + 1 > limit:
            return True
        for child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
    return False


def _refuse_constant(name: str) -> Any:
    raise InputError(f"is not valid JSON: {name} is not a number in JSON", "body")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InputError(f"holds a number too large to store: {text[:40]}", "body")
    return value


def check_params(**params: Any) -> None:
    """Refuse (400 naming the parameter) a path or query parameter that
    PostgreSQL cannot hold as text: a NUL character or an unpaired
    surrogate. Without this the statement fails after the fact (a 500)."""
    for name, value in params.items():
        if isinstance(value, str):
            _check_storable(value, depth=0, path=name)


def _check_storable(node: Any, *, depth: int, path: str = "") -> None:
    """Refuse what PostgreSQL would refuse after the fact (a 500), naming
    where it is (``events[3].data.value``; ``body`` at the top)."""
    field = path or "body"
    if depth > MAX_BODY_DEPTH:
        raise InputError(f"nests deeper than {MAX_BODY_DEPTH} levels", field)
    if isinstance(node, str):
        if "\x00" in node:
            raise InputError("holds a NUL character (\\u0000), which cannot be stored", field)
        try:
            node.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError("holds an unpaired surrogate (\\ud800-\\udfff), which is not Unicode text",
                             field) from None
    elif isinstance(node, dict):
        for key, value in node.items():
            _check_storable(key, depth=depth + 1, path=field)
            _check_storable(value, depth=depth + 1, path=f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _check_storable(value, depth=depth + 1, path=f"{path}[{i}]")
