"""Playwright plumbing for the dashboard's browser tests: Debian's chromium,
headless, against pytest-django's live server; screenshots of each page go
to ``test-artifacts/``."""
from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture(scope="session")
def chromium():
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the ORM calls
    # the tests make between page actions are still synchronous and safe.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def page(chromium):
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, locale="en-GB", timezone_id="UTC")
    context.set_default_timeout(10_000)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def no_js_page(chromium):
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, java_script_enabled=False)
    page = context.new_page()
    yield page
    context.close()


def shot(page, name: str) -> Path:
    """Save a full-page screenshot as ``test-artifacts/<name>.png``."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


LABEL_CHECK = """
() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea, button, a[href]')]
  .filter(el => {
    const name = (el.labels && el.labels.length ? [...el.labels].map(l => l.textContent).join(' ') : '')
      + (el.getAttribute('aria-label') || '') + (el.tagName === 'BUTTON' || el.tagName === 'A' ? el.textContent : '');
    return !name.trim();
  })
  .map(el => el.outerHTML.slice(0, 120))
"""


def sign_in(page, live_server, person) -> None:
    """Mint a link as the agent would, open it, continue: the memory page."""
    from playwright.sync_api import expect

    response = person.agent.api("POST", f"/subjects/{person.external_id}/login-link")
    assert response.status_code == 200
    path = urlsplit(response.json()["url"]).path
    page.goto(live_server.url + path)
    shot(page, "01-sign-in-link")
    page.get_by_role("button", name="Continue to my memories").click()
    expect(page.get_by_role("heading", name="What I remember about you")).to_be_visible()
