"""Clarification prompts, the staff review queue and the outgoing webhook
outbox (the conflicts issue)."""
