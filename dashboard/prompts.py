"""Pending questions on the dashboard, through the conflicts app's interface
(``conflicts.queries.pending_prompts``, ``conflicts.actions.answer_prompt``).

The dashboard only renders and forwards: the conflicts app owns prompts and
writes the answer back through the ledger. While that app does not provide
the interface, the person simply has no questions.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from dashboard.words import value_text
from facts.errors import NotFound
from facts.models import Subject


def _module(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def available() -> bool:
    """Whether the conflicts app provides prompts."""
    return all(_module(m) is not None for m in ("conflicts.queries", "conflicts.actions")) and hasattr(
        _module("conflicts.models"), "ClarificationPrompt")


@dataclass(frozen=True)
class Option:
    choice: str
    label: str
    evidence: str


@dataclass(frozen=True)
class Question:
    id: Any
    kind: str
    text: str
    options: list[Option]
    stakes: str
    created_at: Any
    expires_at: Any
    allows_both: bool
    allows_neither: bool


ANSWER_KINDS = ("candidate", "confirm", "keep")


def _question(prompt) -> Question:
    """A prompt as the page shows it. Options of kind ``candidate``,
    ``confirm`` or ``keep`` become one-click answers; ``both`` and
    ``neither`` (when offered) become their own controls."""
    raw = prompt.options or []
    kinds = {o.get("kind", "candidate") for o in raw}
    options = [Option(str(o.get("assertion_id")), o.get("label") or value_text(o.get("value")), o.get("evidence") or "")
               for o in raw if o.get("kind", "candidate") in ANSWER_KINDS and o.get("assertion_id")]
    return Question(prompt.id, prompt.kind, prompt.question, options, prompt.stakes, prompt.created_at,
                    prompt.expires_at, allows_both="both" in kinds, allows_neither="neither" in kinds)


def pending_questions(*, subject: Subject) -> list[Question]:
    """The person's pending questions, oldest first (one query)."""
    if not available():
        return []
    from conflicts.queries import pending_prompts

    return [_question(p) for p in pending_prompts(subject=subject)]


def owned_prompt(*, subject: Subject, prompt_id: Any):
    """The subject's prompt with this id, in any state. Raises
    :class:`NotFound` for anyone else's id (or without the conflicts app)."""
    if not available():
        raise NotFound("no such question")
    from conflicts.models import ClarificationPrompt

    prompt = ClarificationPrompt.objects.filter(tenant_id=subject.tenant_id, subject=subject, id=prompt_id).first()
    if prompt is None:
        raise NotFound("no such question")
    return prompt


def answer_question(*, subject: Subject, prompt_id: Any, choice: Any, answered_by: str) -> str:
    """Answer one of the person's questions; returns the assistant's
    confirmation in plain words. ``choice`` is an assertion id string,
    ``{"value", "valid_from"}`` ("neither, it is …") or ``"both"``.
    Raises :class:`NotFound` (not theirs) and, from the conflicts app,
    :class:`~facts.errors.StateConflict` (answered already, expired)."""
    prompt = owned_prompt(subject=subject, prompt_id=prompt_id)
    from conflicts.actions import answer_prompt

    result = answer_prompt(tenant=subject.tenant, prompt_id=prompt.id, choice=choice, answered_by=answered_by)
    return getattr(result, "confirmation", "") or "Thank you, your answer is recorded."


def export_prompts(*, subject: Subject) -> list[dict]:
    """Every question asked of the person, for "Download my data"."""
    if not available():
        return []
    from conflicts.models import ClarificationPrompt
    from facts.models import Assertion

    prompts = list(ClarificationPrompt.objects.filter(subject=subject).order_by("created_at"))
    named = {str(o.get("assertion_id")) for p in prompts for o in (p.options or []) if o.get("assertion_id")}
    erased = {str(i) for i in Assertion.objects.filter(tenant_id=subject.tenant_id, subject=subject, id__in=named,
                                                        erased_at__isnull=False).values_list("id", flat=True)}
    out = []
    for p in prompts:
        touches_erased = any(str(o.get("assertion_id")) in erased for o in (p.options or []))
        options = [{"assertion_id": o.get("assertion_id"), "value": None, "evidence": None, "label": None}
                   if touches_erased else o for o in (p.options or [])]
        out.append({"prompt_id": str(p.id), "kind": p.kind, "stakes": p.stakes, "status": p.status,
                    "question": "(about a memory you asked to forget)" if touches_erased else p.question,
                    "options": options, "created_at": p.created_at.isoformat() if p.created_at else None,
                    "expires_at": p.expires_at.isoformat() if p.expires_at else None})
    return out
