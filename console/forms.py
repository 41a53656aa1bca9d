"""Console forms: validate what staff type before it reaches services."""
from __future__ import annotations

from datetime import datetime, time, timezone

from django import forms

from conflicts.models import Delivery
from facts.inputs import InputError, parse_name
from facts.models import SOURCE_KIND_CHOICES
from facts.resolve import SOURCE_KINDS


class SearchForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Find a person",
                        widget=forms.TextInput(attrs={"placeholder": "external id, name, or a value they hold",
                                                      "type": "search", "autofocus": True}))


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("confirm", "Confirm"), ("reject", "Reject")])
    note = forms.CharField(max_length=2000, label="Note for the record (required)",
                           error_messages={"required": "Write a note for the record: why you decided this. "
                                                       "Nothing was recorded."},
                           widget=forms.Textarea(attrs={"rows": 2}))
    choice = forms.CharField(required=False, max_length=100)


def _utc(d) -> datetime | None:
    return datetime.combine(d, time.min, tzinfo=timezone.utc) if d else None


class SelectionForm(forms.Form):
    extractor = forms.CharField(required=False, max_length=200,
                                widget=forms.TextInput(attrs={"placeholder": "e.g. chat-extractor@2.3"}))
    source_kind = forms.ChoiceField(required=False, choices=[("", "any")] + SOURCE_KIND_CHOICES, label="Source kind")
    source_id_prefix = forms.CharField(required=False, max_length=300, label="Source id starts with")
    recorded_from = forms.DateField(required=False, label="Recorded from (UTC)", widget=forms.DateInput(attrs={"type": "date"}))
    recorded_to = forms.DateField(required=False, label="Recorded before (UTC)", widget=forms.DateInput(attrs={"type": "date"}))

    def clean(self):
        data = super().clean()
        if not any(data.get(f) for f in ("extractor", "source_kind", "source_id_prefix", "recorded_from", "recorded_to")):
            raise forms.ValidationError("Choose at least one criterion: a revocation never selects everything.")
        if data.get("recorded_from") and data.get("recorded_to") and data["recorded_to"] <= data["recorded_from"]:
            self.add_error("recorded_to", "Must be after the start of the window.")
        return data

    def selection(self):
        from console.services import Selection

        d = self.cleaned_data
        return Selection(extractor=d["extractor"].strip(), source_kind=d["source_kind"],
                         source_id_prefix=d["source_id_prefix"].strip(), recorded_from=_utc(d["recorded_from"]),
                         recorded_to=_utc(d["recorded_to"]))


class RevokeForm(SelectionForm):
    reason = forms.CharField(max_length=500, label="Why (kept with every retraction)")
    expected = forms.IntegerField(min_value=1, widget=forms.HiddenInput)


def validate_predicate_name(value: str) -> None:
    """The API's rule for a predicate name (:func:`facts.inputs.parse_name`,
    as ``PUT /api/v1/predicates/<name>`` applies it), in its words: the
    console takes exactly the names the API takes."""
    try:
        parse_name(value, "predicate")
    except InputError as exc:
        raise forms.ValidationError(exc.detail, code="invalid") from None


class PolicyForm(forms.Form):
    predicate = forms.CharField(strip=False, validators=[validate_predicate_name],
                                widget=forms.TextInput(attrs={"maxlength": 200}))
    cardinality = forms.ChoiceField(choices=[("one", "one value"), ("many", "many values")])
    stakes = forms.ChoiceField(choices=[("low", "low"), ("high", "high: confirm changes")])
    authority = forms.ChoiceField(choices=[("user", "the user"), ("system_record", "system of record")])
    ttl_seconds = forms.IntegerField(required=False, min_value=1, max_value=2**31 - 1, label="TTL (seconds)")


class RankingForm(forms.Form):
    """The five source kinds, highest rank first, each exactly once."""

    def __init__(self, *args, initial_ranking=(), **kwargs):
        super().__init__(*args, **kwargs)
        for i in range(len(SOURCE_KINDS)):
            self.fields[f"rank_{i}"] = forms.ChoiceField(
                choices=SOURCE_KIND_CHOICES, label=f"{i + 1}.",
                initial=initial_ranking[i] if i < len(initial_ranking) else None)

    def clean(self):
        data = super().clean()
        ranking = [data.get(f"rank_{i}") for i in range(len(SOURCE_KINDS))]
        if sorted(r or "" for r in ranking) != sorted(SOURCE_KINDS):
            raise forms.ValidationError("Each source kind must appear exactly once.")
        data["ranking"] = ranking
        return data


class RotateForm(forms.Form):
    overlap_hours = forms.IntegerField(min_value=0, max_value=24 * 30, initial=24,
                                       label="Keep the old secret valid for (hours)")


class DeliveryFilterForm(forms.Form):
    status = forms.ChoiceField(required=False, choices=[("", "any status")] + Delivery.STATUSES)
    event_type = forms.CharField(required=False, max_length=64, label="Event type")
    endpoint = forms.UUIDField(required=False)


class KeyForm(forms.Form):
    name = forms.CharField(max_length=100, label="Name", widget=forms.TextInput(attrs={"placeholder": "e.g. production"}))


class AuditFilterForm(forms.Form):
    actor = forms.CharField(required=False, max_length=200)
    action = forms.CharField(required=False, max_length=100)
    role = forms.ChoiceField(required=False, choices=[("", "any role"), ("agent", "support agent"),
                                                      ("admin", "tenant admin"), ("end_user", "end user"),
                                                      ("superuser", "superuser")])
    since = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}), label="Before")
