"""Forms of the dashboard: what people type, validated; every field has a
label and help in plain words."""
from __future__ import annotations

from datetime import date, datetime, time, timezone

from django import forms

from dashboard.words import SOURCE_KIND_FILTERS


def start_of_day(d: date) -> datetime:
    """00:00 UTC of ``d`` (the dashboard states dates in UTC)."""
    return datetime.combine(d, time.min, tzinfo=timezone.utc)


def end_of_day(d: date) -> datetime:
    """The last microsecond of ``d`` in UTC: "on 3 March" means "as things
    stood at the end of 3 March" (valid for every date, 31 December 9999
    included)."""
    return datetime.combine(d, time.max, tzinfo=timezone.utc)


def _not_after_today(d: date | None, message: str) -> date | None:
    if d is not None and d > datetime.now(timezone.utc).date():
        raise forms.ValidationError(message)
    return d


class FilterForm(forms.Form):
    q = forms.CharField(label="Search your memories", required=False, max_length=200,
                        widget=forms.TextInput(attrs={"type": "search", "placeholder": "e.g. Berlin, painting, job"}))
    kind = forms.ChoiceField(label="Where it came from", required=False,
                             choices=[("", "Any source")] + SOURCE_KIND_FILTERS)
    entity = forms.ChoiceField(label="About", required=False, choices=[("", "Anyone")])
    pending = forms.BooleanField(label="Only what waits for my answer", required=False)

    def __init__(self, *args, entities: list[tuple[str, str]] = (), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["entity"].choices = [("", "Anyone")] + list(entities)


class CorrectionForm(forms.Form):
    value = forms.CharField(label="What is true now", max_length=500,
                            widget=forms.TextInput(attrs={"autocomplete": "off"}))
    since = forms.DateField(label="Since when", widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"),
                            help_text="The day it became true. Before that day, the old answer stays.")

    def clean_since(self) -> date:
        return _not_after_today(self.cleaned_data["since"], "What is true now cannot start after today.")


class RetractForm(forms.Form):
    reason = forms.CharField(label="Why (optional)", required=False, max_length=2000,
                             widget=forms.Textarea(attrs={"rows": 2}),
                             help_text="For example: “that was my sister, not me”.")


class EraseForm(forms.Form):
    confirm = forms.BooleanField(label="Yes, forget this for good", required=True)


class ForgetEverythingForm(forms.Form):
    confirm = forms.BooleanField(label="Yes, forget everything about me. I understand this cannot be undone.",
                                 required=True)


class NeitherForm(forms.Form):
    value = forms.CharField(label="Neither, it is", max_length=500)
    since = forms.DateField(label="Since when (optional)", required=False,
                            widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"))

    def clean_since(self) -> date | None:
        return _not_after_today(self.cleaned_data["since"], "What is true now cannot start after today.")


class TimeTravelForm(forms.Form):
    believed_on = forms.DateField(label="What did the assistant believe on",
                                  widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"),
                                  help_text="What it had learned by the end of that day.")
    about = forms.DateField(label="About which day", widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"),
                            help_text="What it thought was true on that day.")

    def clean_believed_on(self) -> date:
        return _not_after_today(self.cleaned_data["believed_on"],
                                "That day has not come yet: the assistant can only be asked about today or before.")
