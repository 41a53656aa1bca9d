"""Writes for prompts and the review queue: the only place that changes
them, and the only place that announces those changes (CONVENTIONS.md,
Zulip's actions layer: outbox rows in the same transaction, tasks on
commit).

Rules (DESIGN.md):

- Step 6: a high-stakes tie stays OPEN and a worker opens a clarification
  prompt (:func:`open_conflict_prompt`); low-stakes ties never get one. The
  request is recorded in the ledger's transaction (:class:`PromptRequest`),
  so a task lost to a broker outage is picked up by the sweep.
- Step 7: a high-stakes change from a source below ``correction`` is a
  proposal; the person is asked to confirm (:func:`open_proposal_prompt`).
- The resolution function: "A clarification answer is a ``correction``
  assertion with the chosen value and the disputed valid time, source id
  ``prompt:<id>``, actor recorded" (:func:`answer_prompt`); "Rejecting a
  proposal retracts it".
- Step 4: a user's statement overruled by the system of record opens a
  follow-up for staff (:func:`open_followups`).

Locks are taken in one order everywhere: the fact key (the ledger's lock),
then the prompt, then the review task.
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from conflicts import outbox, prompts
from conflicts.models import ClarificationPrompt, PromptRequest, ReviewTask
from conflicts.queries import KeyResolution, key_resolution, key_resolutions, prompt_state, reclassification_prompts
from conflicts.scheduling import enqueue
from facts import events as ev
from facts import ledger
from facts.bulk import Writes
from facts.errors import NotFound, StateConflict
from facts.inputs import InputError, parse_assertion, parse_time, parse_uuid
from facts.ledger import WriteResult
from facts.models import Assertion, Conflict, FactKey, Subject, Tenant
from facts.policy import policy_view_at
from facts.projection import iso
from facts.resolve import FATE_PROPOSED, SEGMENT_CONFLICT, SEGMENT_VALUE, STAKES_HIGH, Claim

logger = logging.getLogger(__name__)

BOTH = "both"
PROMPT_EXTRACTOR = "clarification-prompt"
REVIEW_EXTRACTOR = "staff-review"
REVIEW_SOURCE_PREFIX = "review:"


@dataclass
class AnswerResult:
    """What answering a prompt did: the prompt as it now stands, the plain
    words told to the person, and the ledger's answer (``outcome``
    ``answered``; ``assertion_id`` is the correction, or the retracted
    proposal when a change was rejected, or ``None`` for "both")."""

    prompt: ClarificationPrompt
    confirmation: str
    write: WriteResult


@dataclass
class ReviewDecision:
    """What a staff decision did: the task as it now stands and the ledger's
    answer (``None`` for a decision that changes no fact)."""

    task: ReviewTask
    write: WriteResult | None
    policy: dict | None = None


@dataclass
class _Plan:
    """How an answer goes through the ledger. ``action``: ``chose`` /
    ``said`` (a correction with ``value`` over [valid_from, valid_to)),
    ``kept`` (retract the proposal), ``both`` (staff reclassify)."""

    action: str
    value: Any = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    retract: list[str] = field(default_factory=list)
    choice: Any = None


# --------------------------------------------------------------------------- opening prompts


def _evidence(rows: list[Assertion]) -> list[prompts.Evidence]:
    return [prompts.Evidence(assertion_id=str(r.id), value=r.value, stated_at=r.stated_at, valid_from=r.valid_from,
                             source_kind=r.source_kind, source_id=r.source_id, extractor=r.extractor,
                             evidence=r.evidence) for r in rows]


def _rows(claims: list[Claim]) -> list[Assertion]:
    rows = {r.id: r for r in Assertion.objects.filter(pk__in=[c.id for c in claims])}
    return sorted((rows[c.id] for c in claims), key=lambda r: (r.stated_at, r.valid_from, r.content_hash))


def _lock_key(fact_key_id: int) -> FactKey:
    return FactKey.objects.select_for_update().get(pk=fact_key_id)


def _deadlines(tenant: Tenant, now: datetime) -> dict:
    return {"asked_at": now, "escalate_at": now + timedelta(seconds=tenant.prompt_escalation_seconds),
            "expires_at": now + timedelta(seconds=max(1, tenant.prompt_expiry_seconds))}


def _conflict_wording(conflict: Conflict, *, allow_both: bool, now: datetime) -> dict | None:
    """Question, options and disputed valid time of an OPEN conflict, from
    the key's resolution now; ``None`` when the tie is gone."""
    key = conflict.fact_key
    state = key_resolution(fact_key=key, at=now)
    segment = next((s for s in state.resolution.segments
                    if s.status == SEGMENT_CONFLICT and s.valid_from == conflict.valid_from), None)
    if segment is None:
        return None
    rows = _rows(list(segment.candidates))
    # One mention and one option per value: a tie carried on by later
    # claims of the same values holds several claims of each. The latest
    # statement of a value speaks for it.
    latest = {r.value_key: r for r in rows}
    candidates = _evidence([r for r in rows if latest[r.value_key] is r])
    options = prompts.conflict_options(predicate=key.predicate, candidates=candidates)
    if not allow_both:
        options = [o for o in options if o["kind"] != "both"]
    return {
        "question": prompts.conflict_question(entity=key.entity, predicate=key.predicate, candidates=candidates,
                                              valid_from=segment.valid_from, valid_to=segment.valid_to, today=now),
        "options": options, "assertion_ids": [str(r.id) for r in rows],
        "valid_from": segment.valid_from, "valid_to": segment.valid_to,
    }


def open_conflict_prompt(*, conflict_id: str) -> ClarificationPrompt | None:
    """Open the clarification prompt of a high-stakes OPEN conflict
    (DESIGN.md step 6), once: a second call, or a call racing another,
    returns the same prompt (unique constraint ``prompt_one_per_conflict``).
    Returns ``None`` when the conflict is unknown, resolved or low stakes.
    Writes a ``clarification.requested`` outbox event and marks the
    conflict's :class:`PromptRequest` done."""
    with transaction.atomic():
        found = Conflict.objects.filter(pk=conflict_id).values("fact_key_id").first()
        if found is None:
            return None
        _lock_key(found["fact_key_id"])
        now = timezone.now()
        PromptRequest.objects.filter(conflict_id=conflict_id, done_at__isnull=True).update(done_at=now)
        conflict = Conflict.objects.select_related("fact_key", "subject", "tenant").get(pk=conflict_id)
        existing = ClarificationPrompt.objects.filter(conflict=conflict).first()
        if existing is not None or conflict.status != Conflict.OPEN or conflict.stakes != STAKES_HIGH:
            return existing
        wording = _conflict_wording(conflict, allow_both=True, now=now)
        if wording is None:
            return None
        return _create_prompt(tenant=conflict.tenant, subject=conflict.subject, fact_key=conflict.fact_key, now=now,
                              kind=ClarificationPrompt.KIND_CONFLICT, conflict=conflict, stakes=conflict.stakes,
                              **wording)


def open_proposal_prompt(*, tenant_id: int, assertion_id: str) -> ClarificationPrompt | None:
    """Open the confirmation prompt of a pending high-stakes proposal
    (DESIGN.md step 7), once (unique ``prompt_one_per_proposal``); a prompt
    withdrawn earlier (the change was confirmed elsewhere, then that
    confirmation retracted) is asked again. Returns ``None`` when the
    assertion is unknown or no longer a proposal. Marks the proposal's
    :class:`PromptRequest` done."""
    return open_proposal_prompts(tenant_id=tenant_id, assertion_ids=[assertion_id])[str(assertion_id)]


def open_proposal_prompts(*, tenant_id: int, assertion_ids: list[str]) -> dict[str, ClarificationPrompt | None]:
    """:func:`open_proposal_prompt` for several proposals of one tenant, in
    one transaction, by assertion id. Their keys are locked in id order in
    one statement; then one query each for the requests, the prompts
    already there, the keys' claims and policies, and the rows quoted; one
    ``INSERT`` for the new prompts. A worker opening the prompts of a batch
    write pays that once, not a dozen statements per prompt."""
    asked_as = {str(a): _uuid_text(a) for a in assertion_ids}  # as given -> canonical text (None: not a UUID)
    ids = list(dict.fromkeys(a for a in asked_as.values() if a is not None))
    with transaction.atomic():
        key_of = {str(a): k for a, k in Assertion.objects.filter(tenant_id=tenant_id, pk__in=ids)
                  .values_list("id", "fact_key_id")}
        keys = {k.id: k for k in FactKey.objects.select_for_update(of=("self",)).select_related("tenant", "subject")
                .filter(pk__in=set(key_of.values())).order_by("pk")}
        found = [a for a in ids if key_of.get(a) in keys]
        out = _open_locked(tenant_id, found, key_of, keys) if found else {}
    return {given: out.get(text) if text else None for given, text in asked_as.items()}


def _uuid_text(value: Any) -> str | None:
    """``value`` as a UUID's canonical text, or ``None`` when it is not one."""
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        return None


def _open_locked(tenant_id: int, found: list[str], key_of: dict[str, int],
                 keys: dict[int, FactKey]) -> dict[str, ClarificationPrompt | None]:
    """:func:`open_proposal_prompts` for the assertions ``found`` (canonical
    ids), whose keys ``keys`` are locked; by assertion id."""
    now = timezone.now()
    PromptRequest.objects.filter(tenant_id=tenant_id, proposal_assertion_id__in=found,
                                 done_at__isnull=True).update(done_at=now)
    existing = {str(p.proposal_assertion_id): p for p in ClarificationPrompt.objects.select_for_update(of=("self",))
                .filter(tenant_id=tenant_id, proposal_assertion_id__in=found)}
    out: dict[str, ClarificationPrompt | None] = {a: existing.get(a) for a in found}
    asked = [a for a in found if out[a] is None or out[a].status == ClarificationPrompt.WITHDRAWN]
    states = key_resolutions([keys[key_of[a]] for a in asked], at=now)
    pending = [(a, *claims) for a in asked if (claims := _proposal_claims(states[key_of[a]], a)) is not None]
    rows = {r.id: r for r in Assertion.objects.filter(
        pk__in=[c.id for _, *claims in pending for c in claims if c is not None])}
    new: list[tuple[FactKey, dict]] = []
    for a, proposal, holding in pending:
        key = keys[key_of[a]]
        wording = _proposal_wording(key, states[key.id], rows[proposal.id], rows[holding.id] if holding else None)
        if out[a] is not None:
            out[a] = _reask(out[a], wording=wording, now=now)
        else:
            new.append((key, {"proposal_assertion_id": a, **wording}))
    out.update(_create_prompts(new, kind=ClarificationPrompt.KIND_PROPOSAL, now=now))
    return out


def _proposal_claims(state: KeyResolution, assertion_id: str) -> tuple[Claim, Claim | None] | None:
    """The proposal ``assertion_id`` and the claim whose answer holds where
    it starts (``None``: nothing holds there); ``None`` when the assertion
    is not (or no longer) a proposal."""
    proposal = state.claims.get(uuid.UUID(assertion_id))
    if proposal is None or state.resolution.fate.get(proposal.id) != FATE_PROPOSED:
        return None
    holding = [s for s in state.resolution.at(proposal.valid_from) if s.status == SEGMENT_VALUE]
    return proposal, holding[0].winner if holding else None


def _proposal_wording(key: FactKey, state: KeyResolution, proposal: Assertion, holding: Assertion | None) -> dict:
    """Question, options and valid time of a pending proposal, from its row
    and the row of the claim holding where it starts."""
    (new,) = _evidence([proposal])
    old = _evidence([holding])[0] if holding is not None else None
    return {
        "stakes": state.resolution.policy.stakes,
        "question": prompts.proposal_question(entity=key.entity, predicate=key.predicate,
                                              old=old.value if old else None, new=new.value),
        "options": prompts.proposal_options(new=new, old=old),
        "assertion_ids": [new.assertion_id] + ([old.assertion_id] if old else []),
        "valid_from": proposal.valid_from, "valid_to": proposal.valid_to,
    }


def _reask(prompt: ClarificationPrompt, *, wording: dict, now: datetime) -> ClarificationPrompt:
    """Put a withdrawn prompt to the person again, freshly worded, with new
    deadlines."""
    for name, value in {**wording, **_deadlines(prompt.tenant, now)}.items():
        setattr(prompt, name, value)
    prompt.status = ClarificationPrompt.PENDING
    prompt.withdrawn_at, prompt.withdrawn_reason = None, ""
    prompt.save()
    outbox.record(tenant_id=prompt.tenant_id, subject_id=prompt.subject_id, type=outbox.CLARIFICATION_REQUESTED,
                  data=_prompt_event_data(prompt, tenant=prompt.tenant, subject=prompt.subject),
                  assertion_ids=prompt.assertion_ids)
    logger.info("prompt.reasked", extra={"tenant_id": prompt.tenant_id, "prompt_id": str(prompt.id)})
    return prompt


def _create_prompt(*, tenant: Tenant, subject: Subject, fact_key: FactKey, now: datetime, **fields) -> ClarificationPrompt:
    try:
        with transaction.atomic():
            prompt = ClarificationPrompt.objects.create(tenant=tenant, subject=subject, fact_key=fact_key, created_at=now,
                                                        **_deadlines(tenant, now), **fields)
    except IntegrityError:
        target = ({"conflict": fields["conflict"]} if fields.get("conflict") is not None
                  else {"tenant": tenant, "proposal_assertion_id": fields["proposal_assertion_id"]})
        return ClarificationPrompt.objects.get(**target)
    _announce(prompt)
    return prompt


def _create_prompts(new: list[tuple[FactKey, dict]], *, kind: str, now: datetime) -> dict[str, ClarificationPrompt]:
    """Prompts of ``kind`` for proposals, one per ``(key, fields)`` (the key
    locked, with its tenant and subject), in one ``INSERT``; by proposal
    assertion id. Should one of them exist after all (a unique constraint
    says so), each is created on its own instead (:func:`_create_prompt`)."""
    if not new:
        return {}
    built = [ClarificationPrompt(tenant=key.tenant, subject=key.subject, fact_key=key, created_at=now, kind=kind,
                                 **_deadlines(key.tenant, now), **fields) for key, fields in new]
    try:
        with transaction.atomic():
            ClarificationPrompt.objects.bulk_create(built)
    except IntegrityError:
        return {fields["proposal_assertion_id"]: _create_prompt(tenant=key.tenant, subject=key.subject, fact_key=key,
                                                                now=now, kind=kind, **fields) for key, fields in new}
    for prompt in built:
        _announce(prompt)
    return {str(p.proposal_assertion_id): p for p in built}


def _announce(prompt: ClarificationPrompt) -> None:
    """A new prompt's ``clarification.requested`` outbox event, and its log line."""
    tenant, subject = prompt.tenant, prompt.subject
    outbox.record(tenant_id=tenant.id, subject_id=subject.id, type=outbox.CLARIFICATION_REQUESTED,
                  data=_prompt_event_data(prompt, tenant=tenant, subject=subject), assertion_ids=prompt.assertion_ids)
    logger.info("prompt.opened", extra={"tenant": tenant.slug, "prompt_id": str(prompt.id), "kind": prompt.kind})


def _prompt_event_data(prompt: ClarificationPrompt, *, tenant: Tenant, subject: Subject) -> dict:
    key = prompt.fact_key
    return {
        "tenant": tenant.slug, "subject": subject.external_id, "entity": key.entity, "predicate": key.predicate,
        "scope": key.scope, "prompt_id": str(prompt.id), "kind": prompt.kind,
        "conflict_id": str(prompt.conflict_id) if prompt.conflict_id else None,
        "proposal_assertion_id": str(prompt.proposal_assertion_id) if prompt.proposal_assertion_id else None,
        "question": prompt.question, "options": prompt.options, "stakes": prompt.stakes,
        "valid_from": iso(prompt.valid_from), "valid_to": iso(prompt.valid_to),
        "created_at": iso(prompt.created_at), "expires_at": iso(prompt.expires_at),
    }


def open_requested_prompts(*, now: datetime | None = None, stuck_after_seconds: float | None = None,
                           limit: int = 500) -> int:
    """Safety net for lost tasks (the broker was down at commit): handle
    every :class:`PromptRequest` still undone ``stuck_after_seconds`` after
    it was written (default ``MEMORYUI_OUTBOX_STUCK_SECONDS``). Returns how
    many requests were handled."""
    from django.conf import settings

    now = now or timezone.now()
    grace = stuck_after_seconds if stuck_after_seconds is not None else float(
        getattr(settings, "MEMORYUI_OUTBOX_STUCK_SECONDS", 60))
    requests = list(PromptRequest.objects.filter(done_at__isnull=True, created_at__lte=now - timedelta(seconds=grace))
                    .order_by("created_at").values("tenant_id", "conflict_id", "proposal_assertion_id")[:limit])
    open_prompts(conflict_ids=[r["conflict_id"] for r in requests if r["conflict_id"] is not None],
                 proposals=[[r["tenant_id"], r["proposal_assertion_id"]] for r in requests
                            if r["conflict_id"] is None])
    if requests:
        logger.info("prompt_requests.swept", extra={"handled": len(requests)})
    return len(requests)


# --------------------------------------------------------------------------- answering


def _parse_choice(prompt: ClarificationPrompt, choice: Any) -> _Plan:
    """Check ``choice`` against the prompt's options. Raises
    :class:`InputError` (field ``choice``...)."""
    kinds = {o["kind"] for o in prompt.options}
    if choice == BOTH:
        if BOTH not in kinds:
            raise InputError("'both' is not offered for this question", "choice")
        return _Plan(action="both", choice=BOTH)
    if isinstance(choice, dict):
        if "value" not in choice:
            raise InputError("is required for 'neither, it is …'", "choice.value")
        valid_from = prompt.valid_from
        if choice.get("valid_from") not in (None, ""):
            valid_from = parse_time(choice["valid_from"], "choice.valid_from")
        valid_to = prompt.valid_to
        if valid_to is not None and valid_from >= valid_to:
            raise InputError(f"must be before the end of the disputed time {iso(valid_to)}", "choice.valid_from")
        retract = [str(prompt.proposal_assertion_id)] if prompt.kind == ClarificationPrompt.KIND_PROPOSAL else []
        return _Plan(action="said", value=choice["value"], valid_from=valid_from, valid_to=valid_to, retract=retract,
                     choice={"value": choice["value"], "valid_from": iso(valid_from)})
    if not isinstance(choice, str):
        raise InputError("must be an assertion id from the options, {\"value\": ..., \"valid_from\": ...} or 'both'",
                         "choice")
    chosen_id = parse_uuid(choice, "choice")
    option = next((o for o in prompt.options if o.get("assertion_id") == chosen_id), None)
    if option is None:
        raise InputError("is not one of this prompt's options", "choice")
    row = Assertion.objects.filter(tenant_id=prompt.tenant_id, pk=chosen_id).first()
    if row is None or row.erased_at is not None or row.retracted_at is not None:
        raise StateConflict("that option is no longer live (retracted or erased)", prompt_state(prompt))
    if option["kind"] == "keep":
        return _Plan(action="kept", value=row.value, retract=[str(prompt.proposal_assertion_id)], choice=chosen_id)
    return _Plan(action="chose", value=row.value, valid_from=prompt.valid_from, valid_to=prompt.valid_to,
                 choice=chosen_id)


def _correction(*, tenant: Tenant, prompt: ClarificationPrompt, plan: _Plan, source_id: str, extractor: str,
                actor: str, now: datetime) -> WriteResult:
    key = prompt.fact_key
    data = {
        "subject": prompt.subject.external_id, "entity": key.entity, "predicate": key.predicate, "scope": key.scope,
        "value": plan.value, "valid_from": iso(plan.valid_from), "valid_to": iso(plan.valid_to),
        "stated_at": iso(now),
        "source": {"kind": "correction", "id": source_id, "extractor": extractor,
                   "evidence": f"Answer to: {prompt.question}"[:10_000]},
    }
    try:
        parsed = parse_assertion(data, received_at=now)
    except InputError as exc:
        raise InputError(exc.detail, "choice.value" if (exc.field or "").endswith(".value") else "choice") from None
    return ledger.assert_fact(tenant=tenant, data=parsed, actor=actor)


def _apply(*, tenant: Tenant, prompt: ClarificationPrompt, plan: _Plan, actor: str, source_id: str, extractor: str,
           now: datetime) -> WriteResult:
    """Run ``plan`` through the ledger (correction, retraction, or a staff
    reclassification task for "both"). The prompt is already marked
    answered, so the subscribers that withdraw prompts leave it alone."""
    write: WriteResult | None = None
    if plan.action in ("chose", "said"):
        write = _correction(tenant=tenant, prompt=prompt, plan=plan, source_id=source_id, extractor=extractor,
                            actor=actor, now=now)
    live_retract = list(Assertion.objects.filter(pk__in=plan.retract, retracted_at__isnull=True, erased_at__isnull=True)
                        .values_list("id", flat=True))
    if live_retract:
        retraction = ledger.retract(tenant=tenant, assertion_ids=[str(a) for a in live_retract], actor=actor,
                                    reason=f"rejected in answer to {source_id}")
        write = write or retraction
    if plan.action == "both":
        _request_reclassification(prompt=prompt, now=now)
    if write is None:
        return WriteResult(None, "answered", "reclassification-requested",
                           conflict_id=str(prompt.conflict_id) if prompt.conflict_id else None)
    return write


def _before_values(prompt: ClarificationPrompt) -> list[Any]:
    if prompt.kind == ClarificationPrompt.KIND_CONFLICT:
        return [o["value"] for o in prompt.options if o["kind"] == "candidate"]
    return [o["value"] for o in prompt.options if o["kind"] == "keep"]


def _confirmation_text(prompt: ClarificationPrompt, plan: _Plan, now: datetime, write: WriteResult) -> str:
    key = prompt.fact_key
    chosen = plan.value
    if plan.action == "kept":
        chosen = next((o["value"] for o in prompt.options if o["kind"] == "confirm"), None)
    since, until = prompt.valid_from, prompt.valid_to
    if prompt.kind == ClarificationPrompt.KIND_PROPOSAL:
        # The value held until now has its own start, not the proposal's.
        kept = [o["assertion_id"] for o in prompt.options if o["kind"] == "keep" and o.get("assertion_id")]
        since = Assertion.objects.filter(pk__in=kept).order_by("valid_from").values_list(
            "valid_from", flat=True).first() or since
        until = None
    return prompts.confirmation(action=plan.action, before=_before_values(prompt), chosen=chosen,
                                since=since, until=until, today=now, entity=key.entity, predicate=key.predicate,
                                overruled_by=write.rule if plan.action in ("chose", "said")
                                and write.outcome == "overruled" else None)


def _lock_prompt(*, tenant: Tenant, prompt_id: str) -> ClarificationPrompt:
    found = ClarificationPrompt.objects.filter(tenant=tenant, pk=prompt_id).values("fact_key_id").first()
    if found is None:
        raise NotFound("no such prompt")
    _lock_key(found["fact_key_id"])
    return (ClarificationPrompt.objects.select_for_update(of=("self",))
            .select_related("subject", "fact_key", "tenant").get(pk=prompt_id))


def _answerable(prompt: ClarificationPrompt, now: datetime) -> bool:
    return prompt.status in ClarificationPrompt.OPEN_STATUSES and prompt.expires_at > now


def answer_prompt(*, tenant: Tenant, prompt_id: str, choice: Any, answered_by: str) -> AnswerResult:
    """Answer a clarification prompt (API.md ``POST /prompts/<id>/answer``,
    the ``clarification.answered`` webhook, the dashboard).

    ``choice``: an assertion id from the prompt's options (a candidate; for
    a proposal the new value to confirm or the old one to keep),
    ``{"value": ..., "valid_from": "<RFC 3339>"}`` for "neither, it is …"
    (``valid_from`` defaults to the start of the disputed time; a later one
    says what holds from then on and leaves the stretch before it as it
    was, still in conflict), or ``"both"`` where offered. ``answered_by``: who answered (1-200
    characters), recorded as the ledger's actor.

    The answer is a ``correction`` assertion with the chosen value over the
    disputed valid time and source id ``prompt:<id>`` (DESIGN.md, "The
    resolution function"); keeping the old value under a proposal retracts
    the proposal; "neither" on a proposal also retracts it; "both" leaves
    the conflict open and asks staff to reclassify the predicate. Sends
    ``clarification.answered`` (and, through the ledger,
    ``conflict.resolved``).

    Raises :class:`NotFound` (unknown id, or another tenant's),
    :class:`InputError` (malformed id or choice, nothing written) and
    :class:`StateConflict` (already answered, expired or withdrawn: 409 with
    the prompt's state). Two answers at once: the prompt's fact key and row
    are locked, so one wins and the other gets the 409.
    """
    prompt_id = parse_uuid(prompt_id, "prompt_id")
    if not isinstance(answered_by, str) or not answered_by.strip() or len(answered_by) > 200:
        raise InputError("must be a non-empty string of at most 200 characters", "answered_by")
    with transaction.atomic():
        prompt = _lock_prompt(tenant=tenant, prompt_id=prompt_id)
        now = timezone.now()
        if not _answerable(prompt, now):
            raise StateConflict(f"this prompt is {prompt_state(prompt, now=now)['status']}", prompt_state(prompt, now=now))
        plan = _parse_choice(prompt, choice)
        return _answer(tenant=tenant, prompt=prompt, plan=plan, answered_by=answered_by, now=now,
                       source_id=f"prompt:{prompt.id}", extractor=PROMPT_EXTRACTOR)


def _answer(*, tenant: Tenant, prompt: ClarificationPrompt, plan: _Plan, answered_by: str, now: datetime,
            source_id: str, extractor: str) -> AnswerResult:
    prompt.status = ClarificationPrompt.ANSWERED
    prompt.answered_at = now
    prompt.answered_by = answered_by
    prompt.answer = {"action": plan.action, "choice": plan.choice, "value": plan.value}
    prompt.save(update_fields=["status", "answered_at", "answered_by", "answer"])
    write = _apply(tenant=tenant, prompt=prompt, plan=plan, actor=answered_by, source_id=source_id,
                   extractor=extractor, now=now)
    text = _confirmation_text(prompt, plan, now, write)
    prompt.confirmation = text
    prompt.correction_assertion_id = write.assertion_id if plan.action in ("chose", "said") else None
    prompt.save(update_fields=["confirmation", "correction_assertion_id"])
    _close_tasks(ReviewTask.objects.filter(prompt=prompt, kind__in=_ESCALATION_KINDS, status=ReviewTask.OPEN),
                 now=now, note=f"answered by {answered_by}")
    result = WriteResult(write.assertion_id, "answered", write.rule, supersedes=write.supersedes,
                         conflict_id=str(prompt.conflict_id) if prompt.conflict_id else write.conflict_id,
                         prompt_id=str(prompt.id), extra={"confirmation": text})
    data = _prompt_event_data(prompt, tenant=tenant, subject=prompt.subject)
    for private in ("question", "options", "created_at", "expires_at"):
        data.pop(private)
    outbox.record(
        tenant_id=tenant.id, subject_id=prompt.subject_id, type=outbox.CLARIFICATION_ANSWERED,
        data={**data, "choice": plan.choice, "action": plan.action, "answered_by": answered_by,
              "answered_at": iso(now), "confirmation": text, "assertion_id": write.assertion_id,
              "old": [{"value": v} for v in _before_values(prompt)],
              "new": {"value": plan.value if plan.action != "kept" else None,
                      "valid_from": iso(plan.valid_from), "valid_to": iso(plan.valid_to),
                      "recorded_at": iso(now), "source": {"kind": "correction", "id": source_id}}
              if plan.action in ("chose", "said") else None},
        assertion_ids=prompt.assertion_ids + ([write.assertion_id] if write.assertion_id else []),
    )
    logger.info("prompt.answered", extra={"tenant": tenant.slug, "prompt_id": str(prompt.id), "action": plan.action})
    return AnswerResult(prompt=prompt, confirmation=text, write=result)


def answer_from_webhook(tenant: Tenant, data: Any, actor: str) -> WriteResult:
    """Inbound ``clarification.answered`` (API.md): ``{"prompt_id",
    "choice", "answered_by"}``. ``answered_by`` defaults to ``actor``."""
    if not isinstance(data, dict):
        raise InputError("must be an object {prompt_id, choice, answered_by}", "data")
    if "prompt_id" not in data:
        raise InputError("is required", "data.prompt_id")
    if "choice" not in data:
        raise InputError("is required", "data.choice")
    answered_by = data.get("answered_by") or actor
    try:
        return answer_prompt(tenant=tenant, prompt_id=data["prompt_id"], choice=data["choice"],
                             answered_by=answered_by).write
    except InputError as exc:
        exc.field = f"data.{exc.field}" if exc.field else "data"
        raise


# --------------------------------------------------------------------------- escalation and expiry

_ESCALATION_KINDS = (ReviewTask.HIGH_STAKES_CONFIRMATION, ReviewTask.ESCALATED_PROMPT)


def escalate_prompts(*, now: datetime | None = None, limit: int = 500) -> int:
    """Move prompts still pending at ``escalate_at`` (created_at + the
    tenant's ``prompt_escalation_seconds``) to the staff queue: status
    ``escalated`` (still answerable) and one review task per prompt
    (``high_stakes_confirmation`` for a proposal, ``escalated_prompt`` for a
    conflict), however often this runs. Returns how many were escalated."""
    now = now or timezone.now()
    ids = list(ClarificationPrompt.objects.filter(status=ClarificationPrompt.PENDING, escalate_at__lte=now,
                                                  expires_at__gt=now).values_list("id", flat=True)[:limit])
    escalated = 0
    for prompt_id in ids:
        with transaction.atomic():
            prompt = (ClarificationPrompt.objects.select_for_update(skip_locked=True, of=("self",))
                      .select_related("fact_key", "subject", "tenant")
                      .filter(pk=prompt_id, status=ClarificationPrompt.PENDING).first())
            if prompt is None:
                continue
            prompt.status = ClarificationPrompt.ESCALATED
            prompt.escalated_at = now
            prompt.save(update_fields=["status", "escalated_at"])
            _escalation_task(prompt, now=now)
            escalated += 1
            logger.info("prompt.escalated", extra={"tenant": prompt.tenant.slug, "prompt_id": str(prompt.id)})
    return escalated


def _escalation_task(prompt: ClarificationPrompt, *, now: datetime) -> ReviewTask:
    kind = ReviewTask.HIGH_STAKES_CONFIRMATION if prompt.kind == ClarificationPrompt.KIND_PROPOSAL \
        else ReviewTask.ESCALATED_PROMPT
    existing = ReviewTask.objects.filter(prompt=prompt, kind=kind).first()
    if existing is not None:
        if existing.status == ReviewTask.DONE:  # a reopened prompt escalating again
            ReviewTask.objects.filter(pk=existing.pk).update(status=ReviewTask.OPEN, decision="", decided_at=None,
                                                             decided_by="", decision_note="", result=None)
        return existing
    key = prompt.fact_key
    title = (f"Confirm a change of {key.predicate.replace('_', ' ')} for {prompt.subject.external_id}"
             if kind == ReviewTask.HIGH_STAKES_CONFIRMATION
             else f"Settle a conflict on {key.predicate.replace('_', ' ')} for {prompt.subject.external_id}")
    try:
        with transaction.atomic():
            return ReviewTask.objects.create(
                tenant=prompt.tenant, subject=prompt.subject, fact_key=key, kind=kind, prompt=prompt,
                conflict_id=prompt.conflict_id, assertion_id=prompt.proposal_assertion_id, predicate=key.predicate,
                title=title, evidence={"question": prompt.question, "options": prompt.options},
                assertion_ids=prompt.assertion_ids, created_at=now,
            )
    except IntegrityError:
        return ReviewTask.objects.get(prompt=prompt, kind=kind)


def expire_prompts(*, now: datetime | None = None, limit: int = 500) -> int:
    """Mark prompts unanswered at ``expires_at`` as ``expired``. Nothing
    changes in the ledger: the earlier value stays (a proposal stays
    unconfirmed, a conflict stays OPEN); an escalation task stays open for
    staff. Returns how many expired."""
    now = now or timezone.now()
    ids = list(ClarificationPrompt.objects.filter(status__in=ClarificationPrompt.OPEN_STATUSES, expires_at__lte=now)
               .values_list("id", flat=True)[:limit])
    expired = 0
    for prompt_id in ids:
        with transaction.atomic():
            updated = (ClarificationPrompt.objects.filter(pk=prompt_id, status__in=ClarificationPrompt.OPEN_STATUSES)
                       .select_for_update(skip_locked=True).first())
            if updated is None:
                continue
            updated.status = ClarificationPrompt.EXPIRED
            updated.expired_at = now
            updated.save(update_fields=["status", "expired_at"])
            expired += 1
            logger.info("prompt.expired", extra={"tenant_id": updated.tenant_id, "prompt_id": str(updated.id)})
    return expired


# --------------------------------------------------------------------------- staff review


def _close_tasks(qs, *, now: datetime, note: str) -> int:
    return qs.update(status=ReviewTask.DONE, decision="closed", decision_note=note, decided_at=now, decided_by="system")


def _request_reclassification(*, prompt: ClarificationPrompt, now: datetime) -> ReviewTask:
    """"Both are true": one open ``reclassify_predicate`` task per
    (tenant, predicate) (unique ``review_one_open_reclassification``),
    quoting the first example; later answers join it without touching the
    row (no lock is taken here, so a staff decision holding the task while
    it re-runs the predicate's keys cannot deadlock with an answer). The
    prompts behind it are :func:`conflicts.queries.reclassification_prompts`."""
    key = prompt.fact_key
    lookup = {"tenant_id": prompt.tenant_id, "kind": ReviewTask.RECLASSIFY_PREDICATE, "predicate": key.predicate,
              "status": ReviewTask.OPEN}
    existing = ReviewTask.objects.filter(**lookup).first()
    if existing is not None:
        return existing
    values = [o["value"] for o in prompt.options if o["kind"] == "candidate"]
    try:
        with transaction.atomic():
            return ReviewTask.objects.create(
                **lookup, subject=prompt.subject, fact_key=key, conflict_id=prompt.conflict_id,
                title=f"Should {key.predicate.replace('_', ' ')} hold several values?",
                evidence={"example": {"prompt_id": str(prompt.id), "question": prompt.question, "values": values}},
                assertion_ids=prompt.assertion_ids, created_at=now,
            )
    except IntegrityError:
        return ReviewTask.objects.get(**lookup)


def open_followups(followups: list[dict]) -> None:
    """Write rule step 4: a user's statement (or correction) overruled by
    the system of record that owns the predicate becomes a
    ``system_record_followup`` task (confirm with the person, then change
    that system), once per statement (``review_one_followup_per_assertion``:
    a statement that has one already is skipped). A correction recorded by
    a staff decision (source id ``review:...``) opens none. ``followups``:
    dicts of ``tenant_id``, ``subject_id``, ``fact_key_id``, ``statement``
    and ``system_record`` (the event's); two statements for all of them."""
    wanted = [f for f in followups if not f["statement"]["source"]["id"].startswith(REVIEW_SOURCE_PREFIX)]
    if not wanted:
        return
    keys = FactKey.objects.select_related("subject").in_bulk({f["fact_key_id"] for f in wanted})
    now = timezone.now()
    ReviewTask.objects.bulk_create([_followup_task(key=keys[f["fact_key_id"]], now=now, **f) for f in wanted],
                                   ignore_conflicts=True)


def close_followups_of_retracted(*, tenant_id: int, assertion_ids: list[str]) -> int:
    """A ``system_record_followup`` about a statement or a system record
    that has since been retracted (never true) has nothing left to follow
    up: closed by the system, with a note saying why (one statement).
    Staff deciding the task itself (``reject`` retracts its statement)
    record their own decision over this. Returns how many closed."""
    return _close_tasks(ReviewTask.objects.filter(tenant_id=tenant_id, kind=ReviewTask.SYSTEM_RECORD_FOLLOWUP,
                                                  status=ReviewTask.OPEN, assertion_ids__has_any_keys=assertion_ids),
                        now=timezone.now(), note="closed: a statement it was about was retracted (never true)")


def _followup_task(*, tenant_id: int, subject_id: int, key: FactKey, statement: dict, system_record: dict | None,
                   now: datetime, **_) -> ReviewTask:
    ids = [statement["assertion_id"]] + ([system_record["assertion_id"]] if system_record else [])
    return ReviewTask(
        tenant_id=tenant_id, subject_id=subject_id, fact_key=key, kind=ReviewTask.SYSTEM_RECORD_FOLLOWUP,
        assertion_id=statement["assertion_id"], predicate=key.predicate,
        title=f"{key.subject.external_id} says their {key.predicate.replace('_', ' ')} differs from the system of record",
        evidence={"statement": statement, "system_record": system_record}, assertion_ids=ids, created_at=now,
    )


def _lock_task(*, tenant: Tenant, task_id: str) -> ReviewTask:
    """Lock a task in the usual order: its fact key, its prompt, the task. A
    reclassification spans every key of the predicate, which the ledger
    locks itself, in id order, when the policy changes; so only the task."""
    found = ReviewTask.objects.filter(tenant=tenant, pk=task_id).values("fact_key_id", "kind", "prompt_id").first()
    if found is None:
        raise NotFound("no such review task")
    if found["fact_key_id"] and found["kind"] != ReviewTask.RECLASSIFY_PREDICATE:
        _lock_key(found["fact_key_id"])
    if found["prompt_id"]:
        ClarificationPrompt.objects.select_for_update().filter(pk=found["prompt_id"]).first()
    return ReviewTask.objects.select_for_update(of=("self",)).select_related("tenant", "subject", "fact_key",
                                                                           "prompt").get(pk=task_id)


def decide_review_task(*, tenant: Tenant, task_id: str, decision: str, note: str = "", actor: str,
                       choice: Any = None) -> ReviewDecision:
    """Staff decide a review task; the decision goes through the ledger,
    never as a direct edit.

    - ``high_stakes_confirmation``: ``confirm`` records a correction with
      the proposed value (confirming it); ``reject`` retracts the proposal.
    - ``escalated_prompt`` (a conflict): ``choice`` is required: for
      ``confirm`` a candidate's assertion id or ``{"value", "valid_from"}``
      (a correction); for ``reject`` the candidate that is wrong (retracted).
    - ``system_record_followup``: ``confirm`` records the person's value as
      a correction (it stays overruled until the system of record changes;
      the task tells staff to change it); ``reject`` retracts the statement.
    - ``reclassify_predicate``: ``confirm`` registers the predicate as
      ``many`` (a new policy version; its conflicts resolve); ``reject``
      keeps it single-valued and asks the people again, without "both".

    An escalated prompt that is still answerable is closed as answered by
    ``staff:<actor>``. Raises :class:`NotFound`, :class:`InputError`
    (``decision``, ``choice``, ``actor``) and :class:`StateConflict` (task
    already decided: 409 with its state).
    """
    if decision not in ("confirm", "reject"):
        raise InputError("must be 'confirm' or 'reject'", "decision")
    if not isinstance(actor, str) or not actor.strip() or len(actor) > 200:
        raise InputError("must be a non-empty string of at most 200 characters", "actor")
    task_id = parse_uuid(task_id, "task_id")
    with transaction.atomic():
        task = _lock_task(tenant=tenant, task_id=task_id)
        if task.status == ReviewTask.DONE:
            raise StateConflict("this review task is already decided", {
                "task_id": str(task.id), "status": task.status, "decision": task.decision,
                "decided_at": iso(task.decided_at)})
        now = timezone.now()
        outcome = _DECIDERS[task.kind](task=task, decision=decision, actor=actor, choice=choice, now=now)
        task.status = ReviewTask.DONE
        task.decision = decision
        task.decision_note = note or ""
        task.decided_by = actor
        task.decided_at = now
        task.result = outcome.write.as_body() if outcome.write else outcome.policy
        task.save(update_fields=["status", "decision", "decision_note", "decided_by", "decided_at", "result"])
        outcome.task = task
        logger.info("review.decided", extra={"tenant": tenant.slug, "task_id": str(task.id), "kind": task.kind,
                                             "decision": decision})
        return outcome


def _decide_escalation(*, task: ReviewTask, decision: str, actor: str, choice: Any, now: datetime) -> ReviewDecision:
    prompt = task.prompt
    staff = f"staff:{actor}"
    if task.kind == ReviewTask.ESCALATED_PROMPT and decision == "reject":
        wrong = _candidate_id(prompt, choice)
        write = ledger.retract(tenant=task.tenant, assertion_ids=[wrong], actor=staff,
                               reason=f"rejected by staff in review task {task.id}")
        return ReviewDecision(task=task, write=write)  # the ledger's events withdraw or reword the prompt
    plan = _staff_plan(prompt=prompt, kind=task.kind, decision=decision, choice=choice)
    if _answerable(prompt, now):
        answered = _answer(tenant=task.tenant, prompt=prompt, plan=plan, answered_by=staff, now=now,
                           source_id=f"prompt:{prompt.id}", extractor=REVIEW_EXTRACTOR)
        return ReviewDecision(task=task, write=answered.write)
    if prompt.status in (ClarificationPrompt.ANSWERED, ClarificationPrompt.WITHDRAWN):
        raise StateConflict(f"the prompt is already {prompt.status}", prompt_state(prompt, now=now))
    write = _apply(tenant=task.tenant, prompt=prompt, plan=plan, actor=staff,
                   source_id=f"{REVIEW_SOURCE_PREFIX}{task.id}", extractor=REVIEW_EXTRACTOR, now=now)
    return ReviewDecision(task=task, write=write)


def _staff_plan(*, prompt: ClarificationPrompt, kind: str, decision: str, choice: Any) -> _Plan:
    if kind == ReviewTask.HIGH_STAKES_CONFIRMATION:
        if decision == "confirm":
            return _parse_choice(prompt, str(prompt.proposal_assertion_id))
        keep = next((o["assertion_id"] for o in prompt.options if o["kind"] == "keep"), None)
        if keep is not None:
            return _parse_choice(prompt, keep)
        return _Plan(action="kept", retract=[str(prompt.proposal_assertion_id)])
    if choice is None:
        raise InputError("is required: a candidate's assertion id, or {\"value\", \"valid_from\"}", "choice")
    return _parse_choice(prompt, choice)


def _candidate_id(prompt: ClarificationPrompt, choice: Any) -> str:
    """The candidate staff reject: one of the prompt's candidate options."""
    candidates = {o["assertion_id"] for o in prompt.options if o["kind"] == "candidate"}
    if not isinstance(choice, str):
        raise InputError("is required: the assertion id of the candidate that is wrong", "choice")
    chosen = parse_uuid(choice, "choice")
    if chosen not in candidates:
        raise InputError("is not one of this conflict's candidates", "choice")
    return chosen


def _decide_followup(*, task: ReviewTask, decision: str, actor: str, choice: Any, now: datetime) -> ReviewDecision:
    staff = f"staff:{actor}"
    statement = Assertion.objects.filter(tenant=task.tenant, pk=task.assertion_id).select_related("fact_key", "subject").first()
    if statement is None or statement.erased_at is not None:
        raise StateConflict("the statement under review was erased", {"task_id": str(task.id), "status": task.status})
    if decision == "reject":
        return ReviewDecision(task=task, write=ledger.retract(tenant=task.tenant, assertion_ids=[str(statement.id)],
                                                              actor=staff, reason=f"rejected in review task {task.id}"))
    key = statement.fact_key
    data = {
        "subject": statement.subject.external_id, "entity": key.entity, "predicate": key.predicate, "scope": key.scope,
        "value": statement.value, "valid_from": iso(statement.valid_from), "valid_to": iso(statement.valid_to),
        "stated_at": iso(now),
        "source": {"kind": "correction", "id": f"{REVIEW_SOURCE_PREFIX}{task.id}", "extractor": REVIEW_EXTRACTOR,
                   "evidence": "Confirmed by staff; the system of record must be changed to match."},
    }
    return ReviewDecision(task=task, write=ledger.assert_fact(tenant=task.tenant, data=parse_assertion(data, received_at=now),
                                                              actor=staff))


def _decide_reclassification(*, task: ReviewTask, decision: str, actor: str, choice: Any, now: datetime) -> ReviewDecision:
    if decision == "confirm":
        view = policy_view_at(tenant_id=task.tenant_id, predicate=task.predicate, at=now)
        summary = ledger.set_predicate_policy(tenant=task.tenant, predicate=task.predicate, cardinality="many",
                                              stakes=view.stakes, authority=view.authority, ttl_seconds=view.ttl_seconds,
                                              actor=f"staff:{actor}")
        return ReviewDecision(task=task, write=None, policy=summary)
    reopened = 0
    for prompt in reclassification_prompts(task=task, lock=True):
        if prompt.conflict is None or prompt.conflict.status != Conflict.OPEN:
            continue
        prompt.status = ClarificationPrompt.PENDING
        prompt.options = [o for o in prompt.options if o["kind"] != BOTH]
        prompt.answer = None
        prompt.answered_at = None
        prompt.answered_by = ""
        prompt.confirmation = ""
        for name, value in _deadlines(prompt.tenant, now).items():
            setattr(prompt, name, value)
        prompt.save()
        reopened += 1
    return ReviewDecision(task=task, write=None, policy={"predicate": task.predicate, "kept": "one",
                                                         "prompts_reopened": reopened})


_DECIDERS = {
    ReviewTask.HIGH_STAKES_CONFIRMATION: _decide_escalation,
    ReviewTask.ESCALATED_PROMPT: _decide_escalation,
    ReviewTask.SYSTEM_RECORD_FOLLOWUP: _decide_followup,
    ReviewTask.RECLASSIFY_PREDICATE: _decide_reclassification,
}


# --------------------------------------------------------------------------- reacting to the ledger


def schedule_conflict_prompt(*, tenant_id: int, conflict_id: str, stakes: str) -> None:
    """A conflict opened (inside the ledger's transaction): ask for its
    prompt (:func:`request_prompts`). Low stakes never get one (step 6)."""
    if stakes != STAKES_HIGH:
        return
    _request_prompt(PromptToOpen(tenant_id, conflict_id=str(conflict_id)))


def schedule_proposal_prompt(*, tenant_id: int, assertion_id: str) -> None:
    """A proposal appeared (or appeared again): ask for its prompt
    (:func:`request_prompts`)."""
    _request_prompt(PromptToOpen(tenant_id, proposal_assertion_id=str(assertion_id)))


@dataclass(frozen=True)
class PromptToOpen:
    """A prompt a ledger write asks for: a conflict's, or a proposal's."""

    tenant_id: int
    conflict_id: str | None = None
    proposal_assertion_id: str | None = None


_REQUESTS = PromptRequest._meta.db_table


def _request_prompt(request: PromptToOpen) -> None:
    """During a delivery of domain events, keep ``request`` for
    :func:`request_kept_prompts`, which records all of them at once, and
    enqueue one task for them on commit, in the place of the first (as one
    task each used to be: before the outbox deliveries of the same events);
    outside a delivery, ask now."""
    requests = ev.keep("prompt_requests", request)
    if requests is None:
        request_prompts([request])
    elif len(requests) == 1:
        transaction.on_commit(partial(_enqueue_prompts, requests))


def request_kept_prompts(kept: dict) -> None:
    """After a delivery (:func:`facts.events.after_delivery`): record the
    prompts its events asked for, in one round trip."""
    requests = kept.pop("prompt_requests", None)
    if requests:
        _record_requests(requests)


def request_prompts(requests: list[PromptToOpen]) -> None:
    """Record a :class:`PromptRequest` per prompt asked for and open the
    prompts in one worker task after commit (:func:`open_prompts`)."""
    _record_requests(requests)
    transaction.on_commit(partial(_enqueue_prompts, requests))


def _targets(requests: list[PromptToOpen]) -> tuple[dict[str, int], list[tuple[int, str]]]:
    """Each prompt asked for once: ``{conflict id: tenant id}`` and
    ``[(tenant id, proposal assertion id)]``, in the order asked."""
    conflicts = {r.conflict_id: r.tenant_id for r in requests if r.conflict_id is not None}
    proposals = list(dict.fromkeys((r.tenant_id, r.proposal_assertion_id) for r in requests
                                   if r.proposal_assertion_id is not None))
    return conflicts, proposals


def _enqueue_prompts(requests: list[PromptToOpen]) -> None:
    from conflicts import tasks

    conflicts, proposals = _targets(requests)
    enqueue(tasks.open_prompts, kwargs={"conflict_ids": list(conflicts), "proposals": [list(p) for p in proposals]})


def _record_requests(requests: list[PromptToOpen]) -> None:
    """One :class:`PromptRequest` per prompt, in one round trip: a
    conflict's once, a proposal asked for again due again (its
    ``created_at`` renewed, ``done_at`` cleared)."""
    now = timezone.now()
    conflicts, proposals = _targets(requests)
    writes = Writes()
    if conflicts:
        writes.execute(
            f"INSERT INTO {_REQUESTS} (tenant_id, conflict_id, created_at) "
            f"SELECT u.t, u.c, %s FROM unnest(%s::bigint[], %s::uuid[]) AS u(t, c) ORDER BY u.c "
            f"ON CONFLICT (conflict_id) WHERE conflict_id IS NOT NULL DO NOTHING",
            [now, list(conflicts.values()), list(conflicts)])
    if proposals:
        writes.execute(
            f"INSERT INTO {_REQUESTS} (tenant_id, proposal_assertion_id, created_at) "
            f"SELECT u.t, u.a, %s FROM unnest(%s::bigint[], %s::uuid[]) AS u(t, a) ORDER BY u.t, u.a "
            f"ON CONFLICT (tenant_id, proposal_assertion_id) WHERE proposal_assertion_id IS NOT NULL "
            f"DO UPDATE SET created_at = EXCLUDED.created_at, done_at = NULL",
            [now, [t for t, _ in proposals], [a for _, a in proposals]])
    writes.send()


def open_prompts(*, conflict_ids: list[str] = (), proposals: list[list] = ()) -> int:
    """Open the prompts one write asked for: each conflict's
    (:func:`open_conflict_prompt`, each in its own transaction), then the
    ``[tenant id, assertion id]`` proposals' (:func:`open_proposal_prompts`,
    one transaction per tenant). The tenants' webhook endpoints are looked
    up once. Returns how many of them have a prompt."""
    opened = 0
    by_tenant: dict[int, list[str]] = {}
    for tenant_id, assertion_id in proposals:
        by_tenant.setdefault(int(tenant_id), []).append(str(assertion_id))
    with ev.write_scope():
        for conflict_id in conflict_ids:
            opened += open_conflict_prompt(conflict_id=str(conflict_id)) is not None
        for tenant_id, assertion_ids in by_tenant.items():
            opened += sum(p is not None for p in open_proposal_prompts(tenant_id=tenant_id,
                                                                       assertion_ids=assertion_ids).values())
    return opened


def withdraw_prompts(*, conflict_id: str | None = None, tenant_id: int | None = None,
                     proposal_assertion_id: str | None = None, reason: str) -> int:
    """The conflict or proposal was settled some other way (a correction
    from elsewhere, a retraction, a policy change): its open prompt is
    ``withdrawn`` and its escalation task closed. An answered prompt is left
    alone. Returns how many prompts were withdrawn."""
    qs = ClarificationPrompt.objects.filter(status__in=ClarificationPrompt.OPEN_STATUSES)
    if conflict_id is not None:
        qs = qs.filter(conflict_id=conflict_id)
    else:
        qs = qs.filter(tenant_id=tenant_id, proposal_assertion_id=proposal_assertion_id)
    now = timezone.now()
    ids = list(qs.select_for_update().values_list("id", flat=True))
    if not ids:
        return 0
    ClarificationPrompt.objects.filter(pk__in=ids).update(status=ClarificationPrompt.WITHDRAWN, withdrawn_at=now,
                                                          withdrawn_reason=reason[:64])
    _close_tasks(ReviewTask.objects.filter(prompt_id__in=ids, kind__in=_ESCALATION_KINDS, status=ReviewTask.OPEN),
                 now=now, note=f"prompt withdrawn: {reason}")
    logger.info("prompt.withdrawn", extra={"prompts": len(ids), "reason": reason})
    return len(ids)


def refresh_conflict_prompt(*, conflict_id: str) -> None:
    """The candidates of an OPEN conflict changed (a third value tied, one
    was retracted): reword its open prompt from the key's state now."""
    prompt = (ClarificationPrompt.objects.select_for_update(of=("self",)).select_related("conflict__fact_key")
              .filter(conflict_id=conflict_id, status__in=ClarificationPrompt.OPEN_STATUSES).first())
    if prompt is None or prompt.conflict.status != Conflict.OPEN:
        return
    wording = _conflict_wording(prompt.conflict, allow_both=any(o["kind"] == BOTH for o in prompt.options),
                                now=timezone.now())
    if wording is None:
        return
    for name, value in wording.items():
        setattr(prompt, name, value)
    prompt.save(update_fields=list(wording))


def scrub_erased(*, tenant_id: int, subject_id: int, assertion_id: str | None = None) -> None:
    """Right to be forgotten: prompts, review tasks and outbox payloads that
    quote an erased assertion (or anything of an erased subject when
    ``assertion_id`` is ``None``) lose their values and evidence. An open
    prompt whose conflict survives is reworded without the erased claim;
    any other open one is withdrawn."""
    prompts_qs = ClarificationPrompt.objects.filter(tenant_id=tenant_id, subject_id=subject_id)
    tasks_qs = ReviewTask.objects.filter(tenant_id=tenant_id)
    if assertion_id is not None:
        prompts_qs = prompts_qs.filter(assertion_ids__contains=[str(assertion_id)])
        tasks = list(tasks_qs.filter(assertion_ids__contains=[str(assertion_id)]))
    else:
        # A reclassification task can quote several people: match it by the assertions it quotes.
        erased = {str(a) for a in Assertion.objects.filter(subject_id=subject_id).values_list("id", flat=True)}
        tasks = [t for t in tasks_qs.filter(Q(subject_id=subject_id) | Q(kind=ReviewTask.RECLASSIFY_PREDICATE))
                 if t.subject_id == subject_id or erased & set(t.assertion_ids)]
    now = timezone.now()
    for prompt in prompts_qs.select_for_update(of=("self",)).select_related("conflict"):
        if (assertion_id is not None and prompt.status in ClarificationPrompt.OPEN_STATUSES
                and prompt.conflict is not None and prompt.conflict.status == Conflict.OPEN):
            refresh_conflict_prompt(conflict_id=str(prompt.conflict_id))
            prompt.refresh_from_db()
            if str(assertion_id) not in prompt.assertion_ids:
                continue
        if prompt.status in ClarificationPrompt.OPEN_STATUSES:
            prompt.status = ClarificationPrompt.WITHDRAWN
            prompt.withdrawn_at = now
            prompt.withdrawn_reason = "erased"
        prompt.question = "[erased]"
        prompt.options = outbox.redact(prompt.options)
        prompt.answer = outbox.redact(prompt.answer) if prompt.answer else prompt.answer
        prompt.confirmation = ""
        prompt.save()
    for task in tasks:
        ReviewTask.objects.filter(pk=task.pk).update(evidence=outbox.redact(task.evidence),
                                                     result=outbox.redact(task.result) if task.result else None)
    outbox.scrub(tenant_id=tenant_id, subject_id=subject_id, assertion_id=assertion_id)
