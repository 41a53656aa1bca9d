"""Factories and payload builders for the conflicts tests."""
from __future__ import annotations

import factory
from django.utils import timezone

from conflicts.models import WebhookEndpoint
from facts.tenants import new_webhook_secret
from tests.factories import TenantFactory, assertion_data

ALTE = "Alte Str. 1, Berlin"
NEUE = "Neue Str. 2, Munich"


class EndpointFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = WebhookEndpoint

    tenant = factory.SubFactory(TenantFactory)
    url = "http://127.0.0.1:9/hook"
    secret = factory.LazyFunction(new_webhook_secret)
    event_types = factory.LazyFunction(list)
    created_at = factory.LazyFunction(timezone.now)


def tie(*, subject: str = "u-1", predicate: str = "billing_address", values=(ALTE, NEUE),
        valid_from: str = "2026-03-01T00:00:00Z", stated=("2026-03-03T10:00:00Z", "2026-11-22T10:00:00Z"),
        kind: str = "user_statement") -> list[dict]:
    """Assertions that tie (write rule step 6): same rank, same start,
    different values, each stated on its own day."""
    return [
        assertion_data(subject=subject, predicate=predicate, value=value, kind=kind, valid_from=valid_from,
                       stated_at=stated_at, source_id=f"msg-{predicate}-{i}")
        for i, (value, stated_at) in enumerate(zip(values, stated))
    ]


def change(*, subject: str = "u-1", predicate: str = "payment_method", old="card ending 1111",
           new="card ending 2222", old_from: str = "2026-03-01T00:00:00Z",
           new_from: str = "2026-06-01T00:00:00Z") -> list[dict]:
    """A value, then a later change from the same rank: on a high-stakes
    predicate the change is a proposal (write rule step 7)."""
    return [
        assertion_data(subject=subject, predicate=predicate, value=old, valid_from=old_from, source_id=f"{predicate}-old"),
        assertion_data(subject=subject, predicate=predicate, value=new, valid_from=new_from, source_id=f"{predicate}-new"),
    ]
