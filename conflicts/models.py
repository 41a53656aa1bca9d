"""Clarification prompts, the staff review queue and the outgoing webhook
outbox (the conflicts issue).

No behaviour lives in ``save()``: writes go through ``conflicts/actions.py``
(prompts, review tasks) and ``conflicts/outbox.py`` (endpoints, deliveries).
Every table leads with ``tenant``. The invariants that matter are database
constraints: one prompt per conflict, one prompt per proposal, one prompt
request per conflict or proposal, one escalation task per prompt, one
follow-up per overruled statement, one open reclassification per predicate,
one delivery per (message, endpoint), one attempt row per attempt number.
Datetimes are timezone-aware UTC.
"""
from __future__ import annotations

import uuid

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models import Q

from facts.models import Conflict, FactKey, Subject, Tenant


class ClarificationPrompt(models.Model):
    """A question to the subject (or to staff) that settles an OPEN conflict
    (``kind="conflict"``) or confirms a high-stakes change
    (``kind="proposal"``). DESIGN.md, write rule steps 6 and 7.

    ``options`` is a list of ``{"assertion_id", "value", "evidence",
    "label", "kind", "source", "stated_at"}``; ``kind`` is ``candidate``
    (conflict), ``confirm`` / ``keep`` (proposal), ``neither`` or ``both``.
    ``status``: ``pending`` (waiting for the subject), ``escalated`` (still
    answerable, and in the staff queue), ``answered``, ``expired`` (nobody
    answered before ``expires_at``; the earlier value stays) and
    ``withdrawn`` (the conflict or proposal was settled some other way: a
    correction from elsewhere, a retraction, an erasure).
    """

    KIND_CONFLICT = "conflict"
    KIND_PROPOSAL = "proposal"
    KINDS = [(KIND_CONFLICT, "conflict"), (KIND_PROPOSAL, "proposal")]

    PENDING = "pending"
    ESCALATED = "escalated"
    ANSWERED = "answered"
    EXPIRED = "expired"
    WITHDRAWN = "withdrawn"
    STATUSES = [(s, s) for s in (PENDING, ESCALATED, ANSWERED, EXPIRED, WITHDRAWN)]
    OPEN_STATUSES = (PENDING, ESCALATED)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE)
    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, related_name="prompts")
    fact_key = models.ForeignKey(FactKey, on_delete=models.CASCADE, related_name="prompts")
    conflict = models.ForeignKey(Conflict, on_delete=models.CASCADE, null=True, blank=True, related_name="prompts")
    proposal_assertion_id = models.UUIDField(null=True, blank=True)
    kind = models.CharField(max_length=8, choices=KINDS)
    question = models.TextField()
    options = models.JSONField(encoder=DjangoJSONEncoder, default=list)
    # Every assertion the question quotes: erasing one of them scrubs the prompt.
    assertion_ids = models.JSONField(default=list)
    # The disputed valid time: the answer's correction covers [valid_from, valid_to).
    valid_from = models.DateTimeField()
    valid_to = models.DateTimeField(null=True, blank=True)
    stakes = models.CharField(max_length=4)
    status = models.CharField(max_length=9, choices=STATUSES, default=PENDING)
    created_at = models.DateTimeField()
    asked_at = models.DateTimeField()
    escalate_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    escalated_at = models.DateTimeField(null=True, blank=True)
    expired_at = models.DateTimeField(null=True, blank=True)
    withdrawn_at = models.DateTimeField(null=True, blank=True)
    withdrawn_reason = models.CharField(max_length=64, blank=True)
    answered_at = models.DateTimeField(null=True, blank=True)
    answered_by = models.CharField(max_length=200, blank=True)
    answer = models.JSONField(encoder=DjangoJSONEncoder, null=True, blank=True)
    confirmation = models.TextField(blank=True)
    correction_assertion_id = models.UUIDField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conflict"], condition=Q(conflict__isnull=False),
                                    name="prompt_one_per_conflict"),
            models.UniqueConstraint(fields=["tenant", "proposal_assertion_id"],
                                    condition=Q(proposal_assertion_id__isnull=False), name="prompt_one_per_proposal"),
            models.CheckConstraint(
                condition=(Q(kind="conflict", conflict__isnull=False, proposal_assertion_id__isnull=True)
                           | Q(kind="proposal", conflict__isnull=True, proposal_assertion_id__isnull=False)),
                name="prompt_kind_target",
            ),
            models.CheckConstraint(condition=Q(status__in=["pending", "escalated", "answered", "expired", "withdrawn"]),
                                   name="prompt_status"),
            models.CheckConstraint(condition=~Q(status="answered") | Q(answered_at__isnull=False),
                                   name="prompt_answered_has_time"),
            models.CheckConstraint(condition=Q(expires_at__gt=models.F("created_at")), name="prompt_expiry_after_creation"),
        ]
        indexes = [
            models.Index(fields=["tenant", "subject", "status", "created_at"]),
            models.Index(fields=["status", "escalate_at"]),
            models.Index(fields=["status", "expires_at"]),
        ]


class PromptRequest(models.Model):
    """Work for the prompt-opening task, written in the ledger's transaction
    when a high-stakes conflict or a proposal appears. The task (enqueued on
    commit) marks it done; if the broker was down and the task never ran,
    the sweep finds the undone request. A transactional outbox for our own
    worker, so no prompt is lost and no table has to be scanned for work."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE)
    conflict = models.ForeignKey(Conflict, on_delete=models.CASCADE, null=True, blank=True)
    proposal_assertion_id = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField()
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conflict"], condition=Q(conflict__isnull=False),
                                    name="prompt_request_one_per_conflict"),
            models.UniqueConstraint(fields=["tenant", "proposal_assertion_id"],
                                    condition=Q(proposal_assertion_id__isnull=False),
                                    name="prompt_request_one_per_proposal"),
            models.CheckConstraint(condition=Q(conflict__isnull=False, proposal_assertion_id__isnull=True)
                                   | Q(conflict__isnull=True, proposal_assertion_id__isnull=False),
                                   name="prompt_request_one_target"),
        ]
        indexes = [models.Index(fields=["created_at"], condition=Q(done_at__isnull=True), name="prompt_request_undone")]


class ReviewTask(models.Model):
    """One item of the staff queue.

    Kinds: ``high_stakes_confirmation`` (a proposal prompt nobody answered in
    time: staff confirm or reject the change), ``escalated_prompt`` (a
    conflict prompt nobody answered in time: staff pick a candidate),
    ``system_record_followup`` (a user's statement lost to the system that
    owns the predicate: confirm with the person, then change that system;
    DESIGN.md write rule step 4) and ``reclassify_predicate`` (someone
    answered "both are true": should the predicate be multi-valued?).
    Decisions go through the ledger (a correction, a retraction, a policy
    version), never a direct edit; ``result`` keeps the ledger's answer.
    """

    HIGH_STAKES_CONFIRMATION = "high_stakes_confirmation"
    ESCALATED_PROMPT = "escalated_prompt"
    SYSTEM_RECORD_FOLLOWUP = "system_record_followup"
    RECLASSIFY_PREDICATE = "reclassify_predicate"
    KINDS = [(k, k.replace("_", " ")) for k in (HIGH_STAKES_CONFIRMATION, ESCALATED_PROMPT, SYSTEM_RECORD_FOLLOWUP,
                                                 RECLASSIFY_PREDICATE)]
    OPEN = "open"
    DONE = "done"
    STATUSES = [(OPEN, "open"), (DONE, "done")]

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE)
    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, null=True, blank=True, related_name="review_tasks")
    fact_key = models.ForeignKey(FactKey, on_delete=models.CASCADE, null=True, blank=True, related_name="review_tasks")
    kind = models.CharField(max_length=24, choices=KINDS)
    status = models.CharField(max_length=4, choices=STATUSES, default=OPEN)
    prompt = models.ForeignKey(ClarificationPrompt, on_delete=models.CASCADE, null=True, blank=True,
                               related_name="review_tasks")
    conflict = models.ForeignKey(Conflict, on_delete=models.CASCADE, null=True, blank=True, related_name="review_tasks")
    assertion_id = models.UUIDField(null=True, blank=True)
    predicate = models.CharField(max_length=200, blank=True)
    title = models.CharField(max_length=300)
    evidence = models.JSONField(encoder=DjangoJSONEncoder, default=dict)
    assertion_ids = models.JSONField(default=list)
    created_at = models.DateTimeField()
    decision = models.CharField(max_length=8, blank=True)
    decision_note = models.TextField(blank=True)
    decided_by = models.CharField(max_length=200, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(encoder=DjangoJSONEncoder, null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["prompt"], condition=Q(kind__in=["high_stakes_confirmation", "escalated_prompt"]),
                                    name="review_one_escalation_per_prompt"),
            models.UniqueConstraint(fields=["tenant", "assertion_id"], condition=Q(kind="system_record_followup"),
                                    name="review_one_followup_per_assertion"),
            models.UniqueConstraint(fields=["tenant", "predicate"], condition=Q(kind="reclassify_predicate", status="open"),
                                    name="review_one_open_reclassification"),
            models.CheckConstraint(condition=Q(status__in=["open", "done"]), name="review_status"),
            models.CheckConstraint(condition=Q(decision__in=["", "confirm", "reject", "closed"]), name="review_decision"),
            models.CheckConstraint(condition=Q(status="open", decided_at__isnull=True)
                                   | Q(status="done", decided_at__isnull=False), name="review_done_is_decided"),
            models.CheckConstraint(condition=~Q(kind__in=["high_stakes_confirmation", "escalated_prompt"])
                                   | Q(prompt__isnull=False), name="review_escalation_has_prompt"),
        ]
        indexes = [models.Index(fields=["tenant", "status", "kind", "created_at"])]


class WebhookEndpoint(models.Model):
    """A tenant's callback URL for outgoing webhooks (API.md, "Outgoing
    webhooks"). ``secret`` (``whsec_...``) signs deliveries with Standard
    Webhooks. ``event_types`` empty means all types. A 410 answer disables
    the endpoint; ``DELETE`` marks it deleted (its delivery log stays)."""

    ACTIVE = "active"
    DISABLED = "disabled"
    DELETED = "deleted"
    STATUSES = [(s, s) for s in (ACTIVE, DISABLED, DELETED)]

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="webhook_endpoints")
    url = models.URLField(max_length=2000)
    secret = models.CharField(max_length=128)
    event_types = models.JSONField(default=list)
    status = models.CharField(max_length=8, choices=STATUSES, default=ACTIVE)
    created_at = models.DateTimeField()
    disabled_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(max_length=200, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(status__in=["active", "disabled", "deleted"]),
                                              name="endpoint_status")]
        indexes = [models.Index(fields=["tenant", "status"])]


class OutboxMessage(models.Model):
    """One outgoing event, written in the same transaction as the change
    that caused it. ``id`` is the Standard Webhooks ``webhook-id`` (the
    receiver's idempotency key), the same for every attempt and endpoint.
    ``payload`` is the whole body ``{"type", "timestamp", "data"}``;
    ``assertion_ids`` lets an erasure scrub the values it carries."""

    id = models.CharField(primary_key=True, max_length=40)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE)
    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, null=True, blank=True)
    type = models.CharField(max_length=64)
    payload = models.JSONField(encoder=DjangoJSONEncoder)
    assertion_ids = models.JSONField(default=list)
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["tenant", "subject", "created_at"])]


class Delivery(models.Model):
    """One message to one endpoint, and its state machine: ``pending`` (due
    at ``next_attempt_at``), ``sending`` (claimed by a worker until
    ``lease_until``), ``delivered`` (a 2xx), ``failed`` (410, or attempts
    exhausted), ``cancelled`` (the endpoint was deleted or disabled)."""

    PENDING = "pending"
    SENDING = "sending"
    DELIVERED = "delivered"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STATUSES = [(s, s) for s in (PENDING, SENDING, DELIVERED, FAILED, CANCELLED)]

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE)
    message = models.ForeignKey(OutboxMessage, on_delete=models.CASCADE, related_name="deliveries")
    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    status = models.CharField(max_length=9, choices=STATUSES, default=PENDING)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField()
    next_attempt_at = models.DateTimeField()
    lease_until = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["message", "endpoint"], name="delivery_one_per_endpoint"),
            models.CheckConstraint(condition=Q(status__in=["pending", "sending", "delivered", "failed", "cancelled"]),
                                   name="delivery_status"),
            models.CheckConstraint(condition=~Q(status="sending") | Q(lease_until__isnull=False),
                                   name="delivery_sending_has_lease"),
        ]
        indexes = [
            models.Index(fields=["status", "next_attempt_at"]),
            models.Index(fields=["endpoint", "-created_at"]),
        ]


class DeliveryAttempt(models.Model):
    """The delivery log: one row per HTTP attempt, with the response code
    (``None`` when no response came: timeout, refused connection)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE)
    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.PositiveIntegerField()
    at = models.DateTimeField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    duration_ms = models.PositiveIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["delivery", "number"], name="attempt_unique_number")]
