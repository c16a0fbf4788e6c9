"""`POST /v1/traces` live: a real server, real GenAI spans from pydantic-ai agents, sent by the real OTLP/HTTP
exporter of the OpenTelemetry SDK through a BatchSpanProcessor, so one run arrives split over several batches.

The same spans are kept in memory (an InMemorySpanExporter on the same TracerProvider), which gives what
the stored trace must hold, and lets a batch be sent again by hand as an exporter's retry would.
"""

import json
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

pytestmark = pytest.mark.heavy

pytest.importorskip("pydantic_ai", reason="pydantic-ai-slim emits GenAI spans offline with TestModel")
pytest.importorskip("opentelemetry.sdk", reason="opentelemetry-sdk records and batches the spans")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter",
                    reason="opentelemetry-exporter-otlp-proto-http sends the spans over OTLP/HTTP")

import requests  # noqa: E402  (the exporter's transport)
from conftest import running_server  # noqa: E402
from imported import only_trace, otlp_json_of  # noqa: E402
from opentelemetry.exporter.otlp.proto.http import Compression  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter, SpanExportResult  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from pydantic_ai.models.instrumented import InstrumentationSettings  # noqa: E402
from test_import_otlp import run_delegation  # noqa: E402

from app.ingest.importers.otlp import import_otlp  # noqa: E402

BATCH = 4  # the delegation run ends 13 spans: batches of 4, 4, 4 and 1 (the root span, which ends last)
BUILD_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A real uvicorn over a fresh DuckDB file, as `orchestrace serve` starts it; its base URL."""
    with running_server(tmp_path_factory.mktemp("live") / "live.duckdb") as url:
        yield url


def get(url: str) -> bytes:
    with urllib.request.urlopen(url) as response:
        assert response.status == 200
        return response.read()


def get_json(url: str):
    return json.loads(get(url))


def attribute(span, key: str):
    return (span.attributes or {}).get(key)


def run_exported(url: str, **exporter_options):
    """The delegation scenario, exported live in batches of BATCH spans; the exporter, and every span as sent."""
    session = requests.Session()  # the exporter's own transport; a hook notes what went over the wire
    session.hooks["response"].append(lambda response, *args, **kwargs: encodings.append(
        (response.status_code, response.request.headers.get("Content-Type"),
         response.request.headers.get("Content-Encoding"))))
    encodings: list[tuple] = []
    exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces", timeout=30, session=session, **exporter_options)
    sent: list[list] = []

    class Recording(SpanExporter):  # the real exporter does the work; the batches it was given are noted
        def export(self, spans):
            sent.append(list(spans))
            return exporter.export(spans)

        def shutdown(self):  # kept open: the test sends a batch again by hand
            pass

    recording = Recording()
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(BatchSpanProcessor(recording, max_export_batch_size=BATCH,
                                                   schedule_delay_millis=60_000))
    run_delegation(InstrumentationSettings(tracer_provider=provider, include_content=True))
    assert provider.force_flush(30_000)
    spans = memory.get_finished_spans()
    provider.shutdown()
    return exporter, spans, sent, encodings


def receipts(url: str, trace_id: str | None = None) -> list[dict]:
    query = urllib.parse.urlencode({"endpoint": "POST /v1/traces", "limit": 1000,
                                    **({"trace_id": trace_id} if trace_id else {})})
    return get_json(f"{url}/api/ingest-log?{query}")["items"]


def wait_complete(url: str, trace_id: str) -> None:
    """Wait until the trace is stored whole: its root span arrived and the builder has run after it."""
    deadline = time.monotonic() + BUILD_TIMEOUT_S
    while True:
        try:
            if get_json(f"{url}/api/traces/{urllib.parse.quote(trace_id)}/live")["status"] == "complete":
                break
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise
        assert time.monotonic() < deadline, "the trace was never complete"
        time.sleep(0.05)
    page = get(f"{url}/traces/{urllib.parse.quote(trace_id)}").decode()
    assert "received live:" in page and ">receiving</span>" not in page


OPTIONS = {"protobuf": {}, "protobuf_gzip": {"compression": Compression.Gzip}}
CONTENT_ENCODING = {"protobuf": None, "protobuf_gzip": "gzip"}


@pytest.fixture(scope="module")
def runs():
    """One exported run per exporter setting, made on first use: (exporter, spans, batches as sent, and each
    request's answer status, Content-Type and Content-Encoding)."""
    done: dict[str, tuple] = {}

    def run(url: str, name: str) -> tuple:
        if name not in done:
            done[name] = run_exported(url, **OPTIONS[name])
        return done[name]

    yield run
    for exporter, *_ in done.values():
        exporter.shutdown()


@pytest.mark.parametrize("name", list(OPTIONS))
def test_an_instrumented_run_sent_in_batches_is_stored_whole_and_a_retry_changes_nothing(server, runs, name):
    exporter, spans, sent, requests_sent = runs(server, name)
    trace_hex = format(spans[0].context.trace_id, "032x")
    trace_id = f"otlp-{trace_hex}"
    assert {format(s.context.trace_id, "032x") for s in spans} == {trace_hex}
    assert len(spans) == 13 and [len(b) for b in sent] == [4, 4, 4, 1]  # split over several batches
    assert sent[-1][0].parent is None  # the root span ends last: its batch completes the trace
    assert requests_sent == [(200, "application/x-protobuf", CONTENT_ENCODING[name])] * len(sent)

    wait_complete(server, trace_id)
    raw = get(f"{server}/api/traces/{trace_id}")
    trace = json.loads(raw)
    events = trace["events"]
    assert trace["trace_id"] == trace_id and trace["system"] == "pydantic-ai"
    agents = {e["agent"] for e in events if e["type"] != "tool_result" and e["agent"] != "user"}
    assert sorted(a.split("#")[0] for a in agents) == ["lead", "researcher", "writer"]  # one instance each
    spawns = [e for e in events if e["type"] == "spawn"]
    lead = next(a for a in agents if a.startswith("lead#"))
    assert sorted(e["role"] for e in spawns) == ["researcher", "writer"]
    assert all(e["agent"] == lead and e["to"] in agents for e in spawns)
    calls = sorted(e["tool"] for e in events if e["type"] == "tool_call")
    assert calls == ["ask_researcher", "ask_writer", "draft", "search"]
    assert sorted(e["tool"] for e in events if e["type"] == "tool_result") == calls

    chats = [s for s in spans if attribute(s, "gen_ai.operation.name") == "chat"]
    tokens = sum(attribute(s, "gen_ai.usage.input_tokens") + attribute(s, "gen_ai.usage.output_tokens") for s in chats)
    assert tokens > 0 and trace["costs"]["tokens"] == tokens
    assert trace["costs"]["messages"] == len(chats) and trace["costs"]["tool_calls"] == len(calls)

    log = receipts(server, trace_id)
    assert len(log) == len(sent)  # one receipt per batch, each naming the trace
    assert sum(r["used"] for r in log) == len(spans) and all(r["duplicates"] == 0 for r in log)
    assert [r["created"] for r in log].count([trace_id]) == 1
    assert all(r["status"] == 200 and r["skipped"] == 0 and r["format"] == "otlp/protobuf" for r in log)

    assert trace == only_trace(import_otlp(otlp_json_of(spans)))  # the batches merged: as if sent at once
    assert all("content" in e for e in events if e["type"] in ("tool_call", "tool_result"))  # what they said

    for retried in (sent[1], spans):  # an exporter retrying a batch whose answer it did not get; then everything
        before = len(receipts(server))
        assert exporter.export(retried) == SpanExportResult.SUCCESS
        retry = receipts(server)
        assert len(retry) == before + 1
        assert retry[0]["received"] == retry[0]["duplicates"] == len(retried) and retry[0]["used"] == 0
        assert retry[0]["created"] == retry[0]["extended"] == [] and retry[0]["status"] == 200
        assert retry[0]["repeated"] == [trace_id]  # the retry is found under its trace
        assert get(f"{server}/api/traces/{trace_id}") == raw
    assert len(receipts(server, trace_id)) == len(sent) + 2
    wait_complete(server, trace_id)


def test_the_trace_page_counts_the_spans_received_live(server, runs):
    spans = runs(server, "protobuf")[1]
    wait_complete(server, f"otlp-{spans[0].context.trace_id:032x}")
    page = get(f"{server}/traces/otlp-{spans[0].context.trace_id:032x}").decode()
    assert f"received live: {len(spans)} spans" in page


def test_a_server_whose_policy_is_hash_keeps_no_content_of_what_an_exporter_sends(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCHESTRACE_CONTENT", "hash")  # the server reads it as it starts
    with running_server(tmp_path / "hashed.duckdb") as url:
        exporter, spans, _, _ = run_exported(url)
        exporter.shutdown()
        trace_id = f"otlp-{spans[0].context.trace_id:032x}"
        wait_complete(url, trace_id)
        trace = get_json(f"{url}/api/traces/{trace_id}")
    assert trace["events"] and not any("content" in e for e in trace["events"])
    assert trace == only_trace(import_otlp(otlp_json_of(spans), "hash"))
