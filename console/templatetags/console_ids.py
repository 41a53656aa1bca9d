"""Ids on console pages: short, yet telling records apart.

Assertion ids are UUIDv7 (:func:`facts.models.new_assertion_id`): their
first characters are a timestamp, the same for every row written in the
same minute, so a prefix names nothing. The last 12 hex characters (the
final group) are random in UUIDv7 and UUIDv4 alike: that is the part shown,
with the full id in the ``title``.
"""
from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

register = template.Library()

TAIL = 12


def id_tail(value: Any) -> str:
    """The last 12 hex characters of a UUID (a :class:`uuid.UUID` or its
    text), e.g. ``"3f9a0c61b2d4"``."""
    return str(value)[-TAIL:]


@register.simple_tag
def short_id(value: Any, css_class: str = "") -> SafeString:
    """``<code class="id" title="<full id>">…<last 12></code>``, with
    ``css_class`` added if given (``.id`` keeps it on one line)."""
    full = str(value)
    return format_html('<code class="{}" title="{}">…{}</code>', f"id {css_class}".strip(), full, id_tail(full))
