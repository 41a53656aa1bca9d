"""What a person can do to their memory from the dashboard, each through the
ledger (``facts/ledger.py``): correct ("this changed"), retract ("this was
never true"), erase ("forget this"), erase everything ("forget everything
about me"). Every function first finds the memory among the subject's own
assertions, so another person's id raises :class:`NotFound` and writes
nothing.
"""
from __future__ import annotations

import uuid
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from dashboard.queries import memory_history, owned_assertion, same_value_ids
from facts import ledger
from facts.errors import NotFound
from facts.inputs import parse_assertion
from facts.models import Subject
from facts.projection import iso

CORRECTION_EXTRACTOR = "dashboard"


def actor_for(*, user_id: int) -> str:
    """The actor recorded for an end user's action (``user:<id>``)."""
    return f"user:{user_id}"


def correct_memory(*, subject: Subject, assertion_id: str, value: str, valid_from: datetime,
                   actor: str) -> ledger.WriteResult:
    """"This changed": record ``value`` as true from ``valid_from`` (UTC) on
    the memory's key, as a ``correction`` (DESIGN.md write rule steps 4-5:
    a correction outranks every source and, starting later, closes the old
    value there; the old value stays true of its own interval). Raises
    :class:`NotFound` and :class:`~facts.inputs.InputError` (field
    ``data.value`` or ``data.valid_from``)."""
    assertion = owned_assertion(subject=subject, assertion_id=assertion_id)
    key = assertion.fact_key
    now = timezone.now()
    data = parse_assertion({
        "subject": subject.external_id, "entity": key.entity, "predicate": key.predicate, "scope": key.scope,
        "value": value.strip(), "valid_from": iso(valid_from), "stated_at": iso(now),
        "source": {"kind": "correction", "id": f"dashboard:{uuid.uuid4()}", "extractor": CORRECTION_EXTRACTOR,
                   "evidence": "You corrected this on your memory page."},
    }, received_at=now)
    return ledger.assert_fact(tenant=subject.tenant, data=data, actor=actor)


def retract_memory(*, subject: Subject, assertion_id: str, reason: str, actor: str) -> list[str]:
    """"This was never true": retract every live source of the memory's
    version (DESIGN.md "retraction": kept, never an answer again for any
    valid time). Returns the retracted ids. Raises :class:`NotFound`, also
    when nothing of it is left to retract."""
    history = memory_history(subject=subject, assertion_id=assertion_id)
    ids = history.live_ids
    if not ids:
        raise NotFound("nothing left to retract")
    ledger.retract(tenant=subject.tenant, assertion_ids=ids, reason=reason.strip(), actor=actor)
    return ids


def erase_memory(*, subject: Subject, assertion_id: str, actor: str) -> int:
    """"Forget this": erase every assertion that holds this value on this
    key, so the value and its evidence are nowhere (DESIGN.md "erasure":
    a tombstone without personal data stays). All or nothing. Returns how
    many were erased. Raises :class:`NotFound`."""
    assertion = owned_assertion(subject=subject, assertion_id=assertion_id)
    ids = same_value_ids(subject=subject, assertion=assertion)
    with transaction.atomic():
        for aid in ids:
            ledger.erase(tenant=subject.tenant, assertion_id=aid, actor=actor)
    return len(ids)


def forget_everything(*, subject: Subject, actor: str) -> int:
    """"Forget everything about me": erase the subject (API.md ``DELETE
    /subjects/<id>``). Returns the number of assertions erased."""
    return ledger.erase_subject(tenant=subject.tenant, external_id=subject.external_id, actor=actor)
