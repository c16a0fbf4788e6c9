"""A live OTLP build from the spans read on receipt (a file store's server keeps them, see live.READ_SPANS) stores
what a build from the stored parts does: the same traces and the same build warnings, for every recorded framework
run as its exporter sent it; parts the store would not give back as read are built from the store."""

import copy
import shutil
import time
from datetime import datetime

import pytest
from test_framework_fixtures import OTLP_FIXTURES, batches
from test_store_schema import migrated_before

from app.ingest.importers import otlp
from app.ingest.importers.common import HASH, KEEP
from app.ingest.importers.otlp_protobuf import decode_request
from app.ingest.log import Receipt
from app.services import live as live_service
from app.services.live import LiveTraces
from app.settings import Settings
from app.store import live as live_store
from app.store import traces as trace_store
from app.store.db import Database


def received(path, docs: list[dict], monkeypatch, keep_read: bool, build_each: bool = False) -> tuple[dict, list, int]:
    """Every stored trace, each live trace's build warnings, and how many times a build read stored parts, after
    receiving the documents (deep copies) in a LiveTraces that keeps spans as read, or not; `build_each`: building
    what is due after each document, not only at the end."""
    reads = []
    parts = live_service.live_store.live_parts
    monkeypatch.setattr(live_service.live_store, "live_parts", lambda *args: reads.append(args) or parts(*args))
    monkeypatch.setattr(live_service, "READ_SPANS", live_service.READ_SPANS if keep_read else 0)
    db = Database(path)
    live = LiveTraces(db)
    try:
        for doc in docs:
            live.receive_otlp(copy.deepcopy(doc), Receipt("POST /v1/traces", "otlp/protobuf", "spans"))
            if build_each:
                live.flush()
        live.flush()
    finally:
        live.close()
    try:
        ids = [row["trace_id"] for row in db.fetchall("SELECT trace_id FROM traces ORDER BY trace_id")]
        warnings = db.fetchall("SELECT source, source_trace_id, build_error, build_warnings FROM live_traces "
                               "ORDER BY source, source_trace_id")
        return {trace_id: trace_store.read_trace(db, trace_id) for trace_id in ids}, warnings, len(reads)
    finally:
        db.close()


def both(tmp_path, migrated_file, monkeypatch, docs: list[dict], build_each: bool = False) -> tuple[tuple, tuple]:
    """The documents received with spans kept as read, and without."""
    results = []
    for keep_read in (True, False):
        path = tmp_path / f"{keep_read}.duckdb"
        shutil.copyfile(migrated_file, path)
        results.append(received(path, docs, monkeypatch, keep_read, build_each))
    return results[0], results[1]


@pytest.mark.parametrize("name", OTLP_FIXTURES)
def test_a_build_from_the_spans_read_on_receipt_stores_what_one_from_the_stored_parts_does(
        tmp_path, migrated_file, monkeypatch, name):
    (traces, warnings, reads), (stored, stored_warnings, _) = both(
        tmp_path, migrated_file, monkeypatch, [decode_request(body) for body in batches(name)])
    assert traces and traces == stored and warnings == stored_warnings, name
    assert reads == 0 or name in ("autogen", "autogen_unwrapped"), name  # AutoGen's created agents are held apart


@pytest.mark.parametrize("name", OTLP_FIXTURES)
def test_builds_between_batches_import_copies_of_the_spans_read_and_store_what_the_stored_parts_do(
        tmp_path, migrated_file, monkeypatch, name):
    """Each build changes the spans it imports (their tree, operations, attributes): one after every batch takes
    copies, so the next build still reads the spans as received."""
    (traces, warnings, reads), (stored, stored_warnings, _) = both(
        tmp_path, migrated_file, monkeypatch, [decode_request(body) for body in batches(name)], build_each=True)
    assert traces and traces == stored and warnings == stored_warnings, name
    assert reads == 0 or name in ("autogen", "autogen_unwrapped"), name


def read_groups(docs: list[dict]) -> list[list]:
    """The spans of the documents as a SpanReader reads them on receipt, one group per scopeSpans entry."""
    groups = []
    for doc in docs:
        reader = otlp.SpanReader()
        by_entry: dict[int, list] = {}
        for where, rs, ss, raw in otlp.iter_spans(doc):
            by_entry.setdefault(id(ss), []).append(reader.read(where, rs, ss, raw))
        groups += by_entry.values()
    return groups


@pytest.mark.parametrize("name", OTLP_FIXTURES)
@pytest.mark.parametrize("read_under, built_under", [(KEEP, KEEP), (KEEP, HASH), (HASH, KEEP)])
def test_spans_read_ahead_import_as_spans_not_read_ahead(name, read_under, built_under):
    """What `prepare` read ahead of a span serves a build under the policy it was read under, of the span as it
    was read (otlp_patterns adds attributes to some): the same traces and warnings as without it."""
    groups = read_groups([decode_request(body) for body in batches(name)])
    plain = otlp.import_read(otlp.copy_read(groups), built_under)
    otlp.prepare([span for spans in groups for span in spans], read_under)
    assert any(span.said for spans in groups for span in spans), name
    ahead = otlp.import_read(groups, built_under)
    assert (ahead.traces, ahead.warnings) == (plain.traces, plain.warnings), name


def test_the_builder_reads_ahead_the_parts_kept_while_the_run_arrives(tmp_path, migrated_file, monkeypatch):
    """Between batches the builder reads ahead what the kept spans say; the build once the root span arrives
    stores what one from the stored parts does."""
    docs = [decode_request(body) for body in batches("pydantic_ai")]
    path = tmp_path / "live.duckdb"
    shutil.copyfile(migrated_file, path)
    monkeypatch.setattr(live_service, "BUILD_DELAY_S", 60)  # no build before the root span's batch
    db = Database(path)
    live = LiveTraces(db)
    try:
        for doc in docs[:-1]:
            live.receive_otlp(copy.deepcopy(doc), Receipt("POST /v1/traces", "otlp/protobuf", "spans"))
        deadline = time.monotonic() + 10
        while live._unprepared and time.monotonic() < deadline:
            time.sleep(0.01)
        kept = [span for parts in live._read.values() for part in parts for spans in part for span in spans]
        asked = [span for span in kept if span.op in (otlp.INFERENCE, otlp.TOOL)]
        assert asked and all(span.said for span in asked)
        live.receive_otlp(copy.deepcopy(docs[-1]), Receipt("POST /v1/traces", "otlp/protobuf", "spans"))
        live.flush()
        built = {row["trace_id"]: trace_store.read_trace(db, row["trace_id"])
                 for row in db.fetchall("SELECT trace_id FROM traces")}
    finally:
        live.close()
        db.close()
    _, (stored, _, _) = both(tmp_path, migrated_file, monkeypatch, docs)
    assert built == stored


def test_the_builder_reads_ahead_only_once_no_request_is_being_answered(tmp_path, migrated_file, monkeypatch):
    """Reading ahead while a request is answered would take the interpreter from its answer: the builder waits
    until every request being answered (`LiveTraces.answering`) is, then reads ahead."""
    docs = [decode_request(body) for body in batches("pydantic_ai")]
    path = tmp_path / "live.duckdb"
    shutil.copyfile(migrated_file, path)
    monkeypatch.setattr(live_service, "BUILD_DELAY_S", 60)
    db = Database(path)
    live = LiveTraces(db)
    try:
        with live.answering(), live.answering():
            live.receive_otlp(copy.deepcopy(docs[0]), Receipt("POST /v1/traces", "otlp/protobuf", "spans"))
            with live.answering():
                time.sleep(0.3)  # were the builder to read ahead now, it would in far less
            assert live._unprepared
        deadline = time.monotonic() + 10
        while live._unprepared and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not live._unprepared
    finally:
        live.close()
        db.close()


def test_every_request_is_being_answered_until_its_answer_is_sent(client, app, monkeypatch):
    """The app marks each request (Answering, outermost), an exporter's batch included, and only while it runs."""
    live = app.state.live
    during = []
    receive = live.receive_otlp
    monkeypatch.setattr(live, "receive_otlp", lambda *args, **kwargs: during.append(live._answering) or receive(
        *args, **kwargs))
    response = client.post("/v1/traces", content=batches("pydantic_ai")[0],
                           headers={"Content-Type": "application/x-protobuf"})
    assert response.status_code == 200 and during == [1] and live._answering == 0


def test_a_rebuild_overtaken_by_the_root_spans_batch_is_not_stored(tmp_path, migrated_file, monkeypatch):
    """The root span's batch arriving while a rebuild of the run so far imports: that rebuild stores nothing, the
    build after it stores the whole run once."""
    docs = pydantic_ai_docs()
    path = tmp_path / "live.duckdb"
    shutil.copyfile(migrated_file, path)
    db = Database(path)
    live = LiveTraces(db)
    stores, validations = [], []
    validate, store = live_service.problems_of, live_service.store_traces

    def root_arrives(traces):
        if not validations:
            live.receive_otlp(copy.deepcopy(docs[-1]), Receipt("POST /v1/traces", "otlp/protobuf", "spans"))
        validations.append(1)
        return validate(traces)

    monkeypatch.setattr(live_service, "problems_of", root_arrives)
    monkeypatch.setattr(live_service, "store_traces",
                        lambda *args, **kwargs: stores.append(1) or store(*args, **kwargs))
    try:
        for doc in docs[:-1]:
            live.receive_otlp(copy.deepcopy(doc), Receipt("POST /v1/traces", "otlp/protobuf", "spans"))
        live.flush()
        built = {row["trace_id"]: trace_store.read_trace(db, row["trace_id"])
                 for row in db.fetchall("SELECT trace_id FROM traces")}
        status = [live_store.live_status(db, trace_id)["status"] for trace_id in built]
    finally:
        live.close()
        db.close()
    monkeypatch.setattr(live_service, "problems_of", validate)
    monkeypatch.setattr(live_service, "store_traces", store)
    _, (stored, _, _) = both(tmp_path, migrated_file, monkeypatch, docs)
    assert len(validations) == 2 and len(stores) == 1 and built == stored and status == ["complete"]


def test_a_build_that_validation_refuses_leaves_the_version_stored_before(tmp_path, migrated_file, monkeypatch):
    """A build that validation refuses stores nothing: the run's version stored before stays, as read, and the
    status names the problem."""
    docs = pydantic_ai_docs()
    path = tmp_path / "live.duckdb"
    shutil.copyfile(migrated_file, path)
    db = Database(path)
    live = LiveTraces(db)
    refusal = [{"trace": 0, "index": 0, "path": "events[0].t", "message": "refused for the test"}]
    try:
        for doc in docs[:-1]:
            live.receive_otlp(copy.deepcopy(doc), Receipt("POST /v1/traces", "otlp/protobuf", "spans"))
        live.flush()  # a build while receiving stores the run so far
        (trace_id,) = [row["trace_id"] for row in db.fetchall("SELECT trace_id FROM traces")]
        before = trace_store.read_trace(db, trace_id)
        monkeypatch.setattr(live_service, "problems_of", lambda traces: refusal)
        live.receive_otlp(copy.deepcopy(docs[-1]), Receipt("POST /v1/traces", "otlp/protobuf", "spans"))
        live.flush()
        after = trace_store.read_trace(db, trace_id)
        status = live_store.live_status(db, trace_id)
    finally:
        live.close()
        db.close()
    assert after == before and status["build_error"] == "events[0].t: refused for the test"
    assert status["status"] == "complete" and status["received"] == sum(
        len(ss["spans"]) for doc in docs for rs in doc["resourceSpans"] for ss in rs["scopeSpans"])


def pydantic_ai_docs() -> list[dict]:
    return [decode_request(body) for body in batches("pydantic_ai")]


def first_span(docs: list[dict]) -> dict:
    return docs[0]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]


def test_a_part_holding_a_non_finite_double_is_built_as_stored(tmp_path, migrated_file, monkeypatch):
    """Protobuf can carry NaN, which the stored part holds as null: the build reads the stored parts."""
    docs = pydantic_ai_docs()
    first_span(docs)["attributes"].append({"key": "app.ratio", "value": {"doubleValue": float("nan")}})
    (traces, warnings, reads), (stored, stored_warnings, _) = both(tmp_path, migrated_file, monkeypatch, docs)
    assert traces == stored and warnings == stored_warnings and reads > 0


def test_a_batch_read_with_warnings_is_built_as_stored(tmp_path, migrated_file, monkeypatch):
    """An odd span kind and a repeated attribute are warned about by the build that reads them."""
    docs = pydantic_ai_docs()
    first_span(docs)["kind"] = 9
    first_span(docs)["attributes"] += first_span(docs)["attributes"][:1]
    (traces, warnings, reads), (stored, stored_warnings, _) = both(tmp_path, migrated_file, monkeypatch, docs)
    assert traces == stored and warnings == stored_warnings and reads > 0
    said = " ".join(row["build_warnings"] for row in warnings)
    assert "unknown kind 9" in said and "more than once" in said


def test_a_retried_batch_and_a_build_between_batches_keep_the_trace_whole(tmp_path, migrated_file, monkeypatch):
    """A retry adds nothing to what is kept; a build between batches imports a copy of what was kept, and the
    build after the later batches (the root span's) the spans kept, no longer kept then: no stored part is read."""
    path = tmp_path / "live.duckdb"
    shutil.copyfile(migrated_file, path)
    docs = pydantic_ai_docs()
    reads = []
    parts = live_service.live_store.live_parts
    monkeypatch.setattr(live_service.live_store, "live_parts", lambda *args: reads.append(args) or parts(*args))
    db = Database(path)
    live = LiveTraces(db)
    try:
        for doc in docs[:1] + docs[:1]:
            live.receive_otlp(copy.deepcopy(doc), Receipt("POST /v1/traces", "otlp/protobuf", "spans"))
        live.flush()
        assert live._read_spans == sum(len(ss["spans"]) for rs in docs[0]["resourceSpans"] for ss in rs["scopeSpans"])
        for doc in docs[1:]:
            live.receive_otlp(copy.deepcopy(doc), Receipt("POST /v1/traces", "otlp/protobuf", "spans"))
        live.flush()
        assert live._read_spans == 0 and not reads
    finally:
        live.close()
        db.close()
    (whole, _, _), _ = both(tmp_path, migrated_file, monkeypatch, docs)
    db = Database(path)
    try:
        assert {trace_id: trace_store.read_trace(db, trace_id) for trace_id in whole} == whole
    finally:
        db.close()


def test_parts_stored_before_0025_read_as_they_were_beside_compressed_ones(tmp_path):
    """Migration 0025 stores a part's JSON text compressed; one stored before it is read as the text it was."""
    db = migrated_before(tmp_path / "old.duckdb", "0025")
    old = '{"resourceSpans": [], "name": "caf\u00e9"}'
    db.execute("INSERT INTO live_parts VALUES ('otlp', 'ab', '2026-11-01 10:00:00', ?)", [old])
    assert "0025_live_parts_packed.sql" in db.migrate(Settings().migrations_dir)
    new = '{"resourceSpans":[' + ",".join(['{"name":"\u00fc \U0001f600"}'] * 50) + "]}"
    db.write(lambda cur: live_store.insert_part(cur, "otlp", "ab", datetime(2026, 11, 1, 10, 0, 1), new))
    assert db.execute("SELECT octet_length(body) FROM live_parts ORDER BY received_at").fetchall()[1][0] < len(new)
    assert live_store.live_parts(db, "otlp", "ab") == [old, new]
    assert live_store.live_parts_of_source(db, "otlp") == [("ab", old), ("ab", new)]
    db.close()
