"""What every importer shares: events, predicate rules, delivery order, the
run loop with its progress bar, and the summary.

An importer module turns its file into :class:`ImportEvent` s (one
``fact.asserted`` envelope each, API.md "Inbound events") and a mapping of
predicate name to :class:`PredicateRule`; :func:`run_import` registers the
rules and sends the events through a :class:`~facts.importers.sender.Sender`.

Times: every datetime is timezone-aware UTC and goes on the wire as RFC 3339
with ``Z``. Durations are seconds.
"""
from __future__ import annotations

import hashlib
import json
import logging
import random
import re
import sys
import time
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterable, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from facts.importers.sender import Sender

logger = logging.getLogger(__name__)

# How many refusals the summary keeps verbatim (the rest are only counted).
KEPT_REFUSALS = 20


class DataError(ValueError):
    """A line of an input file that the importer cannot read. The message
    names the file position (entity/slot/answer index, or file:line)."""


def slug(text: str, *, sep: str = "-") -> str:
    """ASCII slug of ``text``: accents folded, apostrophes dropped, every other
    run of non-alphanumerics replaced by ``sep``, lower case, trimmed.

    ``slug("President of the People's Republic of China", sep="_")`` is
    ``"president_of_the_peoples_republic_of_china"``. Raises
    :class:`DataError` if nothing alphanumeric is left.
    """
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    folded = re.sub(r"['\u2019]", "", folded)
    out = re.sub(r"[^A-Za-z0-9]+", sep, folded).strip(sep).lower()
    if not out:
        raise DataError(f"no usable characters to name {text!r}")
    return out


def iso(value: datetime | None) -> str | None:
    """RFC 3339 UTC with ``Z`` (``None`` stays ``None``). ``value`` must be
    timezone-aware."""
    if value is None:
        return None
    return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class ImportEvent:
    """One inbound event ready to send.

    ``id`` is the idempotency key: the ``webhook-id`` header in webhook mode,
    the event's ``id`` in batch mode. It is derived from the envelope's
    content, so re-importing the same file replays receipts and writes
    nothing twice. ``order_key`` is the data set's natural ("date") order.
    """

    id: str
    envelope: dict
    order_key: tuple

    @property
    def data(self) -> dict:
        return self.envelope["data"]


def stated_at(valid_from: datetime, *, now: datetime | None = None) -> dict:
    """The ``stated_at`` of a record that says when it began: ``{"stated_at":
    valid_from}``, or nothing (the API then takes the time of receipt) when
    that start is later than ``now``: a data set's row starting in 2844 was
    not said in 2844, and the API refuses a ``stated_at`` from the future
    (it would win every tie on its key). Leaving it out keeps the payload,
    and so its duplicate check, the same on every import until that day."""
    return {} if valid_from > (now or datetime.now(timezone.utc)) else {"stated_at": iso(valid_from)}


def assertion_event(*, data: dict, order_key: tuple) -> ImportEvent:
    """Wrap a ``fact.asserted`` ``data`` object (API.md) in an envelope whose
    ``timestamp`` is the assertion's ``stated_at`` (else its ``valid_from``),
    with an id that is the SHA-256 of the canonical envelope (prefix
    ``msg_``)."""
    envelope = {"type": "fact.asserted", "timestamp": data.get("stated_at") or data["valid_from"], "data": data}
    digest = hashlib.sha256(_canonical(envelope).encode()).hexdigest()
    return ImportEvent(id=f"msg_{digest[:40]}", envelope=envelope, order_key=order_key)


@dataclass(frozen=True)
class PredicateRule:
    """A predicate policy as ``PUT /api/v1/predicates/<name>`` takes it."""

    cardinality: str
    stakes: str = "low"
    authority: str = "user"
    ttl_seconds: int | None = None

    def as_body(self) -> dict:
        return {"cardinality": self.cardinality, "stakes": self.stakes, "authority": self.authority,
                "ttl_seconds": self.ttl_seconds}


def order_events(events: Iterable[ImportEvent], *, shuffle: bool = False, seed: int = 0,
                 limit: int | None = None) -> list[ImportEvent]:
    """Delivery order: the natural order (``order_key``, then id), or a
    shuffle seeded by ``seed`` (same seed, same order); then the first
    ``limit`` events (``None``: all). Raises ``ValueError`` for a negative
    limit."""
    ordered = sorted(events, key=lambda e: (e.order_key, e.id))
    if shuffle:
        random.Random(seed).shuffle(ordered)
    if limit is not None:
        if limit < 0:
            raise ValueError("limit must be zero or more")
        ordered = ordered[:limit]
    return ordered


@dataclass
class ImportSummary:
    """What a run did: events sent, outcomes by name (API.md outcomes, plus
    ``refused:<status>`` for 4xx answers), wall-clock seconds, the first
    refusals verbatim."""

    dataset: str
    mode: str
    sent: int = 0
    outcomes: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    predicates_registered: int = 0
    refusals: list[dict] = field(default_factory=list)

    @property
    def rate(self) -> float:
        """Events per second (0 when nothing was sent)."""
        return self.sent / self.seconds if self.seconds > 0 else 0.0

    @property
    def refused(self) -> int:
        return sum(n for name, n in self.outcomes.items() if name.startswith("refused:"))

    def as_json(self) -> dict:
        return {"dataset": self.dataset, "mode": self.mode, "sent": self.sent, "outcomes": dict(sorted(self.outcomes.items())),
                "seconds": round(self.seconds, 3), "events_per_second": round(self.rate, 1),
                "predicates_registered": self.predicates_registered, "refused": self.refused,
                "refusals": self.refusals}

    def as_text(self) -> str:
        outcomes = ", ".join(f"{name} {n}" for name, n in sorted(self.outcomes.items())) or "none"
        lines = [
            f"{self.dataset}: {self.sent} events sent ({self.mode}) in {self.seconds:.1f} s, {self.rate:.1f} events/s",
            f"outcomes: {outcomes}",
            f"predicates registered or changed: {self.predicates_registered}",
        ]
        for refusal in self.refusals[:5]:
            lines.append(f"refused {refusal['id']}: {refusal['status']} {refusal.get('field')}: {refusal.get('detail')}")
        return "\n".join(lines)


def _progress(total: int, *, enabled: bool | None, desc: str):
    from tqdm import tqdm

    show = sys.stderr.isatty() if enabled is None else enabled
    return tqdm(total=total, disable=not show, unit="event", desc=desc, file=sys.stderr, dynamic_ncols=True)


def run_import(*, sender: "Sender", dataset: str, events: Sequence[ImportEvent], predicates: dict[str, PredicateRule],
               batch_size: int = 500, progress: bool | None = None) -> ImportSummary:
    """Register ``predicates`` (only those whose policy differs from the
    tenant's current one), then send ``events`` in the given order.

    ``batch_size`` is the number of events per batch request in batch mode
    (1 to 1,000) and the progress-bar step; ``progress`` ``None`` shows a bar
    only when stderr is a terminal. Refusals (4xx) are counted, not raised;
    transport failures (connection refused, 5xx) raise
    :class:`~facts.importers.sender.SendError`. Returns the summary.
    """
    started = time.monotonic()
    summary = ImportSummary(dataset=dataset, mode=sender.mode)
    summary.predicates_registered = sender.ensure_predicates(predicates)
    logger.info("import.started", extra={"dataset": dataset, "mode": sender.mode, "events": len(events),
                                         "tenant": sender.credentials.slug})
    step = max(1, min(batch_size, 1000))
    with _progress(len(events), enabled=progress, desc=dataset) as bar:
        for start in range(0, len(events), step):
            chunk = list(events[start:start + step])
            for event, result in zip(chunk, sender.send(chunk)):
                summary.sent += 1
                status = result.get("status", 200)
                if status == 200:
                    summary.outcomes[result.get("outcome", "unknown")] += 1
                else:
                    summary.outcomes[f"refused:{status}"] += 1
                    if len(summary.refusals) < KEPT_REFUSALS:
                        summary.refusals.append({"id": event.id, "status": status, "field": result.get("field"),
                                                 "detail": result.get("detail")})
            bar.update(len(chunk))
    summary.seconds = time.monotonic() - started
    logger.info("import.finished", extra={"dataset": dataset, "mode": sender.mode, "sent": summary.sent,
                                          "refused": summary.refused, "seconds": round(summary.seconds, 3)})
    return summary
