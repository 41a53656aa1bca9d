"""The ledger's data: tenants, subjects, predicate policy, assertions, events,
the current-view projection. No behaviour lives in ``save()``: writes go
through ``facts/ledger.py``.

Every table leads with ``tenant`` so the store can be distributed by tenant.
Datetimes are timezone-aware UTC.

Indexes: every index is one more page to dirty on each insert, so a foreign
key keeps its own index only when no composite index leads with the same
column (``db_index=False`` otherwise). ``tenant`` is the leading column of a
composite on the hot tables. ``subject`` keeps its single-column index:
composites lead with ``tenant``, and erasure, subject-only reads and the
cascades of a deleted subject filter on ``subject_id`` alone.
"""
from __future__ import annotations

import uuid

import uuid6
from django.conf import settings
from django.db import models
from django.db.models import Q

from facts.resolve import SOURCE_KINDS

SOURCE_KIND_CHOICES = [(k, k.replace("_", " ")) for k in SOURCE_KINDS]


def new_assertion_id() -> uuid.UUID:
    """A fresh assertion id: a UUIDv7 (RFC 9562), whose first 48 bits are the
    Unix time in milliseconds, so ids made later sort later and primary-key
    inserts append to the index's right edge instead of dirtying a random
    leaf page each. Within one process ids are strictly increasing: when the
    clock has not moved on (or went back) the last millisecond is bumped by
    one, so a burst of ids runs a little ahead of the clock.

    Only the index layout uses the order: ids are opaque, nothing may compare
    them for meaning (resolution orders claims by content, never by id).
    Returned as a plain :class:`uuid.UUID`.
    """
    return uuid.UUID(int=uuid6.uuid7().int)


class Tenant(models.Model):
    """One agent backend / organisation (DESIGN.md, vocabulary)."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # conflicts issue: unanswered prompts go to staff after this many seconds.
    prompt_escalation_seconds = models.PositiveIntegerField(default=24 * 3600)
    prompt_expiry_seconds = models.PositiveIntegerField(default=14 * 24 * 3600)

    def __str__(self) -> str:
        return self.slug


class ApiKey(models.Model):
    """A bearer key for ``/api/v1``. Only the SHA-256 of the key is stored."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100, default="default")
    prefix = models.CharField(max_length=16)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.tenant.slug}:{self.prefix}…"


class WebhookSecret(models.Model):
    """An inbound webhook signing secret (``whsec_...``). During rotation the
    old secret stays valid until ``expires_at``."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="webhook_secrets")
    secret = models.CharField(max_length=128)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)


class SourceRanking(models.Model):
    """A tenant's source ranking, versioned over transaction time: the row
    with the latest ``recorded_at`` at or before T is the ranking at T."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="source_rankings")
    ranking = models.JSONField()
    recorded_at = models.DateTimeField()
    recorded_by = models.CharField(max_length=200, blank=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "-recorded_at"])]


class PredicatePolicy(models.Model):
    """One version of a predicate's policy (DESIGN.md, "Predicate policy").

    Versioned over transaction time: the row with the latest ``recorded_at``
    at or before T is the policy at T. ``classified`` false marks a predicate
    admitted without registration (``many``, ``low``), listed for staff.
    """

    CARDINALITIES = [("one", "one"), ("many", "many")]
    STAKES = [("low", "low"), ("high", "high")]
    AUTHORITIES = [("user", "user"), ("system_record", "system record")]

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="predicate_policies")
    predicate = models.CharField(max_length=200)
    cardinality = models.CharField(max_length=4, choices=CARDINALITIES)
    stakes = models.CharField(max_length=4, choices=STAKES)
    authority = models.CharField(max_length=16, choices=AUTHORITIES, default="user")
    ttl_seconds = models.PositiveIntegerField(null=True, blank=True)
    classified = models.BooleanField(default=True)
    recorded_at = models.DateTimeField()
    recorded_by = models.CharField(max_length=200, blank=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "predicate", "-recorded_at"])]
        constraints = [
            models.CheckConstraint(condition=Q(ttl_seconds__isnull=True) | Q(ttl_seconds__gt=0), name="policy_ttl_positive"),
        ]


class Subject(models.Model):
    """The person whose memory it is: the access boundary."""

    # Indexed by the (tenant, external_id) constraint.
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="subjects", db_index=False)
    external_id = models.CharField(max_length=200)
    display_name = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    erased_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "external_id"], name="subject_unique_external_id")]

    def __str__(self) -> str:
        return self.display_name or self.external_id


# The high-volume rows the ledger writes in bulk (fact keys, assertions,
# events, projection rows, receipts) keep no database constraint on their
# tenant, and those with a fact key none on their subject: the chain row ->
# fact key -> subject -> tenant checks each link once. Each dropped check
# was a lookup per row at commit (a third of a 500-event batch's commit)
# and a key-share lock on the one tenant row every concurrent writer
# shares. Deletion still cascades (Django does it).
UNCHECKED = {"db_constraint": False}


class FactKey(models.Model):
    """(tenant, subject, entity, predicate, scope): what can conflict with
    what. Its row is the lock that serialises writes to the key."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, db_index=False, **UNCHECKED)  # leads fact_key_unique
    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, related_name="fact_keys")
    entity = models.CharField(max_length=200)
    predicate = models.CharField(max_length=200)
    scope_kind = models.CharField(max_length=16)
    scope_key = models.CharField(max_length=200, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "subject", "entity", "predicate", "scope_kind", "scope_key"], name="fact_key_unique"
            )
        ]
        indexes = [models.Index(fields=["tenant", "predicate"])]

    @property
    def scope(self) -> str:
        return self.scope_kind if self.scope_kind == "global" else f"{self.scope_kind}:{self.scope_key}"



class Assertion(models.Model):
    """One immutable claim as received (DESIGN.md, "assertion").

    The payload columns never change after insert. Lifecycle columns record
    transaction-time events: ``retracted_at`` (the claim was never true; the
    row stays queryable) and ``erased_at`` (value and evidence destroyed, the
    row stays as a tombstone without personal data).
    """

    id = models.UUIDField(primary_key=True, default=new_assertion_id, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, db_index=False, **UNCHECKED)
    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, related_name="assertions", **UNCHECKED)
    fact_key = models.ForeignKey(FactKey, on_delete=models.CASCADE, related_name="assertions", db_index=False)
    value = models.JSONField(null=True)
    value_key = models.TextField()
    valid_from = models.DateTimeField()
    valid_to = models.DateTimeField(null=True, blank=True)
    valid_from_precision = models.CharField(max_length=8, default="second")
    stated_at = models.DateTimeField()
    recorded_at = models.DateTimeField()
    source_kind = models.CharField(max_length=20, choices=SOURCE_KIND_CHOICES)
    source_id = models.CharField(max_length=300)
    extractor = models.CharField(max_length=200, blank=True)
    confidence = models.FloatField(null=True, blank=True)
    evidence = models.TextField(blank=True)
    content_hash = models.CharField(max_length=64)
    payload_hash = models.CharField(max_length=64)
    actor = models.CharField(max_length=200, blank=True)
    retracted_at = models.DateTimeField(null=True, blank=True)
    retraction_reason = models.TextField(blank=True)
    retracted_by = models.CharField(max_length=200, blank=True)
    revocation_batch = models.UUIDField(null=True, blank=True)
    erased_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(valid_to__isnull=True) | Q(valid_to__gt=models.F("valid_from")), name="assertion_valid_interval"
            ),
            models.CheckConstraint(condition=Q(source_kind__in=SOURCE_KINDS), name="assertion_source_kind"),
            models.UniqueConstraint(
                fields=["tenant", "payload_hash"], condition=Q(erased_at__isnull=True), name="assertion_unique_payload"
            ),
        ]
        indexes = [
            # Also serves the fact_key foreign key. Not partial on erased_at:
            # a key's history (facts.queries.key_versions) reads tombstones.
            models.Index(fields=["fact_key", "recorded_at"]),
            models.Index(fields=["tenant", "subject", "recorded_at"]),
            models.Index(fields=["tenant", "source_id"]),
            models.Index(fields=["tenant", "extractor", "recorded_at"]),
            # Partial: only a console revocation sets the batch, so the
            # rows every write adds stay out of this index.
            models.Index(fields=["tenant", "revocation_batch"], condition=Q(revocation_batch__isnull=False),
                         name="assertion_revocation_batch"),
        ]


class Event(models.Model):
    """The append-only event log (write rule step 8). Holds ids, rules and
    hashes, never values, so erasure leaves it free of personal data."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, db_index=False, **UNCHECKED)
    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, null=True, related_name="events", db_index=False)
    fact_key = models.ForeignKey(FactKey, on_delete=models.CASCADE, null=True, db_index=False)
    assertion_id = models.UUIDField(null=True)
    type = models.CharField(max_length=64)
    rule = models.CharField(max_length=64, blank=True)
    actor = models.CharField(max_length=200, blank=True)
    before = models.JSONField(default=list)
    after = models.JSONField(default=list)
    payload_hash = models.CharField(max_length=64, blank=True)
    data = models.JSONField(default=dict)
    at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "subject", "at"]),
            # Also serves the subject foreign key; in id order for a
            # person's newest activity (dashboard.queries.activity), which a
            # batch import, all of one ``at``, would otherwise sort whole.
            models.Index(fields=["subject", "id"], name="event_subject_newest"),
            models.Index(fields=["fact_key", "at"]),  # also serves the fact_key foreign key
            models.Index(fields=["assertion_id"]),
            models.Index(fields=["tenant", "type", "at"]),
        ]


class Conflict(models.Model):
    """Two or more values tied at the highest rank on one single-valued key
    from one valid time (write rule step 6). ``OPEN`` while the tie stands on
    a high-stakes predicate; a low-stakes tie is recorded already RESOLVED by
    rule. Kept in ``facts`` because reads report ``conflict_id``; prompts and
    review live in ``conflicts/``."""

    OPEN = "OPEN"
    RESOLVED = "RESOLVED"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, db_index=False)
    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, related_name="conflicts")
    fact_key = models.ForeignKey(FactKey, on_delete=models.CASCADE, related_name="conflicts")
    valid_from = models.DateTimeField()
    status = models.CharField(max_length=8, choices=[(OPEN, OPEN), (RESOLVED, RESOLVED)])
    stakes = models.CharField(max_length=4)
    candidate_ids = models.JSONField(default=list)
    opened_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolution_rule = models.CharField(max_length=64, blank=True)
    resolved_by = models.CharField(max_length=200, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["fact_key", "valid_from"], condition=Q(status="OPEN"), name="conflict_one_open_per_tie"
            )
        ]
        indexes = [models.Index(fields=["tenant", "status", "opened_at"])]


class CurrentFact(models.Model):
    """The current-view projection: the timeline of every key as known now.

    One row per resolved segment (``status`` ``value`` or ``conflict``) plus
    one per pending high-stakes proposal (``proposed``). Facts-now is the
    rows whose valid interval contains now. Rebuilt from the log on demand;
    checked by ``manage.py reconcile``.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, db_index=False, **UNCHECKED)
    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, related_name="current_facts", **UNCHECKED)
    fact_key = models.ForeignKey(FactKey, on_delete=models.CASCADE, related_name="current_facts")
    entity = models.CharField(max_length=200)
    predicate = models.CharField(max_length=200)
    scope_kind = models.CharField(max_length=16)
    scope_key = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=10)
    value = models.JSONField(null=True)
    value_key = models.TextField(blank=True)
    valid_from = models.DateTimeField()
    valid_to = models.DateTimeField(null=True)
    asserted_valid_to = models.DateTimeField(null=True)
    assertion_id = models.UUIDField(null=True)
    stated_at = models.DateTimeField(null=True)
    recorded_at = models.DateTimeField(null=True)
    source = models.JSONField(default=dict)
    sources = models.JSONField(default=list)
    candidates = models.JSONField(default=list)
    rule = models.CharField(max_length=64)
    conflict_id = models.UUIDField(null=True)

    class Meta:
        # (fact_key) is the foreign key's own index.
        indexes = [models.Index(fields=["tenant", "subject", "valid_from"])]


class WebhookReceipt(models.Model):
    """The first response to an idempotency key (inbound ``webhook-id`` or a
    batch event's ``id``): a replay gets it again, nothing written twice."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, db_index=False, **UNCHECKED)
    webhook_id = models.CharField(max_length=300)
    status_code = models.PositiveSmallIntegerField()
    response = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "webhook_id"], name="receipt_unique_webhook_id")]


class LoginLink(models.Model):
    """A one-time sign-in link to a subject's dashboard. Only the SHA-256 of
    the token is stored; ``used_at`` makes it single-use."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE)
    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, related_name="login_links")
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)


class SubjectAccount(models.Model):
    """Links an end-user Django account to exactly one subject of one tenant."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="subject_account")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE)
    subject = models.OneToOneField(Subject, on_delete=models.CASCADE, related_name="account")
