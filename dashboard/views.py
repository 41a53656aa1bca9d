"""The end-user dashboard's pages (issue 4). Thin views: reads from
``dashboard/queries.py``, writes through ``dashboard/actions.py`` (the
ledger) and ``dashboard/prompts.py`` (the conflicts app). One template per
page; htmx requests get a named partial."""
from __future__ import annotations


from functools import wraps

from django.contrib import messages
from django.contrib.auth import login, logout
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console import audit
from dashboard import accounts, actions, prompts, queries
from dashboard.forms import (
    CorrectionForm, EraseForm, FilterForm, ForgetEverythingForm, NeitherForm, RetractForm, TimeTravelForm,
    end_of_day, start_of_day,
)
from dashboard.timeline import build_timeline
from dashboard.words import history_sentences, overruled_correction, predicate_label, status_words, value_text
from facts.errors import NotFound, StateConflict
from facts.inputs import InputError


def subject_required(view):
    """Signed in, with a subject: sets ``request.subject``. Anonymous people
    go to the sign-in page; an account without a subject (staff) gets a
    page that says so."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        subject = accounts.subject_of(user=request.user)
        if subject is None:
            return render(request, "dashboard/no_subject.html", status=403)
        request.subject = subject
        if request.method in audit.WRITE_METHODS:
            # The audit entry names whose memory and which one or which
            # question, by id (never a value): what support staff need to
            # find what an end user changed.
            audit.note(request, subject=subject.external_id,
                       **{name: str(kwargs[name]) for name in ("assertion_id", "prompt_id") if name in kwargs})
        try:
            return view(request, *args, **kwargs)
        except NotFound:
            raise Http404("not found") from None

    return wrapper


def _actor(request: HttpRequest) -> str:
    return actions.actor_for(user_id=request.user.pk)


# --------------------------------------------------------------------------- sign-in


@require_http_methods(["GET", "POST"])
def login_link(request: HttpRequest, token: str) -> HttpResponse:
    """GET asks "continue as …?" without using the link (so a mail scanner
    that follows links cannot burn it); POST uses it and signs in."""
    try:
        if request.method == "GET":
            subject = accounts.peek_login_link(token=token)
            return render(request, "dashboard/login_link.html", {"subject": subject})
        user = accounts.use_login_link(token=token, remote_addr=request.META.get("REMOTE_ADDR", ""))
    except accounts.LinkRefused:
        return render(request, "dashboard/login_link_refused.html", status=410)
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    return redirect("dashboard:home")


@require_POST
def sign_out(request: HttpRequest) -> HttpResponse:
    logout(request)
    return redirect("dashboard:signed_out")


@require_GET
def signed_out(request: HttpRequest) -> HttpResponse:
    return render(request, "dashboard/signed_out.html")


# --------------------------------------------------------------------------- memories


def _filters(request: HttpRequest) -> tuple[FilterForm, queries.MemoryFilters]:
    form = FilterForm(request.GET or None,
                      entities=queries.entity_choices(subject=request.subject, selected=request.GET.get("entity", "")))
    if form.is_bound and form.is_valid():
        d = form.cleaned_data
        return form, queries.MemoryFilters(q=d["q"], kind=d["kind"], entity=d["entity"], pending=d["pending"])
    return form, queries.MemoryFilters()


def _home_context(request: HttpRequest) -> dict:
    form, filters = _filters(request)
    page, groups = queries.memory_page(subject=request.subject, filters=filters, page=request.GET.get("page"))
    params = request.GET.copy()
    params.pop("page", None)
    return {"form": form, "filters": filters, "page": page, "groups": groups, "query": params.urlencode(),
            "questions": prompts.pending_questions(subject=request.subject)}


@require_GET
@subject_required
def home(request: HttpRequest) -> HttpResponse:
    """"What I remember about you": pending questions, then the memories."""
    context = _home_context(request)
    if request.htmx:
        return render(request, "dashboard/home.html#memories", context)
    context["recent"], _ = queries.activity(subject=request.subject, limit=5)
    return render(request, "dashboard/home.html", context)


@require_POST
@subject_required
def answer(request: HttpRequest, prompt_id) -> HttpResponse:
    """Answer a pending question. htmx: the questions section comes back
    with the confirmation, and the memory list is swapped out of band."""
    choice = request.POST.get("choice", "")
    if choice == "neither":
        form = NeitherForm(request.POST)
        if not form.is_valid():
            return _answered(request, error="Please type what is true instead.")
        since = form.cleaned_data["since"]
        choice = {"value": form.cleaned_data["value"]}
        if since:
            choice["valid_from"] = start_of_day(since).isoformat().replace("+00:00", "Z")
    elif not choice:
        return _answered(request, error="Please pick one of the answers.")
    try:
        confirmation = prompts.answer_question(subject=request.subject, prompt_id=prompt_id, choice=choice,
                                               answered_by=_actor(request))
    except StateConflict:
        return _answered(request, error="This question was already answered or has expired. Nothing changed.")
    except InputError as exc:
        return _answered(request, error=f"That answer could not be used: {exc.detail}.")
    return _answered(request, confirmation=confirmation)


def _answered(request: HttpRequest, *, confirmation: str = "", error: str = "") -> HttpResponse:
    """Without JavaScript: back to the page with a message. With htmx: the questions section with the confirmation or
    the error in words, answered 200 so that htmx swaps it in."""
    if not request.htmx:
        (messages.success if confirmation else messages.error)(request, confirmation or error)
        return redirect("dashboard:home")
    context = {"questions": prompts.pending_questions(subject=request.subject), "confirmation": confirmation,
               "error": error}
    html = render_to_string("dashboard/home.html#questions", context, request=request)
    if confirmation:
        filters = queries.MemoryFilters()
        page, groups = queries.memory_page(subject=request.subject, filters=filters)
        html += render_to_string("dashboard/home.html#memories",
                                 {"page": page, "groups": groups, "filters": filters, "query": "", "oob": True},
                                 request=request)
        recent, _ = queries.activity(subject=request.subject, limit=5)
        html += render_to_string("dashboard/home.html#recent", {"recent": recent, "oob": True}, request=request)
    return HttpResponse(html)


# --------------------------------------------------------------------------- one memory


@require_GET
@subject_required
def memory(request: HttpRequest, assertion_id) -> HttpResponse:
    """A memory's history: the timeline picture, the events in words, and
    what the person can do about it."""
    return render(request, "dashboard/memory.html", _memory_context(request, assertion_id))


def _memory_context(request: HttpRequest, assertion_id, **forms) -> dict:
    now = timezone.now()
    history = queries.memory_history(subject=request.subject, assertion_id=assertion_id, now=now)
    this = history.this_version
    sentences = history_sentences(history.versions, queries.memory_events(history=history))
    return {
        "history": history,
        "title": predicate_label(history.predicate, history.entity),
        "value": value_text(this["value"]) if this else "",
        "this": this,
        "this_label": status_words(this) if this else "",
        "timeline": build_timeline(versions=history.versions, now=now) if history.versions else None,
        "sentences": sentences,
        "timed": any(s.same_day for s in sentences),
        "versions": [{**v, "text": value_text(v["value"]), "label": status_words(v)}
                     for v in history.versions],
        "correction_form": forms.get("correction_form") or CorrectionForm(initial={"since": now.date()}),
        "retract_form": forms.get("retract_form") or RetractForm(),
        "erase_form": forms.get("erase_form") or EraseForm(),
    }


@require_POST
@subject_required
def correct(request: HttpRequest, assertion_id) -> HttpResponse:
    form = CorrectionForm(request.POST)
    if form.is_valid():
        try:
            result = actions.correct_memory(subject=request.subject, assertion_id=str(assertion_id),
                                            value=form.cleaned_data["value"],
                                            valid_from=start_of_day(form.cleaned_data["since"]), actor=_actor(request))
        except InputError as exc:
            form.add_error("value" if "value" in (exc.field or "") else "since", exc.detail)
        else:
            said = f"from {form.cleaned_data['since']:%-d %B %Y} it is “{form.cleaned_data['value']}”"
            if result.outcome == "overruled":
                messages.warning(request, f"Noted: {said}. {overruled_correction(result.rule)}")
            else:
                messages.success(request, f"Updated: {said}. The earlier answer stays in the history.")
            return redirect("dashboard:memory", assertion_id=result.assertion_id)
    return render(request, "dashboard/memory.html", _memory_context(request, assertion_id, correction_form=form),
                  status=400)


@require_POST
@subject_required
def retract(request: HttpRequest, assertion_id) -> HttpResponse:
    form = RetractForm(request.POST)
    if not form.is_valid():
        return render(request, "dashboard/memory.html", _memory_context(request, assertion_id, retract_form=form),
                      status=400)
    actions.retract_memory(subject=request.subject, assertion_id=str(assertion_id),
                           reason=form.cleaned_data["reason"], actor=_actor(request))
    messages.success(request, "Done. I will not use this any more, for any date. "
                              "It stays in the history, marked as never true.")
    return redirect("dashboard:memory", assertion_id=assertion_id)


@require_POST
@subject_required
def erase(request: HttpRequest, assertion_id) -> HttpResponse:
    form = EraseForm(request.POST)
    if not form.is_valid():
        return render(request, "dashboard/memory.html", _memory_context(request, assertion_id, erase_form=form),
                      status=400)
    count = actions.erase_memory(subject=request.subject, assertion_id=str(assertion_id), actor=_actor(request))
    messages.success(request, "Forgotten. The value and what it was based on are destroyed"
                              + (f", from all {count} places it came from." if count > 1 else "."))
    return redirect("dashboard:home")


# --------------------------------------------------------------------------- time travel, activity, data


@require_GET
@subject_required
def time_travel(request: HttpRequest) -> HttpResponse:
    """"What did the assistant believe on <date> about <date>", with a diff
    against what it believes today."""
    now = timezone.now()
    form = TimeTravelForm(request.GET or None, initial={"believed_on": now.date(), "about": now.date()})
    result = None
    if form.is_bound and form.is_valid():
        believed_on = min(end_of_day(form.cleaned_data["believed_on"]), now)
        about = end_of_day(form.cleaned_data["about"])
        result = queries.time_travel(subject=request.subject, believed_on=believed_on, about=about, now=now)
    return render(request, "dashboard/time_travel.html", {"form": form, "result": result, "now": now})


@require_GET
@subject_required
def activity(request: HttpRequest) -> HttpResponse:
    try:
        before = int(request.GET["before"]) if request.GET.get("before") else None
    except ValueError:
        before = None
    items, older = queries.activity(subject=request.subject, limit=50, before_id=before)
    return render(request, "dashboard/activity.html", {"items": items, "older": older})


@require_GET
@subject_required
def your_data(request: HttpRequest) -> HttpResponse:
    return render(request, "dashboard/data.html", {"form": ForgetEverythingForm()})


@require_GET
@subject_required
def export(request: HttpRequest) -> HttpResponse:
    """"Download my data": everything held, with provenance, as JSON."""
    body = queries.export(subject=request.subject)
    response = JsonResponse(body, json_dumps_params={"indent": 2, "ensure_ascii": False})
    response["Content-Disposition"] = 'attachment; filename="my-memory.json"'
    return response


@require_POST
@subject_required
def forget_everything(request: HttpRequest) -> HttpResponse:
    form = ForgetEverythingForm(request.POST)
    if not form.is_valid():
        return render(request, "dashboard/data.html", {"form": form}, status=400)
    actions.forget_everything(subject=request.subject, actor=_actor(request))
    logout(request)
    return redirect(reverse("dashboard:signed_out") + "?forgotten=1")



