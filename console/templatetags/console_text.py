"""Text on console pages: long identifiers that wrap between their words."""
from __future__ import annotations

import re
from typing import Any

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

_SEPARATOR = re.compile(r"([_.:-])")


@register.filter
def breakable(value: Any) -> SafeString:
    """``value`` escaped, with a line-break opportunity (``<wbr>``) after
    each ``_ . : -``, the separators a predicate name may hold
    (:func:`facts.inputs.parse_name`): ``billing_address`` wraps as
    ``billing_`` / ``address``, never inside a word."""
    return mark_safe(_SEPARATOR.sub(r"\1<wbr>", escape(value)))
