"""The dashboard in a real browser (Debian's chromium through Playwright)
against the live server: sign in by link, read memories with their sources,
retract, erase, travel in time. Each page is saved under test-artifacts/."""
from __future__ import annotations

import json
from datetime import date
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from facts.models import Assertion
from tests.dashboard.browser import LABEL_CHECK, shot, sign_in
from tests.dashboard.conftest import seed_life

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_sign_in_by_link_and_see_memories_with_sources(page, live_server, person):
    seed_life(person)

    sign_in(page, live_server, person)

    shot(page, "02-memories")
    expect(page.locator(".memory", has_text="Munich").locator(".badge")).to_have_text("you said")
    expect(page.locator(".memory", has_text="Family").locator(".badge")).to_have_text("from billing")
    expect(page.locator(".memory", has_text="Acme Corp").locator(".badge")).to_have_text("from a document")
    expect(page.locator(".memory", has_text="German").locator(".badge")).to_have_text("inferred by the assistant")
    expect(page.locator(".memory", has_text="Munich").locator(".quote")).to_have_text("“We just finished the move to Munich!”")
    expect(page.locator(".memory", has_text="Munich").locator(".memory__meta")).to_contain_text("True since 22 Nov 2025")
    expect(page.locator(".memory", has_text="lake sunrises").locator(".also summary")).to_have_text(
        "Also heard from 1 other source")
    expect(page.locator(".memory", has_text="Berlin")).to_have_count(0)


def test_history_shows_the_timeline_and_the_change_in_words(page, live_server, person):
    seed_life(person)
    sign_in(page, live_server, person)

    page.locator(".memory", has_text="Munich").get_by_role("link", name="History and changes").click()

    expect(page.get_by_role("heading", name="Munich", level=1)).to_be_visible()
    expect(page.locator(".tl-bar--current")).to_have_count(1)
    expect(page.locator(".tl-bar--superseded")).to_have_count(1)
    expect(page.locator(".tl-marker--learned")).to_have_count(2)
    expect(page.locator(".story")).to_contain_text("“Munich” replaced “Berlin” on 22 Nov 2025, because you said so later.")
    shot(page, "03-history")


def test_retracted_memory_leaves_the_list_but_stays_in_history(page, live_server, person):
    seed_life(person)
    sign_in(page, live_server, person)
    page.locator(".memory", has_text="German").get_by_role("link", name="History and changes").click()

    page.get_by_label("Why (optional)").fill("I only read German, I don't speak it")
    page.get_by_role("button", name="Mark as never true").click()

    expect(page.get_by_role("status")).to_contain_text("It stays in the history, marked as never true.")
    expect(page.locator(".tl-bar--retracted")).to_have_count(1)
    expect(page.locator(".tl-marker--retracted")).to_have_count(1)
    expect(page.locator(".lede strong")).to_have_text("never true")
    shot(page, "04-history-retracted")
    page.get_by_role("link", name="Memories", exact=True).click()
    expect(page.locator(".memory", has_text="German")).to_have_count(0)
    expect(page.locator(".memory", has_text="Munich")).to_have_count(1)


def test_erased_memory_is_nowhere_not_even_in_the_export(page, live_server, person):
    sent = seed_life(person)
    sign_in(page, live_server, person)
    page.locator(".memory", has_text="lake sunrises").get_by_role("link", name="History and changes").click()

    page.get_by_label("Yes, forget this for good").check()
    page.get_by_role("button", name="Forget this").click()

    expect(page.get_by_role("status")).to_contain_text("Forgotten.")
    expect(page.locator("main")).not_to_contain_text("lake sunrise")
    shot(page, "05-after-forget")
    page.get_by_role("link", name="Activity", exact=True).click()
    expect(page.locator("main")).not_to_contain_text("lake sunrise")
    expect(page.locator("main")).to_contain_text("A memory was forgotten.")
    shot(page, "06-activity")
    page.goto(f"{live_server.url}/memories/{sent['painting']['assertion_id']}/")
    expect(page.get_by_role("heading", name="A forgotten memory")).to_be_visible()
    expect(page.locator("main")).not_to_contain_text("lake sunrise")
    page.get_by_role("link", name="Your data").click()
    shot(page, "07-your-data")
    with page.expect_download() as download:
        page.get_by_role("link", name="Download my data").click()
    exported = download.value.path().read_text()
    assert "lake sunrise" not in exported
    assert "It's special to me" not in exported
    assert json.loads(exported)["current"]
    assert Assertion.objects.filter(id=sent["painting"]["assertion_id"], value__isnull=True).count() == 1


def test_time_travel_to_before_a_change_shows_the_old_value(page, live_server, person):
    seed_life(person)
    sign_in(page, live_server, person)
    page.get_by_role("link", name="Look back").click()

    page.get_by_label("What did the assistant believe on").fill(date.today().isoformat())
    page.get_by_label("About which day").fill("2025-06-15")
    page.get_by_role("button", name="Look back").click()

    # Believed today about 15 June 2025, against what is believed today about that same day.
    expect(page.locator(".summary")).to_contain_text("Compared with what it believes today about 15 June 2025:")
    expect(page.locator(".diff__row")).to_have_count(0)
    expect(page.locator("main")).to_contain_text("Nothing is different")
    page.locator(".same summary").click()
    expect(page.locator(".same li", has_text="Where you live")).to_have_text("Where you live: Berlin")
    shot(page, "08-time-travel")


def test_pages_read_without_javascript_and_sign_in_works(no_js_page, live_server, person):
    seed_life(person)
    page = no_js_page
    path = urlsplit(person.agent.api("POST", f"/subjects/{person.external_id}/login-link").json()["url"]).path
    page.goto(live_server.url + path)
    page.get_by_role("button", name="Continue to my memories").click()

    expect(page.locator(".memory", has_text="Munich")).to_be_visible()
    page.get_by_label("Search your memories").fill("Acme")
    page.get_by_role("button", name="Show").click()
    expect(page.locator(".memory")).to_have_count(1)
    page.goto(live_server.url + "/")
    page.locator(".memory", has_text="Munich").get_by_role("link", name="History and changes").click()
    expect(page.locator(".tl-bar--superseded")).to_have_count(1)
    for url in ("/activity/", "/time-travel/?believed_on=2026-01-01&about=2025-06-01", "/your-data/"):
        page.goto(live_server.url + url)
        expect(page.get_by_role("heading", level=1)).to_be_visible()
    shot(page, "11-no-javascript")


def test_forms_work_with_the_keyboard(page, live_server, person):
    seed_life(person)
    sign_in(page, live_server, person)

    page.get_by_label("Search your memories").focus()
    page.keyboard.type("Globex")
    page.keyboard.press("Enter")
    expect(page.locator(".memory")).to_have_count(1)
    page.keyboard.press("Tab")  # from the search box to the next control
    focused = page.evaluate("document.activeElement.id")
    assert focused == "id_kind"

    page.goto(live_server.url + "/")
    page.locator(".memory", has_text="German").get_by_role("link", name="History and changes").focus()
    page.keyboard.press("Enter")
    page.get_by_label("Why (optional)").focus()
    page.keyboard.type("wrong")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_contain_text("marked as never true")


def test_every_control_has_a_label(page, live_server, person):
    sent = seed_life(person)
    sign_in(page, live_server, person)

    unlabelled = []
    for url in ("/", f"/memories/{sent['berlin']['assertion_id']}/", "/activity/", "/time-travel/",
                "/time-travel/?believed_on=2026-01-01&about=2025-06-01", "/your-data/"):
        page.goto(live_server.url + url)
        unlabelled += page.evaluate(LABEL_CHECK)

    assert unlabelled == []


def test_this_changed_from_a_date_keeps_the_old_value_before_it(page, live_server, person):
    seed_life(person)
    sign_in(page, live_server, person)
    page.locator(".memory", has_text="Acme Corp").get_by_role("link", name="History and changes").click()

    page.get_by_label("What is true now").fill("Initech")
    page.get_by_label("Since when").fill("2026-02-01")
    page.get_by_role("button", name="Save the change").click()

    expect(page.get_by_role("status")).to_contain_text("from 1 February 2026 it is “Initech”")
    expect(page.get_by_role("heading", name="Initech", level=1)).to_be_visible()
    expect(page.locator(".tl-bar--superseded")).to_contain_text("Acme Corp")
    expect(page.locator(".story")).to_contain_text("“Initech” replaced “Acme Corp” on 1 Feb 2026, because you corrected it.")
    shot(page, "12-history-corrected")


def test_a_very_long_word_wraps_inside_its_card(page, live_server, person):
    person.remember(predicate="note", value="L" * 4000)
    sign_in(page, live_server, person)

    for url in ("/", "/time-travel/?believed_on=2026-01-01&about=2025-06-01"):
        page.goto(live_server.url + url)
        widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        shot(page, "16-long-word")
        assert widths[0] <= widths[1], url


def test_timeline_labels_stay_inside_the_picture_and_forgotten_is_in_the_legend(page, live_server, person):
    def city(value, since, kind="user_statement"):
        return person.remember(predicate="city_of_residence", value=value, valid_from=f"{since}T00:00:00Z",
                               source={"kind": kind, "id": f"{kind}-{value}"})

    paris = city("Paris", "2024-01-01")
    city("Bonn", "2026-03-01", kind="correction")
    cologne = city("Cologne", "2026-11-01")
    sign_in(page, live_server, person)
    page.goto(f"{live_server.url}/memories/{paris['assertion_id']}/")
    page.get_by_label("Yes, forget this for good").check()
    page.get_by_role("button", name="Forget this").click()

    page.goto(f"{live_server.url}/memories/{cologne['assertion_id']}/")

    shot(page, "17-timeline-edges")
    expect(page.locator(".tl-bar--overruled .tl-label")).to_have_text("Cologne · kept, not used")
    overflow = page.evaluate("""() => {
        const box = document.querySelector('.timeline svg').getBoundingClientRect();
        return [...document.querySelectorAll('.tl-label')].map(t => t.getBoundingClientRect())
            .filter(r => r.left < box.left - 0.5 || r.right > box.right + 0.5).length;
    }""")
    assert overflow == 0
    expect(page.locator(".tl-bar--erased .tl-label")).to_have_text("forgotten")
    expect(page.locator(".legend")).to_contain_text("forgotten")


def test_pages_declare_an_icon_and_load_without_a_failed_request(page, live_server, person):
    # Without an icon every page load asked for /favicon.ico and logged a
    # 404 in the browser's console (a new user's trial).
    failed = []
    page.on("response", lambda r: failed.append((r.status, r.url)) if r.status >= 400 else None)

    page.goto(f"{live_server.url}/console/")
    page.wait_for_load_state("networkidle")
    seed_life(person)
    sign_in(page, live_server, person)
    page.wait_for_load_state("networkidle")
    icon = page.locator('link[rel="icon"]').get_attribute("href")
    served = page.request.get(f"{live_server.url}{icon}")

    assert failed == []
    assert served.status == 200 and served.headers["content-type"].startswith("image/svg+xml")
