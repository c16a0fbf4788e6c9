"""Bounded work for any input (issue 28 part 3): a body of a million broken traces is answered 4xx in seconds with a
short answer and little memory on a real server, a forged zip member is refused without inflating it, and trace ids
that no URL or file name could carry are refused naming the trace. Nothing is stored after any refusal."""

import gzip
import io
import json
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import BASE_URL, SERVER_START_TIMEOUT_S, free_port, make_trace, post_json, wait_until_up
from fastapi.testclient import TestClient

from app.domain.validation import MAX_COUNTED_PROBLEMS, MAX_PROBLEMS
from app.ingest.documents import MAX_FILES, MAX_JSON_VALUES
from app.main import create_app
from app.settings import Settings

MILLION = 1_000_000
COSTS = {"tokens": 0, "wall_clock_s": 0, "tool_calls": 0, "messages": 0}
# The three shapes of the security probe, each a million empty objects or a third of one as events.
SHAPES = {
    "array of empty traces": b"[" + b",".join([b"{}"] * MILLION) + b"]",
    "JSON Lines of empty traces": b"{}\n" * MILLION,
    "one trace of empty events": json.dumps({"trace_id": "t", "task_id": "x", "edges": [], "rewards": {},
                                             "costs": COSTS}).encode().replace(
        b'"edges"', b'"events": [' + b",".join([b"{}"] * (MILLION // 3)) + b'], "edges"'),
}
MAX_ANSWER_BYTES = 100_000
MAX_GROWTH_MB = 200
MAX_SECONDS = 10
FORGED_MEMBER_MB = 64  # what the forged member really inflates to; it declares FORGED_DECLARED bytes
FORGED_DECLARED = 100
AGENTS_EXPORT = Path(__file__).parent / "fixtures" / "openai_agents" / "handoff_guardrails.json"
AGENTS_TRACE_ID = b"trace_59b12ddf37cb4c089652f3667924438c"
BAD_TRACE_IDS = ["a/b", "../../etc/passwd", "x\u0000y", "x" * 1_000_000, "..", ".", "a\\b", "tab\there", "e\u0085"]


@contextmanager
def served(db_path: Path):
    """A real `orchestrace serve` over a DuckDB file: its URL and process id (whose memory the tests read)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--db", str(db_path), "--port", str(port)],
                            cwd=Path(__file__).resolve().parent.parent, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(proc, url, time.monotonic() + SERVER_START_TIMEOUT_S)
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with served(tmp_path_factory.mktemp("bounded") / "bounded.duckdb") as url_and_pid:
        yield url_and_pid


def memory_mb(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (the peak since the last reset) of a process, in MB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return {key: int(fields[key].split()[0]) // 1024 for key in ("VmRSS", "VmHWM")}


def post(url: str, body: bytes, path: str = "/api/traces", **headers) -> tuple[int, bytes]:
    request = urllib.request.Request(url + path, data=body, method="POST",
                                     headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def measured(server, body: bytes, path: str = "/api/traces", **headers) -> tuple[int, bytes, float, int]:
    """Post to the server: status, answer, seconds and how far its memory rose above what it held before (MB)."""
    url, pid = server
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak (VmHWM) starts again from the current size
    before = memory_mb(pid)["VmRSS"]
    start = time.monotonic()
    status, answer = post(url, body, path, **headers)
    return status, answer, time.monotonic() - start, memory_mb(pid)["VmHWM"] - before


def stored(server) -> int:
    with urllib.request.urlopen(server[0] + "/api/traces") as response:
        return json.load(response)["total"]


def last_logged(server) -> dict:
    with urllib.request.urlopen(server[0] + "/api/ingest-log?limit=1") as response:
        return json.load(response)["items"][0]


@pytest.mark.parametrize("shape", SHAPES)
def test_a_million_broken_traces_are_answered_quickly_briefly_and_in_little_memory(server, shape):
    status, answer, seconds, growth = measured(server, gzip.compress(SHAPES[shape]), **{"Content-Encoding": "gzip"})
    assert status == 422 and len(answer) < MAX_ANSWER_BYTES, (status, len(answer))
    assert seconds < MAX_SECONDS and growth < MAX_GROWTH_MB, (seconds, growth)
    refusal = json.loads(answer)
    errors = refusal["errors"]
    assert refusal["error"] == f"at least {MAX_COUNTED_PROBLEMS:,} problem(s) in the submitted traces"
    assert len(errors) == MAX_PROBLEMS + 1 and errors[0]["index"] == 0 and errors[0]["path"] in ("", "events[0]")
    more = MAX_COUNTED_PROBLEMS - MAX_PROBLEMS
    assert errors[-1]["message"] == f"and at least {more:,} more problems (not listed), from this trace on"
    assert stored(server) == 0
    assert last_logged(server)["status"] == 422 and last_logged(server)["error"] == refusal["error"]


def test_a_body_of_more_values_than_a_request_may_hold_is_refused_before_it_is_read(server):
    values = MAX_JSON_VALUES + 2
    body = gzip.compress(b"[" + b",".join([b"{}"] * (values // 2)) + b"]")
    status, answer, seconds, growth = measured(server, body, **{"Content-Encoding": "gzip"})
    assert status == 413 and f"more than {MAX_JSON_VALUES:,} JSON values" in json.loads(answer)["error"]
    assert seconds < MAX_SECONDS and growth < MAX_GROWTH_MB, (seconds, growth)
    assert stored(server) == 0 and last_logged(server)["status"] == 413


def test_a_json_request_of_more_values_than_a_request_may_hold_is_refused_before_it_is_read(client):
    body = b"[" + b",".join([b"{}"] * (MAX_JSON_VALUES // 2 + 1)) + b"]"
    response = client.post("/api/annotations", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and f"more than {MAX_JSON_VALUES:,} JSON values" in response.json()["error"]


def forged_zip() -> bytes:
    """A zip whose member declares FORGED_DECLARED bytes in its local header and its central directory entry, and
    inflates to FORGED_MEMBER_MB (written as a stream, so the test never holds it whole)."""
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped, zipped.open("traces.json", "w") as member:
        for _ in range(FORGED_MEMBER_MB):
            member.write(b" " * 2**20)
    data = bytearray(archive.getvalue())
    real = FORGED_MEMBER_MB * 2**20
    for magic, size_at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # uncompressed size: local, central
        at = data.index(magic) + size_at
        assert struct.unpack_from("<I", data, at) == (real,)
        struct.pack_into("<I", data, at, FORGED_DECLARED)
    return bytes(data)


def test_a_forged_zip_member_is_refused_naming_it_without_being_inflated(server):
    body, boundary = multipart("all.zip", forged_zip())
    status, answer, seconds, growth = measured(server, body, **{"Content-Type": f"multipart/form-data; "
                                                                               f"boundary={boundary}"})
    assert status == 400 and json.loads(answer)["error"].startswith("all.zip:traces.json: not a readable zip file")
    assert seconds < MAX_SECONDS and growth < FORGED_MEMBER_MB // 2, (seconds, growth)
    assert stored(server) == 0 and last_logged(server)["status"] == 400


def multipart(name: str, data: bytes) -> tuple[bytes, str]:
    boundary = "bounded-input-boundary"
    head = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
            "Content-Type: application/zip\r\n\r\n").encode()
    return head + data + f"\r\n--{boundary}--\r\n".encode(), boundary


@pytest.fixture
def small_client(tmp_path):
    with TestClient(create_app(Settings(db=tmp_path / "small.duckdb", max_body_bytes=10_000)),
                    base_url=BASE_URL) as client:
        yield client


def zipped(members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", method) as zipped:
        for name, data in members.items():
            zipped.writestr(name, data)
    return archive.getvalue()


def test_zip_members_past_the_limit_unreadable_or_too_many_are_refused_naming_them(small_client):
    def upload(archive: bytes):
        response = small_client.post("/api/traces", files=[("file", ("all.zip", archive, "application/zip"))])
        return response.status_code, response.json()["error"]

    small = json.dumps(make_trace("z")).encode()
    status, error = upload(zipped({"a.json": small, "b.json": b" " * 20_000}))
    assert status == 413 and error.startswith("all.zip:b.json: the request's files expand to more than 10000")
    status, error = upload(zipped({"a.json": small}, zipfile.ZIP_BZIP2))
    assert status == 400 and error.startswith("all.zip:a.json: zip compression method 12 is not read")
    encrypted = bytearray(zipped({"a.json": small}))
    for magic, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        encrypted[encrypted.index(magic) + flags_at] |= 1
    status, error = upload(bytes(encrypted))
    assert status == 400 and error == "all.zip:a.json: an encrypted zip member: send it unencrypted"
    assert small_client.get("/api/traces").json()["total"] == 0


def test_a_zip_of_more_files_than_a_request_may_hold_is_refused_before_it_is_opened(client):
    archive = zipped({f"{i}.json": b"" for i in range(MAX_FILES + 1)}, zipfile.ZIP_STORED)
    response = client.post("/api/traces", files=[("file", ("all.zip", archive, "application/zip"))])
    assert response.status_code == 413 and f"more than {MAX_FILES:,} files" in response.json()["error"]
    assert client.get("/api/traces").json()["total"] == 0


@pytest.mark.parametrize("trace_id", BAD_TRACE_IDS, ids=repr)
def test_trace_ids_no_url_or_file_name_can_carry_are_refused_naming_the_trace(client, trace_id):
    response = post_json(client, [make_trace("fine"), make_trace(trace_id)])
    assert response.status_code == 422, response.text
    (error,) = response.json()["errors"]
    assert error["trace"] == 1 and error["index"] == 1 and error["path"] == "trace_id"
    assert "a trace id" in error["message"] and len(error["message"]) < 300
    assert client.get("/api/traces").json()["total"] == 0
    assert client.get("/api/ingest-log").json()["items"][0]["status"] == 422


def test_an_imported_trace_id_is_checked_as_an_uploaded_one(client):
    export = AGENTS_EXPORT.read_bytes().replace(AGENTS_TRACE_ID, b"../../etc/passwd")
    response = client.post("/api/traces", params={"format": "openai_agents"}, content=export)
    assert response.status_code == 422
    (error,) = response.json()["errors"]
    assert error["path"] == "trace_id" and "a trace id" in error["message"]
    assert client.get("/api/traces").json()["total"] == 0


def test_the_cli_validates_through_the_same_capped_report(tmp_path, capsys):
    from app.cli import main

    path = tmp_path / "broken.json"
    path.write_text(json.dumps([{}] * 1000))
    assert main(["validate", str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == MAX_PROBLEMS + 1
    assert lines[-1].endswith(f"and {6000 - MAX_PROBLEMS:,} more problems (not listed), from this trace on")


def test_an_exporter_or_a_label_import_cannot_send_more_values_than_a_request_holds(client):
    from app.ingest.documents import MAX_JSON_VALUES
    body = b"[" + b"0," * MAX_JSON_VALUES + b"0]"
    assert client.post("/v1/traces", content=body, headers={"Content-Type": "application/json"}).status_code == 413
    assert client.post("/api/annotations/import", content=body,
                       headers={"Content-Type": "application/json"}).status_code == 413


def test_an_agents_sdk_trace_id_that_cannot_name_a_trace_is_refused_naming_it(client):
    record = {"object": "trace", "id": "trace_a/b", "workflow_name": "w"}
    answer = client.post("/v1/traces/ingest", json={"data": [record]})
    assert answer.status_code in (200, 400, 422) and "trace id" in answer.text
    assert client.get("/api/traces").json()["total"] == 0
