"""Safe CSV exports: a cell a spreadsheet would run as a formula is written with a leading ', a plain number
is left alone, and the importers remove exactly that prefix, so export, import, export is byte-identical
(labels, paper tags, the paper pool and the exclusion log)."""

import csv
import io

import pytest
from conftest import BASE_URL, make_trace, post_json
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from app.domain import csvsafe
from app.domain.taxonomy import EXCLUSION_COLUMNS, PAPER_COLUMNS, PAPER_FIELDS
from app.main import create_app
from app.services import papers
from app.settings import Settings

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
RISKY = ["=1+1", "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\tx", "\rx", "'=quoted already", "''@twice", "'-0.5",
         "=HYPERLINK(\"http://evil.example\",\"click\")", "a\rb"]


@pytest.mark.parametrize("text, cell", [
    ("=1+1", "'=1+1"), ("+x", "'+x"), ("-x", "'-x"), ("@x", "'@x"), ("\tx", "'\tx"), ("\rx", "'\rx"),
    ("-0.5", "-0.5"), ("+1", "+1"), ("-1e-05", "-1e-05"), ("-.5", "-.5"), ("-", "'-"), ("--1", "'--1"),
    ("'=x", "''=x"), ("'-0.5", "''-0.5"), ("'abc", "'abc"), ("abc", "abc"), ("", ""), ("a=b", "a=b"),
])
def test_neutralise_and_restore(text, cell):
    assert csvsafe.neutralise(text) == cell
    assert csvsafe.restore(cell) == text


@given(st.text())
def test_restore_undoes_neutralise_and_no_cell_starts_a_formula(text):
    cell = csvsafe.neutralise(text)
    assert csvsafe.restore(cell) == text
    assert csvsafe.neutralise(csvsafe.restore(cell)) == cell
    assert not cell.startswith(FORMULA_STARTS) or cell == text and float(text) == float(text)


def cells(text: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text, newline="")) for cell in row]


def assert_safe(text: str) -> None:
    """No cell of the CSV starts a formula, but a plain number."""
    for cell in cells(text):
        if cell.startswith(FORMULA_STARTS):
            float(cell)


def fresh(tmp_path, name: str) -> TestClient:
    return TestClient(create_app(Settings(db=tmp_path / f"{name}.duckdb")), base_url=BASE_URL)


def test_label_csv_is_safe_and_round_trips_byte_identical(client, tmp_path):
    assert post_json(client, make_trace("lab")).status_code == 201
    for i, text in enumerate(RISKY):
        saved = client.post("/api/annotations", json={
            "trace_id": "lab", "event_id": f"e{i % 6 + 1}", "reviewer": "@ada" if i % 2 else "-bob", "note": text,
            "tags": [text.strip(), "=tag"], "paper": text, "credit": -0.5})
        assert saved.status_code in (200, 201), saved.text
    exported = client.get("/api/annotations/export", params={"format": "csv", "history": "true"})
    assert_safe(exported.text)
    assert "'=1+1" in cells(exported.text) and "-0.5" in cells(exported.text)
    with fresh(tmp_path, "other") as other:
        imported = other.post("/api/annotations/import", content=exported.content, headers={"Content-Type": "text/csv"})
        assert imported.status_code == 200, imported.text
        again = other.get("/api/annotations/export", params={"format": "csv", "history": "true"})
        assert again.content == exported.content
        notes = {label["note"] for label in other.get("/api/annotations", params={"history": "true"}).json()["items"]}
        assert notes == set(RISKY)  # stored as written, not with the prefix


def pool_csv(rows: list[dict], columns=PAPER_COLUMNS) -> bytes:
    """A pool file as another tool writes it: CRLF lines, no neutralising."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerows([columns, *[[row[c] for c in columns] for row in rows]])
    return out.getvalue().encode()


def risky_papers() -> list[dict]:
    controlled = {field: allowed[0] for field, allowed in PAPER_FIELDS.items()}
    return [{**{c: "" for c in PAPER_COLUMNS}, **controlled, "key": f"p{i}", "year": "2024", "title": text,
             "first_author": "-Doe", "venue": "+x", "url": "@http", "notes": text} for i, text in enumerate(RISKY)]


def test_paper_pool_and_exclusion_log_csv_are_safe_and_round_trip(client, tmp_path):
    excluded = [{c: f"={c}" for c in EXCLUSION_COLUMNS} | {"record_id": "-E1"}]
    for body in (pool_csv(risky_papers()), pool_csv(excluded, EXCLUSION_COLUMNS)):
        response = client.post("/api/papers/import", content=body, headers={"Content-Type": "text/csv"})
        assert response.status_code == 200, response.text
    first = {kind: client.get("/api/papers/export", params={"kind": kind}) for kind in ("papers", "excluded")}
    for exported in first.values():
        assert_safe(exported.text)
    with fresh(tmp_path, "other") as other:
        for kind, exported in first.items():
            assert other.post("/api/papers/import", content=exported.content,
                              headers={"Content-Type": "text/csv"}).status_code == 200
            assert other.get("/api/papers/export", params={"kind": kind}).content == exported.content
        titles = [p["title"] for p in other.get("/api/papers/export", params={"format": "json"}).json()]
        # A foreign file's cell such as '=x reads as =x: the prefix is the one this rule writes.
        assert titles == [csvsafe.restore(text) for text in RISKY]


def test_paper_tags_csv_is_safe_and_reads_back_to_the_same_file(client):
    client.post("/api/papers/import", content=pool_csv(risky_papers()), headers={"Content-Type": "text/csv"})
    for i, text in enumerate(RISKY):
        assert client.post(f"/api/papers/p{i}/tags", json={"reviewer": "@ada", "note": text}).status_code == 201
    exported = client.get("/api/papers/export", params={"kind": "tags"}).text
    assert_safe(exported)
    header, *rows = list(csvsafe.reader(io.StringIO(exported, newline="")))
    stored = client.get("/api/papers/export", params={"kind": "tags", "format": "json"}).json()
    assert [dict(zip(header, row)) for row in rows] == [
        {c: "" if tag[c] is None else str(tag[c]) for c in header} for tag in stored]
    assert papers.to_csv([dict(zip(header, row)) for row in rows], header) == exported
