"""The paper pool API: import with line-numbered errors, tagging with history, export, stats, agreement."""

import csv
import io
import json

import pytest
from anchors import anchor

from app.domain.taxonomy import EXCLUSION_COLUMNS, PAPER_COLUMNS

POOL_ROWS = [
    ["magrpo", "LLM Collaboration With MARL", "Liu, Shuo", "Northeastern", "2025", "2508.04652", "arXiv",
     "https://arxiv.org/abs/2508.04652", "rl_method", "yes", "shared", "agent", "centralized", "general", "core",
     "Cooperative MARL, MAGRPO", "yes", "v7"],
    ["swarmrl", "Swarm orchestration, learned", "Kim, A.", "Lab", "2026", "2601.00001", "arXiv",
     "https://arxiv.org/abs/2601.00001", "rl_method", "yes", "orchestration", "orchestrator", "swarm", "research",
     "core", "Learns when to spawn", "partial", 'multi-line note,\nwith "quotes"'],
    ["bench1", "A benchmark", "Doe, J.", "Uni", "2024", "", "NeurIPS", "https://example.org/b", "benchmark", "no",
     "NA", "NA", "NA", "coding", "supporting", "Benchmark of coding agents", "yes", ""],
    ["debate1", "Debate helps", "Roe, R.", "Uni", "2023", "2305.1", "ICML", "https://example.org/d", "rl_method",
     "partial", "debate", "message", "debate", "math", "case", "Debate credit", "yes", "n"],
]
EXCLUDED_ROWS = [
    ["E001", "arXiv", "multi-agent LLM", "Some paper", "arXiv:1", "https://arxiv.org/abs/1", "2026-04-26",
     "abstract_screen", "no RL"],
    ["E002", "company blog", "orchestration", "Other", "blog", "https://example.org/x", "2026-04-27",
     "full_text_screen", "no method"],
]


def to_csv(header, rows) -> bytes:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([header, *rows])
    return out.getvalue().encode()


POOL_CSV = to_csv(PAPER_COLUMNS, POOL_ROWS)
EXCLUDED_CSV = to_csv(EXCLUSION_COLUMNS, EXCLUDED_ROWS)


def import_csv(client, body: bytes):
    return client.post("/api/papers/import", content=body, headers={"Content-Type": "text/csv"})


@pytest.fixture
def pool(client):
    assert import_csv(client, POOL_CSV).json() == {"kind": "papers", "imported": 4}
    assert import_csv(client, EXCLUDED_CSV).json() == {"kind": "excluded", "imported": 2}


def test_import_and_export_round_trip_exactly(client, pool):
    exported = client.get("/api/papers/export", params={"format": "csv"})
    assert exported.status_code == 200 and exported.content == POOL_CSV
    assert client.get("/api/papers/export", params={"kind": "excluded"}).content == EXCLUDED_CSV
    as_json = client.get("/api/papers/export", params={"format": "json"}).json()
    assert [p["key"] for p in as_json] == ["magrpo", "swarmrl", "bench1", "debate1"]
    assert list(as_json[0]) == list(PAPER_COLUMNS)
    assert as_json[1]["notes"] == 'multi-line note,\nwith "quotes"'


def test_multipart_upload_and_columns_in_any_order(client):
    order = list(reversed(PAPER_COLUMNS))
    shuffled = to_csv(order, [list(reversed(row)) for row in POOL_ROWS])
    response = client.post("/api/papers/import", files={"file": ("pool.csv", shuffled, "text/csv")})
    assert response.json() == {"kind": "papers", "imported": 4}
    assert client.get("/api/papers/export").content == POOL_CSV  # exported in the published order


def test_a_spreadsheets_trailing_unnamed_columns_are_ignored(client):
    body = to_csv([*PAPER_COLUMNS, "", ""], [[*row, "", ""] for row in POOL_ROWS])
    assert import_csv(client, body).json() == {"kind": "papers", "imported": 4}
    assert client.get("/api/papers/export").content == POOL_CSV


def test_reimport_updates_by_key_and_keeps_reviewer_tags(client, pool):
    client.post("/api/papers/magrpo/tags", json={"reviewer": "ada", "reward_type": "hybrid"})
    changed = [row[:] for row in POOL_ROWS]
    changed[0][1] = "New title"
    extra = ["new1", *POOL_ROWS[2][1:]]
    assert import_csv(client, to_csv(PAPER_COLUMNS, [*changed, extra])).json()["imported"] == 5
    rows = client.get("/api/papers/export", params={"format": "json"}).json()
    assert [r["key"] for r in rows] == ["magrpo", "swarmrl", "bench1", "debate1", "new1"]
    assert rows[0]["title"] == "New title"
    tags = client.get("/api/papers/magrpo/tags").json()["items"]
    assert tags[0]["reward_type"] == "hybrid"


@pytest.mark.parametrize("body, fragments", [
    (to_csv([c for c in PAPER_COLUMNS if c != "scenario"], [r[:13] + r[14:] for r in POOL_ROWS]),
     ["line 1", "missing column(s) scenario"]),
    (POOL_CSV.replace(b"shared", b"sharde"), ["line 2, reward_type: 'sharde' is not one of shared, individual"]),
    (to_csv(PAPER_COLUMNS, [POOL_ROWS[0], POOL_ROWS[2], POOL_ROWS[0]]), ["line 4, key: 'magrpo' repeats line 2"]),
    (POOL_CSV.replace(b"2024", b"c. 2024"), ["line 5, year: 'c. 2024' is not an integer"]),
    (POOL_CSV.replace(b"Kim, A.", "Kim, \xe9".encode("latin-1")), ["line 3", "not UTF-8"]),
    (b"", ["line 1", "empty file"]),
    (b"\n\n", ["empty file"]),
    (POOL_CSV + b"a,b\n", ["line 7", "has 2 fields"]),
    (to_csv([*PAPER_COLUMNS, "title"], [[*r, "other"] for r in POOL_ROWS]),
     ["line 1", "column(s) title given more than once in the header"]),
])
def test_bad_csv_is_422_with_line_and_column_and_imports_nothing(client, body, fragments):
    response = import_csv(client, body)
    assert response.status_code == 422
    messages = " | ".join(e["message"] for e in response.json()["errors"])
    for fragment in fragments:
        assert fragment in messages
    assert client.get("/api/papers/export", params={"format": "json"}).json() == []


def test_quoted_newline_keeps_line_numbers_right(client):
    rows = [row[:] for row in POOL_ROWS]
    rows[3][10] = "debatte"  # the row after the two-line quoted note starts on line 6
    response = import_csv(client, to_csv(PAPER_COLUMNS, rows))
    assert [e["message"] for e in response.json()["errors"]] == [
        "line 6, reward_type: 'debatte' is not one of shared, individual, role, process, tool, debate, verifier, "
        "orchestration, hybrid, NA"]


def test_tags_append_versions_and_bad_values(client, pool):
    first = client.post("/api/papers/swarmrl/tags", json={"reviewer": "ada", "credit_granularity": "agent",
                                                          "note": "agent-level really"})
    assert first.status_code == 201 and first.json()["version"] == 1
    second = client.post("/api/papers/swarmrl/tags", json={"reviewer": "ada", "verified": "yes"})
    assert second.json()["version"] == 2 and second.json()["credit_granularity"] == "agent"
    history = client.get("/api/papers/swarmrl/tags").json()["items"]
    assert [h["version"] for h in history] == [1, 2]
    bad = client.post("/api/papers/swarmrl/tags", json={"reviewer": "ada", "reward_type": "sharde"})
    assert bad.status_code == 422 and "shared, individual" in bad.json()["error"] and bad.json()["field"] == "reward_type"
    assert client.post("/api/papers/swarmrl/tags", json={"reviewer": "ada", "colour": "x"}).status_code == 422
    assert client.post("/api/papers/swarmrl/tags", json={"reviewer": ""}).status_code == 422
    assert client.post("/api/papers/nope/tags", json={"reviewer": "ada"}).status_code == 404
    export = client.get("/api/papers/export", params={"kind": "tags"}).text
    assert export.splitlines()[0].startswith("key,reviewer,version,category")


def test_reviewer_source_changes_export_and_stats(client, pool):
    client.post("/api/papers/magrpo/tags", json={"reviewer": "ada", "credit_granularity": "orchestrator"})
    pool_stats = client.get("/api/papers/stats").json()
    ada_stats = client.get("/api/papers/stats", params={"source": "ada"}).json()
    assert pool_stats["counts"]["credit_granularity"]["agent"] == 1
    assert ada_stats["counts"]["credit_granularity"]["agent"] == 0
    assert ada_stats["counts"]["credit_granularity"]["orchestrator"] == 2
    assert ada_stats["crosstabs"]["reward_type x credit_granularity"]["shared"]["orchestrator"] == 1
    ada_csv = client.get("/api/papers/export", params={"source": "ada"}).text
    assert "shared,orchestrator" in ada_csv
    assert client.get("/api/papers/export", params={"source": "nobody"}).status_code == 404


def test_stats_counts_and_crosstabs(client, pool):
    stats = client.get("/api/papers/stats").json()
    assert (stats["retained"], stats["excluded"], stats["audited"]) == (4, 2, 6)
    assert stats["counts"]["category"]["rl_method"] == 3
    assert stats["counts"]["credit_granularity"]["token"] == 0  # sparse cells stay visible
    assert stats["crosstabs"]["category x verified"]["rl_method"]["partial"] == 1
    assert stats["excluded_counts"]["stage"] == {"abstract_screen": 1, "full_text_screen": 1}


def test_agreement_on_papers_with_pool(client, pool):
    for key in ("magrpo", "swarmrl", "bench1", "debate1"):
        client.post(f"/api/papers/{key}/tags", json={"reviewer": "ada", "reward_type": "hybrid" if key == "magrpo"
                                                     else None})
        client.post(f"/api/papers/{key}/tags", json={"reviewer": "bob", "reward_type": "shared" if key == "magrpo"
                                                     else "NA"})
    report = client.get("/api/agreement", params={"target": "papers", "field": "reward_type",
                                                  "reviewers": "pool,bob"}).json()
    assert report["n_items"] == 4 and report["percent_agreement"] == pytest.approx(0.5)
    assert client.get("/api/agreement", params={"target": "papers", "field": "credit",
                                                "reviewers": "a,b"}).status_code == 422


def test_published_pool_round_trips_and_matches_the_snapshot(client):
    published = anchor("papers.csv").read_bytes()
    excluded = anchor("excluded.csv").read_bytes()
    assert import_csv(client, published).json() == {"kind": "papers", "imported": 84}
    assert import_csv(client, excluded).json() == {"kind": "excluded", "imported": 32}
    assert client.get("/api/papers/export").content == published
    assert client.get("/api/papers/export", params={"kind": "excluded"}).content == excluded
    stats = client.get("/api/papers/stats").json()
    assert (stats["retained"], stats["excluded"], stats["audited"]) == (84, 32, 116)
    assert {k: v for k, v in stats["counts"]["category"].items() if v} == {
        "rl_method": 42, "benchmark": 18, "classical_marl": 10, "industry": 6, "survey": 5, "framework": 3}
    assert {k: v for k, v in stats["counts"]["credit_granularity"].items() if v} == {
        "NA": 36, "agent": 23, "role": 10, "orchestrator": 8, "turn": 5, "message": 2}
    assert json.loads(json.dumps(stats))["crosstabs"]["reward_type x credit_granularity"]
