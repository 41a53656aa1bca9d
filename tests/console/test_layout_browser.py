"""The overview and policy pages laid out in a real browser (Debian's
chromium through Playwright) at common laptop widths: the "Find" button on
one line, chart labels clear of the bars, predicate names wrapped only
between their words, the policy table inside its card. Screenshots go to
test-artifacts/console-layout-*.png."""
from __future__ import annotations

import pytest

from console.models import StaffMembership
from tests.conflicts.factories import tie
from tests.console.factories import MembershipFactory
from tests.console.test_browser import console_sign_in
from tests.dashboard.browser import shot
from tests.factories import assertion_data

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = [1024, 1280, 1440]
PREDICATES = ["billing_address", "preferred_contact_channel", "crm.subscription_tier", "acme:customer-segment_code"]

LINES_OF_FIND = """() => {
  const range = document.createRange();
  range.selectNodeContents(document.querySelector('.search-inline button'));
  return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;
}"""

TICKS_OVER_BARS = """() => {
  const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  const out = [];
  for (const svg of document.querySelectorAll('.chart svg')) {
    const bars = [...svg.querySelectorAll('rect')].map(r => r.getBoundingClientRect()).filter(r => r.height > 0);
    for (const t of svg.querySelectorAll('text')) {
      if (bars.some(b => hit(b, t.getBoundingClientRect()))) out.push(t.textContent);
    }
  }
  return out;
}"""

# For each predicate name, the characters after which a line ends inside it.
BREAKS_IN_NAMES = """() => [...document.querySelectorAll('#policies tbody td:first-child code')].map(code => {
  const chars = [];
  const walk = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
  while (walk.nextNode()) {
    for (let i = 0; i < walk.currentNode.length; i++) {
      const range = document.createRange();
      range.setStart(walk.currentNode, i); range.setEnd(walk.currentNode, i + 1);
      chars.push([walk.currentNode.data[i], range.getBoundingClientRect().top]);
    }
  }
  return [code.textContent, chars.filter((c, i) => i + 1 < chars.length && chars[i + 1][1] > c[1] + 2).map(c => c[0])];
})"""

TABLE_OVERFLOW = """() => {
  const card = document.querySelector('#policies').closest('.card').getBoundingClientRect();
  const keys = [...document.querySelectorAll('#policies th')].pop().getBoundingClientRect();
  return keys.right - card.right;
}"""


@pytest.fixture
def staff(agent):
    for name in PREDICATES:
        assert agent.api("PUT", f"/predicates/{name}", {"cardinality": "one", "stakes": "low"}).status_code == 200
        agent.assert_fact(assertion_data(predicate=name, value="x"))
    for i in range(12):  # ties today: the last bar of the conflict chart is the tallest
        for data in tie(subject=f"u-tie-{i}", predicate="employer", values=("Acme", "Initech")):
            agent.assert_fact(data)
    return MembershipFactory(tenant=agent.tenant, role=StaffMembership.ADMIN, user__username="ops-layout").user


@pytest.mark.parametrize("width", WIDTHS)
def test_the_overview_and_policy_pages_lay_out_cleanly(chromium, live_server, agent, staff, width):
    context = chromium.new_context(viewport={"width": width, "height": 900}, locale="en-GB", timezone_id="UTC")
    page = context.new_page()
    console_sign_in(page, live_server, staff.username)
    shot(page, f"console-layout-overview-{width}")
    find_lines, ticks_over_bars = page.evaluate(LINES_OF_FIND), page.evaluate(TICKS_OVER_BARS)
    page.goto(f"{live_server.url}/console/{agent.slug}/policy/")
    shot(page, f"console-layout-policy-{width}")
    breaks, overflow = page.evaluate(BREAKS_IN_NAMES), page.evaluate(TABLE_OVERFLOW)
    context.close()

    assert {"find on lines": find_lines, "labels over bars": ticks_over_bars,
            "names broken mid-word": [name for name, cut in breaks if set(cut) - set("_.:-")],
            "keys column past the card (px)": max(round(overflow), 0)} == {
        "find on lines": 1, "labels over bars": [], "names broken mid-word": [], "keys column past the card (px)": 0}
