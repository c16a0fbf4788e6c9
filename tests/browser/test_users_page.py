"""The admins' users page in a real browser: add a user, change a role, disable an account (its token refused at
once), make a token shown once, and the last admin kept; screenshots at two laptop sizes."""

from pathlib import Path

import httpx
import pytest

from app.main import create_app
from app.services import accounts
from app.settings import Settings
from browser.conftest import serve

PASSWORD = "a long lab password"
SHOTS = Path("/tmp/shots")
SIZES = ((1440, 900), (1280, 800))


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory):
    """A server with ORCHESTRACE_AUTH=required, an admin and a reviewer whose exporter has a token."""
    app = create_app(Settings(db=tmp_path_factory.mktemp("users") / "lab.duckdb", auth="required"))
    accounts.add_user(app.state.db, "ada", "admin", PASSWORD)
    accounts.add_user(app.state.db, "rita", "reviewer", PASSWORD)
    token = accounts.create_token(app.state.db, "rita", "otel-exporter")
    for url in serve(app):
        yield url, token


def shoot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width, height in SIZES:
        page.set_viewport_size({"width": width, "height": height})
        page.screenshot(path=str(SHOTS / f"users-{name}-{width}x{height}.png"))


def row(page, name: str):
    return page.locator(f"table.users tr[id='user-{name}']")


def test_an_admin_adds_a_user_changes_a_role_and_disables_an_account(page, lab_server):
    url, rita_token = lab_server
    page.goto(f"{url}/login?next=/users")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/users")
    assert page.get_attribute("nav a[href='/users']", "aria-current") == "page"
    shoot(page, "list")

    add = page.locator("section[aria-label='Add a user']")
    add.locator("input[name=name]").fill("mia")
    add.locator("select[name=role]").select_option("viewer")
    add.locator("input[name=password]").fill(PASSWORD)
    add.locator("button[type=submit]").click()
    page.wait_for_selector("[role=status]:has-text('Added mia, a viewer.')")
    assert row(page, "mia").locator("select[name=role]").input_value() == "viewer"
    assert page.locator("#manage h2").inner_text().startswith("mia")  # the new account is selected

    row(page, "mia").locator("select[name=role]").select_option("reviewer")
    row(page, "mia").locator("button:has-text('Change')").click()
    page.wait_for_selector("[role=status]:has-text(\"mia's role is now reviewer\")")
    assert row(page, "mia").locator("select[name=role]").input_value() == "reviewer"

    headers = {"Authorization": f"Bearer {rita_token}"}
    assert httpx.get(f"{url}/api/traces", headers=headers).status_code == 200
    row(page, "rita").locator("button[aria-label='disable rita']").click()
    page.wait_for_selector("[role=status]:has-text('rita is disabled')")
    assert row(page, "rita").locator(".badge").inner_text() == "disabled"
    assert row(page, "rita").locator("button[aria-label='enable rita']").is_visible()
    assert httpx.get(f"{url}/api/traces", headers=headers).status_code == 401  # at once
    shoot(page, "changed")

    row(page, "mia").locator("a:has-text('password & tokens')").click()
    page.locator("#manage input[name=name]").fill("notebook")
    page.locator("#manage button:has-text('Create a token')").click()
    token = page.inner_text("#new-token")
    assert httpx.get(f"{url}/api/traces", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    assert page.locator("#manage table.data tbody tr").count() == 1
    shoot(page, "token")

    row(page, "ada").locator("select[name=role]").select_option("viewer")
    row(page, "ada").locator("button:has-text('Change')").click()
    page.wait_for_selector("[role=alert]:has-text('last enabled admin')")
    assert row(page, "ada").locator("select[name=role]").input_value() == "admin"
    page.console_errors[:] = [e for e in page.console_errors if "status of 409" not in e]  # the refusal's page
    shoot(page, "refused")
