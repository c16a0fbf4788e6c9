"""Wrong passwords are throttled per account and per client address (429 with Retry-After, a lock that lifts by
itself, the right password refused while it holds), and password checks run a bounded number at a time."""

import asyncio
import re
import threading
import time

import httpx
import pytest
from argon2.exceptions import VerificationError
from conftest import BASE_URL

from app.main import create_app
from app.services import accounts
from app.services.accounts import (
    LOGIN_FAILURES_PER_ACCOUNT,
    LOGIN_FAILURES_PER_ADDRESS,
    LOGIN_LOCK_S,
    LOGIN_WINDOW_S,
    PASSWORD_CHECKS_AT_ONCE,
    LoginThrottle,
)
from app.settings import Settings

PASSWORD = "correct horse battery"


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_account_is_locked_after_its_failures_in_the_window_and_the_lock_lifts_by_itself():
    clock = Clock()
    throttle = LoginThrottle(clock)
    for _ in range(LOGIN_FAILURES_PER_ACCOUNT - 1):
        throttle.failed("rita", "10.0.0.1")
        clock.now += 1
    assert throttle.lock_of("rita", "10.0.0.1") is None
    throttle.failed("rita", "10.0.0.2")  # from anywhere: the account's count
    lock = throttle.lock_of("rita", "10.0.0.3")
    assert lock.retry_after_s == LOGIN_LOCK_S and "for 'rita'" in lock.message
    assert "even with the right password" in lock.message and "for the next 5 minutes" in lock.message
    assert throttle.lock_of("ada", "10.0.0.3") is None  # another account, another address
    clock.now += LOGIN_LOCK_S - 61
    assert throttle.lock_of("rita", "10.0.0.3").retry_after_s == 61
    clock.now += 61
    assert throttle.lock_of("rita", "10.0.0.3") is None  # lifted, and counting starts again
    throttle.failed("rita", "10.0.0.1")
    assert throttle.lock_of("rita", "10.0.0.1") is None


def test_failures_spread_beyond_the_window_do_not_lock_and_a_right_password_starts_the_count_again():
    clock = Clock()
    throttle = LoginThrottle(clock)
    for _ in range(3 * LOGIN_FAILURES_PER_ACCOUNT):
        throttle.failed("rita", "10.0.0.1")
        clock.now += LOGIN_WINDOW_S / (LOGIN_FAILURES_PER_ACCOUNT - 1)
    assert throttle.lock_of("rita", "10.0.0.1") is None
    for _ in range(LOGIN_FAILURES_PER_ACCOUNT - 1):
        throttle.failed("ada", "10.0.0.1")
    throttle.succeeded("ada")
    throttle.failed("ada", "10.0.0.1")
    assert throttle.lock_of("ada", "10.0.0.1") is None


def test_an_address_guessing_across_accounts_is_locked_out():
    clock = Clock()
    throttle = LoginThrottle(clock)
    for i in range(LOGIN_FAILURES_PER_ADDRESS):
        throttle.failed(f"user{i}", "10.0.0.9")
    lock = throttle.lock_of("anyone", "10.0.0.9")
    assert lock is not None and "from your address" in lock.message
    assert throttle.lock_of("anyone", "10.0.0.8") is None
    throttle.succeeded("user1")  # a right password elsewhere does not clear the address
    assert throttle.lock_of("user1", "10.0.0.9") is not None


def test_what_is_kept_in_memory_is_bounded(monkeypatch):
    monkeypatch.setattr(accounts, "LOGIN_TRACKED_MAX", 50)
    clock = Clock()
    throttle = LoginThrottle(clock)
    for i in range(200):
        throttle.failed(f"user{i}", f"10.0.{i}.1")
    assert len(throttle._tracked) == 50
    clock.now += max(LOGIN_WINDOW_S, LOGIN_LOCK_S) + 1
    throttle.failed("late", "10.9.9.9")
    assert len(throttle._tracked) == 2  # the rest could no longer refuse anything


def form_token(page: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


@pytest.fixture
def lab(tmp_path):
    app = create_app(Settings(db=tmp_path / "lab.duckdb", auth="required"))
    accounts.add_user(app.state.db, "rita", "reviewer", PASSWORD)
    yield app
    app.state.db.close()


def test_the_login_form_answers_429_with_retry_after_and_refuses_the_right_password_until_the_lock_lifts(lab):
    from fastapi.testclient import TestClient

    clock = Clock()
    lab.state.login_throttle = LoginThrottle(clock)
    with TestClient(lab, base_url=BASE_URL) as client:
        token = form_token(client.get("/login").text)

        def log_in(password: str):
            return client.post("/login", data={"username": "rita", "password": password, "csrf_token": token},
                               follow_redirects=False)

        for _ in range(LOGIN_FAILURES_PER_ACCOUNT):
            assert log_in("wrong password").status_code == 401
        locked = log_in(PASSWORD)
        assert locked.status_code == 429 and locked.headers["Retry-After"] == str(LOGIN_LOCK_S)
        assert "too many wrong passwords for &#39;rita&#39;" in locked.text
        assert "even with the right password" in locked.text
        clock.now += LOGIN_LOCK_S
        assert log_in(PASSWORD).status_code == 303  # lifted by itself


def test_forty_logins_at_once_check_passwords_a_few_at_a_time(lab, monkeypatch):
    running, most = 0, 0
    lock = threading.Lock()

    class Counting:
        """A hasher that takes a while to check (as argon2id does, with 64 MiB each) and counts the checks that
        run at once."""

        def verify(self, stored, password):
            nonlocal running, most
            with lock:
                running += 1
                most = max(most, running)
            try:
                time.sleep(0.05)
                if password != PASSWORD:
                    raise VerificationError()
                return True
            finally:
                with lock:
                    running -= 1

    monkeypatch.setattr(accounts, "_hasher", Counting())

    async def forty():
        transport = httpx.ASGITransport(app=lab)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            token = form_token((await client.get("/login")).text)
            answers = await asyncio.gather(*(client.post("/login", data={
                "username": "rita", "password": PASSWORD, "csrf_token": token}) for _ in range(40)))
        return [answer.status_code for answer in answers]

    assert asyncio.run(forty()) == [303] * 40
    assert most == PASSWORD_CHECKS_AT_ONCE
