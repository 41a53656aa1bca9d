"""Revocation by extractor on DyKnow-sized data (issue 5, "Must show"):
about 3,000 assertions over 1,000 fact keys, a third of them from one
faulty extractor. The revocation runs in one console request, and its undo
restores exactly the current view we started from: the content digest of
every key's timeline (``facts.resolve.timeline_digest`` without ids, so the
restored copies, which are new rows recorded now, compare by content)."""
from __future__ import annotations

import hashlib
import time
from datetime import datetime, timedelta, timezone

import pytest
from django.utils import timezone as dj_timezone

from console.models import Revocation, StaffMembership
from facts import ledger
from facts.claims import live_claims_by_key
from facts.inputs import parse_assertion
from facts.models import Assertion, FactKey
from facts.policy import PolicyCache
from facts.resolve import resolve, timeline_digest
from tests.console.factories import MembershipFactory, client_for

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

PEOPLE = 300
FAULTY = "wiki-extractor@0.3"
START = datetime(2000, 1, 1, tzinfo=timezone.utc)


def dyknow_like(tenant) -> int:
    """Per person: an office held by three people in turn, two cities, a
    party, languages and a note; every third claim from the faulty
    extractor. Written through the ledger (the write rule runs in full)."""
    now = dj_timezone.now()
    n = 0
    for p in range(PEOPLE):
        claims = [("position_held", f"office-{p}-{v}", START + timedelta(days=700 * v)) for v in range(3)]
        claims += [("city_of_residence", f"city-{p}-{v}", START + timedelta(days=1000 * v)) for v in range(2)]
        claims += [("member_of_party", f"party-{p % 7}", START), ("speaks_language", "Italian", START),
                   ("speaks_language", f"lang-{p % 5}", START), ("note", f"born in {1900 + p}", START),
                   ("employer", f"org-{p % 11}", START + timedelta(days=300))]
        for i, (predicate, value, valid_from) in enumerate(claims):
            extractor = FAULTY if (p + i) % 3 == 0 else "wiki-extractor@1.0"
            data = {"subject": f"person-{p}", "predicate": predicate, "value": value,
                    "valid_from": valid_from.isoformat().replace("+00:00", "Z"),
                    "source": {"kind": "user_document", "id": f"wiki:{p}:{i}", "extractor": extractor}}
            ledger.assert_fact(tenant=tenant, data=parse_assertion(data, received_at=now), actor="importer")
            n += 1
    return n


def current_view_digest(tenant) -> str:
    """One hash over every key's timeline as known now (content only)."""
    now = dj_timezone.now()
    claims = live_claims_by_key(Assertion.objects.filter(tenant=tenant), known_at=now)
    policies = PolicyCache(tenant_id=tenant.id, at=now)
    rows = sorted(
        f"{k.subject.external_id}|{k.entity}|{k.predicate}|{k.scope}|"
        f"{timeline_digest(resolve(claims.get(k.id, []), policies.get(k.predicate)).segments)}"
        for k in FactKey.objects.filter(tenant=tenant).select_related("subject")
    )
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()


def test_revoke_by_extractor_in_one_request_and_undo_restores_the_exact_view(agent):
    tenant = agent.tenant
    written = dyknow_like(tenant)
    admin = client_for(MembershipFactory(tenant=tenant, role=StaffMembership.ADMIN).user)
    faulty = Assertion.objects.filter(tenant=tenant, extractor=FAULTY).count()
    original = current_view_digest(tenant)

    started = time.monotonic()
    preview = admin.get(f"/console/{tenant.slug}/revocations/", {"extractor": FAULTY})
    previewed = time.monotonic()
    revoked = admin.post(f"/console/{tenant.slug}/revocations/revoke",
                         {"extractor": FAULTY, "reason": "wrong dates", "expected": faulty})
    revoked_at = time.monotonic()
    batch = Revocation.objects.get(tenant=tenant)
    during = current_view_digest(tenant)
    undone = admin.post(f"/console/{tenant.slug}/revocations/{batch.id}/undo")
    undone_at = time.monotonic()
    print(f"\n{written} assertions, {faulty} revoked: preview {previewed - started:.1f}s, "
          f"revoke {revoked_at - previewed:.1f}s, undo {undone_at - revoked_at:.1f}s")

    assert written >= 2500
    assert (preview.status_code, revoked.status_code, undone.status_code) == (200, 302, 302)
    assert preview.context["preview"].count == faulty
    assert batch.count == faulty
    assert during != original
    assert current_view_digest(tenant) == original
    assert Assertion.objects.filter(tenant=tenant, extractor=FAULTY, retracted_at__isnull=False).count() == faulty
    assert Assertion.objects.filter(tenant=tenant, extractor=FAULTY, retracted_at__isnull=True).count() == faulty
