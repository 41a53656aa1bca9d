"""Inbound webhooks (API.md, "Authentication"): signed events reach the
ledger; every refusal writes nothing."""
from tests.factories import assertion_data


def test_signed_assertion_is_created(agent):
    body = agent.assert_fact(assertion_data(value="Berlin", valid_from="2026-03-01T00:00:00Z"))

    assert body["outcome"] == "created"
    facts = agent.get("/subjects/u-1/facts")["facts"]
    assert [f["value"] for f in facts] == ["Berlin"]
