"""ORCHESTRACE_TRACE_SQL: every statement is logged with its time, and a request with `_trace=1` shows its own."""

import logging

from bs4 import BeautifulSoup
from conftest import BASE_URL, make_trace, post_json
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings


def test_a_page_lists_its_statements_and_every_answer_says_their_time(tmp_path, caplog):
    app = create_app(Settings(db=tmp_path / "t.duckdb", trace_sql=True))
    with TestClient(app, base_url=BASE_URL) as client:
        assert post_json(client, make_trace("t1")).status_code == 201
        with caplog.at_level(logging.DEBUG, logger="orchestrace.sql"):
            page = client.get("/traces/t1", params={"_trace": "1"})
        assert page.status_code == 200
        listing = BeautifulSoup(page.text, "html.parser").select_one("#sql-trace")
        rows = listing.select("tbody tr")
        assert rows and any("FROM traces" in row.text for row in rows)
        assert page.headers["server-timing"].startswith("sql;dur=")
        assert f'desc="{len(rows)} statements"' in page.headers["server-timing"]
        assert any("FROM traces" in record.getMessage() for record in caplog.records)
        answer = client.get("/api/traces/t1", params={"_trace": "1"})
        assert answer.json()["trace_id"] == "t1" and "statements" in answer.headers["server-timing"]
        assert "server-timing" not in client.get("/api/traces/t1").headers


def test_without_the_setting_a_trace_is_not_shown(client):
    assert post_json(client, make_trace("t1")).status_code == 201
    page = client.get("/traces/t1", params={"_trace": "1"})
    assert page.status_code == 200 and "sql-trace" not in page.text and "server-timing" not in page.headers
