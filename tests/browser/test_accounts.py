"""A shared server in a real browser: the login page, labelling as the logged-in user, logging out."""

import csv
import io
from pathlib import Path

import httpx
import pytest

from app.main import create_app
from app.services import accounts
from app.settings import Settings
from browser.conftest import serve

SAMPLE = Path(__file__).resolve().parents[2] / "sample_traces" / "debate.json"
PASSWORD = "a long lab password"


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory):
    """A server with ORCHESTRACE_AUTH=required, a reviewer account, and the sample trace ingested by token."""
    app = create_app(Settings(db=tmp_path_factory.mktemp("lab") / "lab.duckdb", auth="required"))
    accounts.add_user(app.state.db, "rita", "reviewer", PASSWORD)
    token = accounts.create_token(app.state.db, "rita", "setup")
    for url in serve(app):
        answer = httpx.post(f"{url}/api/traces", content=SAMPLE.read_bytes(),
                            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
        assert answer.status_code == 201, answer.text
        yield url, answer.json()["ingested"][0], token


def test_log_in_label_as_yourself_and_log_out(page, lab_server):
    url, trace_id, token = lab_server
    page.goto(f"{url}/traces/{trace_id}")
    assert page.url.startswith(f"{url}/login")  # sent to log in first, then back here
    page.fill("input[name=username]", "rita")
    page.fill("input[name=password]", "not the password")
    page.click("button[type=submit]")
    assert "wrong user name or password" in page.inner_text("[role=alert]")
    page.wait_for_function("() => document.readyState === 'complete'")
    forgive_refused_login(page)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector('#graph[data-drawn="true"]')
    assert page.url == f"{url}/traces/{trace_id}"
    assert "rita" in page.inner_text("#reviewer-name") and "open mode" not in page.inner_text("header")

    page.keyboard.press("n")
    page.wait_for_function("() => { const f = document.getElementById('label-form');"
                           " return f && f.dataset.eventId === document.getElementById('graph')?.dataset.selected; }")
    event_id = page.get_attribute("#graph", "data-selected")
    page.keyboard.press("5")
    page.wait_for_selector(f'#label-form[data-event-id="{event_id}"] .status.good')
    exported = httpx.get(f"{url}/api/annotations/export", params={"format": "csv", "trace_id": trace_id},
                         headers={"Authorization": f"Bearer {token}"})
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert [(r["event_id"], r["reviewer"], r["credit"]) for r in rows] == [(event_id, "rita", "1.0")]

    page.click("#reviewer-name")
    page.click("text=Log out")
    page.wait_for_url(f"{url}/login")
    page.goto(f"{url}/")
    assert page.url.startswith(f"{url}/login")
    forgive_refused_login(page)  # should Chromium have logged it late


def forgive_refused_login(page) -> None:
    """Chromium logs the 401 answer of the refused login as a console error; it is expected here."""
    page.console_errors[:] = [e for e in page.console_errors if "status of 401" not in e or "/login" not in e]
