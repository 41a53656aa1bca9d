"""The console in a real browser (Debian's chromium through Playwright)
against the live server: find a person, confirm their high-stakes change
from the review queue and watch their dashboard change; preview, revoke
and undo a faulty extractor's claims and see history keep all of it.
Screenshots go to test-artifacts/console-*.png."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from console.models import StaffMembership
from facts.models import Assertion
from tests.conflicts.conftest import private_queue  # noqa: F401  (fixture)
from tests.console.factories import MembershipFactory, proposal_task
from tests.dashboard.browser import shot, sign_in
from tests.dashboard.conftest import make_person, seed_life
from tests.factories import assertion_data

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def staff_page(chromium):
    context = chromium.new_context(viewport={"width": 1400, "height": 900}, locale="en-GB", timezone_id="UTC")
    context.set_default_timeout(15_000)
    yield context.new_page()
    context.close()


def console_sign_in(page, live_server, username: str) -> None:
    page.goto(live_server.url + "/console/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("correct horse battery")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()


def test_staff_confirm_a_change_and_the_person_sees_it(staff_page, page, live_server, agent, private_queue):
    person = make_person(agent, name="Caroline")
    seed_life(person)
    proposal_task(agent, subject=person.external_id)
    staff = MembershipFactory(tenant=agent.tenant, role=StaffMembership.ADMIN, user__username="ops-anna").user
    sign_in(page, live_server, person)
    expect(page.locator(".memory", has_text="card ending 2222").locator(".badge--waiting")).to_have_count(1)
    shot(page, "console-10-dashboard-before")

    console_sign_in(staff_page, live_server, staff.username)
    expect(staff_page.locator("#conflict-rate")).to_be_visible()
    shot(staff_page, "console-01-overview")
    staff_page.get_by_role("link", name="People").click()
    staff_page.get_by_label("Find a person").fill("Munich")
    expect(staff_page.locator("#results").get_by_role("link", name=person.external_id)).to_be_visible()
    staff_page.locator("#results").get_by_role("link", name=person.external_id).click()
    expect(staff_page.locator("#facts")).to_contain_text("Munich")
    expect(staff_page.locator("#events")).to_contain_text("chat-extractor@2.3")
    shot(staff_page, "console-02-subject")

    staff_page.get_by_role("link", name="Review queue").click()
    staff_page.get_by_role("link", name="Confirm a change of payment method").click()
    expect(staff_page.locator(".evidence__item")).to_have_count(2)
    shot(staff_page, "console-03-review-item")
    staff_page.get_by_label("Note for the record").fill("Called Caroline; she confirmed the new card.")
    staff_page.get_by_role("button", name="Confirm").click()
    expect(staff_page.locator("#decided")).to_contain_text("Decided: confirm")
    shot(staff_page, "console-04-review-decided")

    page.reload()
    expect(page.locator(".memory", has_text="card ending 2222")).to_have_count(1)
    expect(page.locator(".memory", has_text="card ending 2222").locator(".badge--waiting")).to_have_count(0)
    shot(page, "console-11-dashboard-after")


def test_revoke_a_faulty_extractor_then_undo_and_history_keeps_both(staff_page, live_server, agent, private_queue):
    person = make_person(agent, name="Caroline")
    seed_life(person)
    for i, value in enumerate(["Initech", "Umbrella", "Hooli"]):
        agent.assert_fact(assertion_data(subject=f"u-bulk-{i}", predicate="employer", value=value,
                                         subject_name=f"Bulk {i}",
                                         source={"kind": "agent_inference", "id": f"inf-bad-{i}",
                                                 "extractor": "profile-inference@0.9", "evidence": "guessed"}))
    staff = MembershipFactory(tenant=agent.tenant, role=StaffMembership.ADMIN, user__username="ops-ben").user
    selected = Assertion.objects.filter(tenant=agent.tenant, extractor="profile-inference@0.9").count()

    console_sign_in(staff_page, live_server, staff.username)
    staff_page.get_by_role("link", name="Revocation").click()
    staff_page.get_by_label("Extractor").fill("profile-inference@0.9")
    staff_page.get_by_role("button", name="Preview").click()
    expect(staff_page.locator("#preview-count")).to_have_text(str(selected))
    expect(staff_page.locator("#changes")).to_contain_text("Hooli")
    shot(staff_page, "console-05-revocation-preview")
    staff_page.get_by_label("Why (kept with every retraction)").fill("profile-inference 0.9 guesses employers")
    staff_page.get_by_role("button", name=f"Revoke {selected} assertions").click()
    expect(staff_page.get_by_role("status")).to_contain_text(f"Revoked {selected} assertions")
    shot(staff_page, "console-06-revoked")

    staff_page.get_by_role("button", name="Undo this revocation").click()
    expect(staff_page.locator("#batch-state")).to_contain_text("undone")
    expect(staff_page.locator("#history .restored code")).to_have_count(selected)
    expect(staff_page.locator("#history .retracted")).to_have_count(selected)
    shot(staff_page, "console-07-undone-history")

    staff_page.locator("#history").get_by_role("link", name="u-bulk-2").click()
    expect(staff_page.locator("#facts")).to_contain_text("Hooli")
    expect(staff_page.locator("#events")).to_contain_text("fact.retracted")
    expect(staff_page.locator("#events")).to_contain_text("fact.restored")
    shot(staff_page, "console-08-subject-history")
    staff_page.get_by_role("link", name="Audit").click()
    expect(staff_page.locator("#audit")).to_contain_text("console:undo")
    expect(staff_page.locator("#audit")).to_contain_text("console:revoke")
    shot(staff_page, "console-09-audit")
