"""factory-boy factories and payload builders shared by the tests."""
from __future__ import annotations

import itertools

import factory

from facts.models import Subject, Tenant

_seq = itertools.count()


class TenantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tenant

    slug = factory.Sequence(lambda n: f"tenant-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())


class SubjectFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Subject

    tenant = factory.SubFactory(TenantFactory)
    external_id = factory.Sequence(lambda n: f"u-{n}")


def assertion_data(*, subject: str = "u-1", predicate: str = "city_of_residence", value="Berlin",
                   kind: str = "user_statement", source_id: str | None = None, **extra) -> dict:
    """A ``fact.asserted`` ``data`` payload as API.md shows it."""
    data = {
        "subject": subject,
        "predicate": predicate,
        "value": value,
        "source": {"kind": kind, "id": source_id or f"src-{next(_seq)}", "evidence": f"said {value}"},
    }
    data.update(extra)
    return data
