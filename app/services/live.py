"""Traces that exporters send in batches: OTLP on `/v1/traces`, the OpenAI Agents SDK on `/v1/traces/ingest`, and
the coding CLIs' OTLP log events on `/v1/logs` (Claude Code's by session, Codex's by root thread; see cli_telemetry).

Each batch keeps only the spans (or SDK records) not received before, as one part per trace, so a
retried batch adds nothing. A trace is built from its parts, and stored replacing its previous version,
by one builder thread: at once when its root span arrives (the run has ended), otherwise once batches
pause for `BUILD_DELAY_S`, so a long stream of batches costs one build, not one per batch, and no
exporter waits for a build (a large one would pass its timeout). A run still receiving is rebuilt whole, so its
rebuilds are spaced by REBUILD_SPACING times the last one's length. Until its root span arrives a trace
is "receiving"; until the build after it, "building".

Builds keep the content the spans carried unless the server's content policy (`ORCHESTRACE_CONTENT`) is `hash`.
The receivers pass the server's policy with every batch and a `hash` one holds from then on, so no build keeps
content once a batch arrived under it; the policy given at construction covers the builds that `recover` runs
before any batch arrives.

A batch extends a trace its exporter is still sending; one that names a trace already stored and complete (an
upload's, or a live trace built since its root span arrived) would replace it, which only callers who may
replace traces (admins, or anyone in open mode) do: for others it is refused whole (`StoredTrace`, 403).

A CLI session has no root: its trace is built once its batches pause, and grows with each later batch. A Codex
sub-agent is a thread of its own, held under its own id until its parent's spawn names it; then its parts join the
root thread's trace, and a trace built from them alone is removed. The CLIs' spans on `/v1/traces` repeat what
their log events say: they are counted skipped, naming the trace their logs build (cli_telemetry.span_reason).
"""

import copy
import logging
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from app.domain.jsontext import dumps, loads
from app.domain.refusals import Refusal
from app.ingest import log as ingest_log
from app.ingest.importers import cli_telemetry, openai_agents, otlp, otlp_logs
from app.ingest.importers.common import KEEP, ContentPolicy, ImportFailed, show, strictest
from app.ingest.log import Receipt
from app.ingest.pipeline import problems_of
from app.services.graph import prepare_lod
from app.store import live as live_store
from app.store import traces as trace_store
from app.store.db import Database
from app.store.db import utc_now as _now
from app.store.gcpause import paused_gc
from app.store.writes import delete_trace, store_traces

log = logging.getLogger("orchestrace.live")

OTLP, AGENTS = "otlp", "openai_agents"
# Traces of nothing but create_agent spans (AutoGen creates agents before the run, each in a trace of its
# own): held under this source until a run of those agents is built, which takes them in.
CREATED = "otlp_created"
BUILD_DELAY_S = 1.0
# A rebuild of a run still receiving starts no sooner after the last one ended than this many times as long as that
# one took. An exporter sending every few seconds (the BatchSpanProcessor's 5 s) would otherwise set off a build of
# the whole run so far after each batch: work growing with the square of the run's length, and builds back to back
# once one takes longer than the pause between batches. Spaced, rebuilds take at most 1 / (1 + REBUILD_SPACING) of the
# builder's time, the run's view lagging by about that many build times. The build once its root span arrives waits
# for nothing.
REBUILD_SPACING = 4
SPACED_TRACES = 1000  # traces whose next rebuild's earliest start is kept, the latest built
# A file store's server is its only writer, so it keeps the ids received for the traces batches came for
# lately, and a batch need not look them up in the database (3-4 ms a batch). On a lake, other instances
# add ids too: every batch looks them up.
SEEN_TRACES = 16
# Likewise it keeps the spans of a trace's batches as read on receipt, so that its builds need not write, parse and
# read them again (a third of a 20,000-span build): a build while the trace receives imports copies of them, the one
# once its root span arrived the spans themselves, which it drops. At most READ_SPANS. While no build is due, the
# builder reads ahead what each kept part's model and tool spans say for their events (otlp.prepare: content, model,
# token counts), work the build once the root span arrives then skips (a fifth of its import).
READ_SPANS = 200_000
# Only a non-finite double (protobuf's NaN or infinity) is stored otherwise than read: as null. A part holding one is
# built from what was stored.
NOT_AS_READ = '"doubleValue":null'
RUN_MEMBERS = 1000  # live traces of one run a build takes in, at most
THREAD_LINK = "thread:"  # a live item naming a Codex sub-agent's thread that its root thread's trace holds


class StoredTrace(Refusal, PermissionError):
    """A batch that would replace a stored, complete trace, from a caller who may not replace traces."""

    status = 403


@dataclass
class _Incoming:
    """The new items of one trace in one batch."""

    ids: list[str]
    has_root: bool
    usable: bool
    body: object
    run_keys: frozenset = frozenset()  # OTLP: what ties it to other traces of its run (live_store.run_members)
    operations: frozenset = frozenset()  # OTLP: the operations of its spans, to name what could not be used
    as_read: bool = False  # OTLP: its spans read as a build reads them (no odd kind or repeated attribute)


class LiveTraces:
    """Receives batches into a database and builds their traces; `close` runs the builds still due."""

    def __init__(self, db: Database, content_policy: ContentPolicy = KEEP):
        self.db = db
        self.content_policy = content_policy
        self._due: dict[tuple[str, str], float] = {}  # trace -> when to build it (monotonic seconds)
        self._asked: dict[tuple[str, str], float] = {}  # trace -> when a batch last asked for its build
        self._spaced: set[tuple[str, str]] = set()  # traces whose due build is a rebuild while receiving
        self._not_before: OrderedDict[tuple[str, str], float] = OrderedDict()  # trace -> its next rebuild's start
        self._busy = 0  # builds running
        self._answering = 0  # requests being answered (see `answering`)
        self._seen: OrderedDict[tuple[str, str], set[str]] | None = None if db.is_lake else OrderedDict()
        self._read: OrderedDict[tuple[str, str], list[list]] | None = None if db.is_lake else OrderedDict()
        self._read_spans = 0  # spans held in _read
        self._unprepared: deque[tuple[tuple[str, str], list]] = deque()  # parts kept, not read ahead yet
        self._seen_lock = threading.Lock()  # held from a batch's lookup until its ids are added, once committed
        self._changed = threading.Condition()
        self._stopping = False
        self._worker = threading.Thread(target=self._work, name="live-trace-builder", daemon=True)
        self._worker.start()

    # ---- receiving ----------------------------------------------------------------------------

    def receive_otlp(self, doc: dict, receipt: Receipt, content_policy: ContentPolicy = KEEP,
                     may_replace: bool = True) -> None:
        """Keep the new, usable spans of an OTLP/JSON-shaped request; spans that cannot be used are
        counted as skipped in the receipt, each with its reason. Without `may_replace`, StoredTrace refuses a
        batch that would replace a stored, complete trace."""
        self.content_policy = strictest(self.content_policy, content_policy)
        if not otlp.looks_like_otlp(doc):
            raise ImportFailed("body is not an OTLP ExportTraceServiceRequest (no resourceSpans array)")
        incoming: dict[str, dict] = {}
        reader = otlp.SpanReader()
        for where, resource, scope, raw in otlp.iter_spans(doc):
            receipt.received += 1
            # iter_spans gives the resourceSpans and scopeSpans entries: the CLIs are told by resource and scope
            cli_span = reader.cli_reason(resource, scope, raw)
            if cli_span:
                receipt.skip(cli_span)
                continue
            try:
                span = reader.read(where, resource, scope, raw)
            except ImportFailed as exc:
                receipt.skip(str(exc))
                continue
            part = incoming.get(span.trace_id)
            if part is None:
                part = incoming[span.trace_id] = {"ids": [], "root": False, "usable": False, "groups": {},
                                                  "creates": True, "keys": set(), "unknown": Counter(),
                                                  "operations": set()}
            try:
                part["keys"].update(f"{kind}:{value}" for kind, value in otlp.run_keys(span)
                                    if (kind, value) != ("trace", span.trace_id))
            except ImportFailed:  # an unreadable key attribute: the build names it
                pass
            if span.op is None:
                part["unknown"][span.operation] += 1
            part["operations"].add(span.operation)
            part["ids"].append(span.id)
            part["root"] |= span.parent_id is None
            part["usable"] |= span.op is not None and span.op != otlp.STRUCTURE
            part["creates"] &= span.op == otlp.CREATE
            key = (id(resource), id(scope))
            group = part["groups"].get(key)
            if group is None:
                group = part["groups"][key] = (resource, scope, [])
            group[2].append((span.id, raw, span))
        unknown = sum((p["unknown"] for p in incoming.values() if p["usable"] or p["keys"]), Counter())
        for operation, count in unknown.items():  # spans of no GenAI operation kept, by operation name
            receipt.warnings.append(f"{count} span(s) of operation {show(operation)}, not an agent, model or tool "
                                    "span: read only for the structure around them (the build's warnings name any "
                                    "with nothing of a run below them)")
        created = {trace: p for trace, p in incoming.items() if p["creates"]
                   and live_store.live_trace(self.db, OTLP, trace) is None}
        for trace, p in created.items():
            receipt.warnings.append(f"trace {trace}: {len(p['ids'])} create_agent span(s) held for the run "
                                    "that invokes those agents")
        as_read = not reader.odd_kinds and not reader.repeated_attributes
        self._receive([
            (CREATED, {trace: _Incoming(p["ids"], False, True, p["groups"]) for trace, p in created.items()}, False),
            (OTLP, {trace: _Incoming(p["ids"], p["root"], p["usable"], p["groups"], frozenset(p["keys"]),
                             frozenset(p["operations"]), as_read)
                    for trace, p in incoming.items() if trace not in created}, True),
        ], receipt, may_replace)

    def receive_agents(self, doc, receipt: Receipt, content_policy: ContentPolicy = KEEP,
                       may_replace: bool = True) -> None:
        """Keep the new records of an Agents SDK export (`{"data": [...]}`); `may_replace` as for OTLP."""
        self.content_policy = strictest(self.content_policy, content_policy)
        records = doc.get("data") if isinstance(doc, dict) else None
        if not isinstance(records, list):
            raise ImportFailed('body is not an OpenAI Agents SDK export: expected {"data": [...]}')
        incoming: dict[str, dict] = {}
        for i, record in enumerate(records):
            receipt.received += 1
            problem = openai_agents.record_problem(record, f"data[{i}]")
            if problem:
                receipt.skip(problem)
                continue
            trace_id = record["id"] if record["object"] == openai_agents.TRACE else record["trace_id"]
            part = incoming.setdefault(trace_id, {"ids": [], "root": False, "records": []})
            part["ids"].append(record["id"])
            part["root"] |= record["object"] == openai_agents.SPAN and not record.get("parent_id")
            part["records"].append(record)
        self._receive([(AGENTS, {trace: _Incoming(p["ids"], p["root"], True, p["records"])
                                 for trace, p in incoming.items()}, True)], receipt, may_replace)

    def receive_logs(self, doc: dict, receipt: Receipt, content_policy: ContentPolicy = KEEP,
                     may_replace: bool = True) -> None:
        """Keep the new records of a coding CLI's OTLP logs request under their session (Claude Code) or root
        thread (Codex); records no trace uses are counted skipped in the receipt, each with its reason."""
        self.content_policy = strictest(self.content_policy, content_policy)
        if not otlp_logs.looks_like_otlp_logs(doc):
            raise ImportFailed("body is not an OTLP ExportLogsServiceRequest (no resourceLogs array)")
        kept = []
        parents: dict[str, str] = {}  # Codex thread -> the thread whose spawn named it, in this batch
        for _where, resource, scope, raw in otlp_logs.iter_records(doc):
            receipt.received += 1
            where = cli_telemetry.sort_record(resource, scope, raw)
            if isinstance(where, str):
                receipt.skip(where)
                continue
            kept.append((where, resource, scope, raw))
            parents.update(dict.fromkeys(where.children, where.session))
        cur = self.db.cursor()
        roots: dict[str, str] = {}
        incoming: dict[str, dict[str, _Incoming]] = {source: {} for source in cli_telemetry.SOURCES}
        for where, resource, scope, raw in kept:
            session = where.session
            if where.source == cli_telemetry.CODEX:
                session = roots.get(session) or roots.setdefault(session, self._root_thread(cur, session, parents))
            part = incoming[where.source].setdefault(session, _Incoming([], False, True, {}))
            part.ids.append(where.id)
            part.body.setdefault((id(resource), id(scope)), (resource, scope, []))[2].append((where.id, raw))
        adopted = [(self._root_thread(cur, child, parents), child) for child in parents]
        self._receive([(source, parts, True) for source, parts in incoming.items()], receipt, may_replace,
                      [(root, child) for root, child in adopted if root != child])

    def _root_thread(self, cur, thread: str, parents: dict[str, str]) -> str:
        """The root of a Codex thread: through the spawns of this batch, then those received before."""
        seen = {thread}
        while True:
            parent = parents.get(thread) or live_store.item_holder(cur, cli_telemetry.CODEX, THREAD_LINK + thread)
            if parent is None or parent in seen:
                return thread
            seen.add(parent)
            thread = parent

    def _receive(self, groups: list[tuple[str, dict[str, _Incoming], bool]], receipt: Receipt,
                 may_replace: bool = True, adopt: list[tuple[str, str]] = ()) -> None:
        """Store the new items of each (source, incoming parts, whether to build them) in one transaction,
        with the receipt's ingest log entry (a batch costs one commit); `adopt` (root, child) moves Codex threads
        received before their spawn into their root's trace."""
        if not may_replace:
            self._refuse_replacing(groups)

        def receive_group(cur, source: str, incoming: dict[str, _Incoming], build: bool, tally: Receipt,
                          due: dict[tuple[str, str], float], added: dict[tuple[str, str], list[str]],
                          read: dict[tuple[str, str], tuple[bool, list | None]]) -> None:
            for source_trace, part in incoming.items():
                seen = self._seen_before(cur, source, source_trace, part.ids)
                new = [i for i in dict.fromkeys(part.ids) if i not in seen]
                tally.duplicates += len(part.ids) - len(new)
                trace_id = _trace_id(source, source_trace)
                if build and len(new) < len(part.ids):
                    tally.repeated.append(trace_id)
                if not new:
                    continue
                # a trace holding items has its row (a file store remembers them: no lookup for each batch)
                known = self._holds_items(source, source_trace) or \
                    live_store.live_trace(cur, source, source_trace) is not None
                if not known and not part.usable and not part.run_keys:
                    tally.skip(f"trace {source_trace}: {otlp.NO_AGENT_SPAN} so far, only "
                               f"{', '.join(map(show, sorted(part.operations)))}: nothing to build", len(new))
                    continue
                tally.used += len(new)  # a trace with no GenAI span that links to others is kept for their run
                if build and (known or part.usable):
                    (tally.extended if known else tally.created).append(trace_id)
                body = dumps(_part_body(source, part, set(new)))
                live_store.insert_part(cur, source, source_trace, now, body)
                if self._read is not None and source == OTLP:
                    read[(source, source_trace)] = (not known, _read_groups(part, set(new))
                                                    if part.as_read and NOT_AS_READ not in body else None)
                live_store.insert_items(cur, source, source_trace, new)
                if part.run_keys:
                    live_store.insert_run_keys(cur, source, source_trace, set(part.run_keys))
                if not known:
                    live_store.insert_live_trace(cur, source, source_trace, trace_id, len(new), part.has_root, now)
                else:
                    live_store.extend_live_trace(cur, source, source_trace, len(new), part.has_root, now)
                if build:
                    due[(source, source_trace)] = 0 if part.has_root else BUILD_DELAY_S
                added[(source, source_trace)] = new

        def adopt_threads(cur, due: dict[tuple[str, str], float], moved: list[str]) -> None:
            source = cli_telemetry.CODEX
            for root, child in adopt:
                if not live_store.live_items_seen(cur, source, root, [THREAD_LINK + child]):
                    live_store.insert_items(cur, source, root, [THREAD_LINK + child])
                if live_store.adopt_live_trace(cur, source, root, child, _trace_id(source, root)):
                    moved.append(child)
                    due[(source, root)] = BUILD_DELAY_S

        def receive(cur) -> tuple[Receipt, dict, dict, list[str]]:
            tally = copy.deepcopy(receipt)  # a lost commit runs this again: count on a copy, kept once committed
            due: dict[tuple[str, str], float] = {}
            added: dict[tuple[str, str], list[str]] = {}
            read: dict[tuple[str, str], tuple[bool, list | None]] = {}  # OTLP parts' spans as read
            moved: list[str] = []
            for source, incoming, build in groups:
                receive_group(cur, source, incoming, build, tally, due, added, read)
            adopt_threads(cur, due, moved)
            ingest_log.insert(cur, tally)
            return tally, due, added, read, moved

        # Parts of one trace sent to two instances at once: each takes in only the items the other has not.
        locks = [("live", source, source_trace) for source, incoming, _ in groups for source_trace in incoming]
        with self._seen_lock:
            now = _now()  # under the lock a build reads under: a batch it does not hold is received after it read
            try:
                tally, due, added, read, moved = self.db.write(receive, locks + [
                    ("live", cli_telemetry.CODEX, thread) for pair in adopt for thread in pair])
            except BaseException:  # whatever this write did or not, the database is asked again
                if self._seen is not None:
                    self._seen.clear()
                    self._forget_read(list(self._read))
                raise
            if self._seen is not None:
                for key, new in added.items():  # a batch of more traces than SEEN_TRACES evicted its first ones:
                    received = self._seen.get(key)  # those are read from the database when they come again
                    if received is not None:
                        received.update(new)
            for key, (first, spans) in read.items():
                self._keep_read(key, first, spans)
            self._forget_seen([(cli_telemetry.CODEX, thread) for pair in adopt for thread in pair])
        for child in moved:  # a trace built from a sub-agent's thread alone is now part of its root's
            delete_trace(self.db, _trace_id(cli_telemetry.CODEX, child))
        vars(receipt).update(vars(tally))
        for key, delay in due.items():  # once committed: the builder reads what this batch stored
            self._schedule(key, delay)

    def _refuse_replacing(self, groups: list[tuple[str, dict[str, _Incoming], bool]]) -> None:
        """StoredTrace when a batch brings new items to a trace that is stored and no longer being received: an
        upload's, or a live trace whose root span arrived and that was built since. A retry (only items received
        before) replaces nothing, and a trace still receiving or building is its exporter's to extend."""
        cur = self.db.cursor()
        for source, incoming, build in groups:
            for source_trace, part in incoming.items() if build else ():
                trace_id = _trace_id(source, source_trace)
                known = live_store.live_trace(cur, source, source_trace)
                if (known is not None and not _complete(known)) or not trace_store.trace_exists(self.db, trace_id):
                    continue
                if known is not None and live_store.live_items_seen(cur, source, source_trace, part.ids) >= set(part.ids):
                    continue
                raise StoredTrace(f"trace {trace_id} is stored and complete, and this batch would replace it, which "
                                  "needs the admin role: nothing of the batch is kept. Send the run under a new trace "
                                  "id, or export with an admin's token")

    def _seen_before(self, cur, source: str, source_trace: str, ids: list[str]) -> set[str]:
        """Which of these ids of a live trace were received before (see SEEN_TRACES); under `_seen_lock`."""
        if self._seen is None:
            return live_store.live_items_seen(cur, source, source_trace, ids)
        key = (source, source_trace)
        received = self._seen.get(key)
        if received is None:
            received = self._seen[key] = live_store.live_item_ids(cur, source, source_trace)
            while len(self._seen) > SEEN_TRACES:
                self._seen.popitem(last=False)
        self._seen.move_to_end(key)
        return received.intersection(ids)

    def _holds_items(self, source: str, source_trace: str) -> bool:
        """Whether a live trace is remembered holding items (after `_seen_before` asked for it)."""
        return self._seen is not None and bool(self._seen.get((source, source_trace)))

    def _forget_seen(self, keys: list[tuple[str, str]]) -> None:
        """Drop the remembered ids of these traces: the database no longer holds them."""
        if self._seen is not None:
            for key in keys:
                self._seen.pop(key, None)

    def _keep_read(self, key: tuple[str, str], first: bool, groups: list | None) -> None:
        """Keep the spans of a trace's part just committed, as read (see READ_SPANS), after those of its earlier
        parts: only while every part since its first one is kept (`groups` None: this one could not be)."""
        if groups is None or not first and key not in self._read:
            self._forget_read([key])
            return
        if first:
            self._forget_read([key])
            self._read[key] = []
        self._read[key].append(groups)
        self._unprepared.append((key, groups))
        self._read_spans += sum(map(len, groups))
        while self._read_spans > READ_SPANS:
            self._forget_read([next(iter(self._read))])

    def _kept_read(self, source: str, members: list[str]) -> list | None:
        """The spans kept of a run's live traces, when each had them (see READ_SPANS); under `_seen_lock`. Copies
        while a batch may follow; once the root span arrived, the spans kept, no longer kept."""
        keys = [(source, member) for member in members]
        if self._read is None or not all(key in self._read for key in keys):
            return self._forget_read(keys)  # None: the build reads the stored parts
        live = live_store.live_trace(self.db, source, members[0])
        if live is not None and live["root_seen"]:
            return self._forget_read(keys)
        return otlp.copy_read([groups for key in keys for part in self._read[key] for groups in part])

    def _forget_read(self, keys: list[tuple[str, str]]) -> list | None:
        """Drop the spans kept of these traces; their groups, in the order stored, when each trace had them."""
        groups, whole = [], True
        for key in keys:
            parts = self._read.pop(key, None) if self._read is not None else None
            if parts is None:
                whole = False
                continue
            for part in parts:
                self._read_spans -= sum(map(len, part))
                groups += part
        return groups if whole else None

    # ---- building -----------------------------------------------------------------------------

    def build(self, source: str, source_trace: str) -> str | None:
        """Build and store one trace from all its parts; returns why it could not be built, if so. A build that
        fails on a bug, not on the data, is marked failed too, so the trace does not stay `building`."""
        with paused_gc():  # until the parts and the trace are freed (see gcpause)
            try:
                error = self._build(source, source_trace)
            except Exception as exc:
                log.exception("building live trace %s/%s failed", source, source_trace)
                error = f"the build failed ({type(exc).__name__}); the server's log says why"
                self.db.write(lambda cur: self._mark_built(cur, source, source_trace, error, []))
        if error:
            log.warning("live trace %s/%s not built: %s", source, source_trace, error)
        return error

    def _build(self, source: str, source_trace: str) -> str | None:
        """Build the trace of `source_trace` with every live trace of its run (OTLP: live_store.run_members), stored
        under the first of them; a member built alone before its run was known is replaced by it."""
        started = time.monotonic()
        members = live_store.run_members(self.db, source, source_trace, RUN_MEMBERS) if source == OTLP \
            else [source_trace]
        with self._seen_lock:  # what the parts committed so far hold, if every member's spans were kept
            # Marked built as of now: a batch committed while it builds leaves the trace building (it was marked
            # complete, its stored trace lacking that batch, until the next build)
            read_at, read_when = _now(), time.monotonic()
            read = self._kept_read(source, members)
        parts = None if read else self._parts(source, members)
        if not read and not parts:
            return None
        error = stored = None
        warnings: list[str] = []

        def built(cur, *_) -> None:
            for member in members:
                self._mark_built(cur, source, member, error, warnings, read_at)
            if stored is not None and len(members) > 1:
                live_store.set_live_trace_id(cur, source, members, stored)

        try:
            trace, warnings = self._import(source, members, parts, read)
            if trace is None:
                error = "no agent, model or tool activity could be read from its spans"
            else:
                problems = problems_of([trace])
                if problems:
                    error = "; ".join(f"{p['path']}: {p['message']}" for p in problems[:5])
                elif self._overtaken((source, source_trace), read_when):
                    return None  # the build its root span's batch asked for stores the run whole, next
                else:
                    stored = trace["trace_id"]
                    # stored and marked built at once; its analysis after, as the status does not report it
                    store_traces(self.db, [trace], "replace", then=built, analyses_after=True)
                    for member in members:
                        alone = _trace_id(source, member)
                        if alone != stored and trace_store.trace_exists(self.db, alone):
                            delete_trace(self.db, alone)
                    self._settled(source, members, started)
                    # once complete, so the status does not wait for it
                    prepare_lod(self.db, {stored: len(trace["events"])})
                    return None
        except ImportFailed as exc:
            error = str(exc)
        self.db.write(built)
        return error

    @staticmethod
    def _mark_built(cur, source: str, source_trace: str, error: str | None, warnings: list[str],
                    read_at=None) -> None:
        """Note a build of the batches received before `read_at` (a failed build: all of them)."""
        live_store.mark_built(cur, source, source_trace, read_at or _now(), error, dumps(warnings))

    def _parts(self, source: str, members: list[str]) -> list[str]:
        return [body for member in members for body in live_store.live_parts(self.db, source, member)]

    def _import(self, source: str, members: list[str], parts: list[str] | None,
                read: list | None) -> tuple[dict | None, list[str]]:
        """The trace built from the parts of these live traces (None when nothing could be read), and what the
        importer could not map; OTLP parts may come as the spans `read` on receipt instead."""
        wanted = {_trace_id(source, member) for member in members}
        bodies = None if parts is None else [loads(body) for body in parts]
        if source == OTLP:
            held = live_store.live_parts_of_source(self.db, CREATED)
            if read and not held:
                result = otlp.import_read(read, self.content_policy, one_run=len(members) > 1)
                return next((t for t in result.traces if t["trace_id"] in wanted), None), result.warnings
            if bodies is None:  # the created agents' spans join them: read it all as stored
                bodies = [loads(body) for body in self._parts(source, members)]
            doc = otlp.only_traces({"resourceSpans": [rs for body in bodies for rs in body["resourceSpans"]]},
                                   set(members))
            if held:
                doc["resourceSpans"] += [rs for _, body in held for rs in loads(body)["resourceSpans"]]
            result = otlp.import_otlp(doc, self.content_policy, one_run=len(members) > 1)
            unused = {t["trace_id"].removeprefix(otlp.TRACE_ID_PREFIX) for t in result.traces}
            taken = sorted({trace for trace, _ in held} - unused)
            if taken:
                self._forget(CREATED, taken)
        elif source in cli_telemetry.SOURCES:
            result, _ = cli_telemetry.import_logs(bodies, self.content_policy)  # what was skipped was, on receipt
        else:
            result = openai_agents.import_agents([r for body in bodies for r in body], self.content_policy)
        return next((t for t in result.traces if t["trace_id"] in wanted), None), result.warnings

    def _forget(self, source: str, source_traces: list[str]) -> None:
        """Drop held parts that a built trace took in."""
        with self._seen_lock:
            self.db.write(lambda cur: live_store.forget_live_traces(cur, source, source_traces))
            self._forget_seen([(source, source_trace) for source_trace in source_traces])
            self._forget_read([(source, source_trace) for source_trace in source_traces])

    def _schedule(self, key: tuple[str, str], delay: float) -> None:
        """Build `key` after `delay` seconds without further batches of it, and not before REBUILD_SPACING allows
        (0: as soon as the builder can)."""
        with self._changed:
            now = time.monotonic()
            if delay:
                self._spaced.add(key)
                self._due[key] = max(now + delay, self._not_before.get(key, now))
            else:
                self._spaced.discard(key)
                self._due[key] = now
            self._asked[key] = now
            self._changed.notify_all()

    def _space(self, key: tuple[str, str], began: float) -> None:
        """After a build of `key` that began at `began`: when its next rebuild may start, and a rebuild that a batch
        asked for meanwhile moved to then. Under `_changed`."""
        ended = time.monotonic()
        self._not_before[key] = ended + REBUILD_SPACING * (ended - began)
        self._not_before.move_to_end(key)
        while len(self._not_before) > SPACED_TRACES:
            self._not_before.popitem(last=False)
        if key in self._due and key in self._spaced:
            self._due[key] = max(self._due[key], self._not_before[key])

    def _overtaken(self, key: tuple[str, str], read_when: float) -> bool:
        """Whether a batch with the root span of `key` asked for its build after this one read (monotonic
        `read_when`): storing a rebuild while receiving (half its time) would only delay the run's complete one."""
        with self._changed:
            return key in self._due and key not in self._spaced and self._asked.get(key, read_when) > read_when

    def _settled(self, source: str, members: list[str], started: float) -> None:
        """Drop the builds still due of the other live traces of a run just built, asked for before it read their
        parts: it took them in (a batch after that asks again)."""
        with self._changed:
            for member in members[1:]:
                key = (source, member)
                if key in self._due and self._asked.get(key, started) < started:
                    del self._due[key]
                    self._asked.pop(key, None)
                    self._spaced.discard(key)

    def _work(self) -> None:
        """The builder thread: builds each trace when it is due, one at a time."""
        while True:
            with self._changed:
                while True:
                    if self._stopping and not self._due:
                        return
                    now = time.monotonic()
                    ready = [key for key, when in self._due.items() if when <= now or self._stopping]
                    if ready:
                        key = min(ready, key=self._due.__getitem__)
                        del self._due[key]
                        self._spaced.discard(key)
                        self._busy += 1
                        break
                    if self._unprepared and not self._stopping and not self._answering:
                        key = None
                        break
                    self._changed.wait(min(self._due.values()) - now if self._due else None)
            if key is None:
                self._prepare_next()
                continue
            began = time.monotonic()
            try:
                self.build(*key)
            except Exception:  # even marking it failed failed (the database): the builder goes on, the log says why
                log.exception("building live trace %s/%s failed", *key)
            finally:
                with self._changed:
                    self._space(key, began)
                    self._busy -= 1
                    self._changed.notify_all()

    def _prepare_next(self) -> None:
        """Read ahead what the spans of the next part kept say for their events, if it is still kept."""
        key, groups = self._unprepared.popleft()
        with self._seen_lock:
            kept = self._read is not None and any(part is groups for part in self._read.get(key, ()))
        if kept:
            try:
                with paused_gc():
                    otlp.prepare([span for spans in groups for span in spans], self.content_policy)
            except Exception:  # the build reads them itself
                log.exception("reading ahead live trace %s/%s failed", *key)

    @contextmanager
    def answering(self) -> Iterator[None]:
        """A request being answered, until its answer is sent (app.main.Answering): the builder reads ahead only
        while none is. Reading ahead between an exporter's batches costs nothing, where during one's answer it took
        the interpreter from it (4 of some 30 ms a batch, waiting for the lock's switch interval)."""
        with self._changed:
            self._answering += 1
        try:
            yield
        finally:
            with self._changed:
                self._answering -= 1
                if not self._answering:
                    self._changed.notify_all()

    def flush(self) -> None:
        """Build every trace still waiting for its delay, and wait for all builds to finish."""
        with self._changed:
            for key in self._due:
                self._due[key] = 0
            self._changed.notify_all()
            while self._due or self._busy:
                self._changed.wait()

    def close(self) -> None:
        """Run the builds still due, then stop the builder (at shutdown, before the database closes)."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        self._worker.join()

    def recover(self) -> None:
        """Build the traces whose last batches arrived after their last build (e.g. before a restart)."""
        for key in live_store.live_traces_unbuilt(self.db):
            self._schedule(tuple(key), 0)


def _read_groups(part: _Incoming, new: set[str]) -> list[list]:
    """The spans of an OTLP part as read, grouped as `_part_body` stores them."""
    return [kept for *_, spans in part.body.values() if (kept := [span for span_id, _, span in spans if span_id in new])]


def _part_body(source: str, part: _Incoming, new: set[str]):
    """What to keep of a trace's batch: only its new spans (or records)."""
    if source == AGENTS:
        return [r for r in part.body if r["id"] in new]
    if source in cli_telemetry.SOURCES:
        resource_logs = []
        for resource, scope, records in part.body.values():
            kept = [raw for record_id, raw in records if record_id in new]
            if kept:
                resource_logs.append({"resource": resource, "scopeLogs": [{"scope": scope, "logRecords": kept}]})
        return {"resourceLogs": resource_logs}
    resource_spans = []
    for resource, scope, spans in part.body.values():
        kept = [raw for span_id, raw, _ in spans if span_id in new]
        if kept:
            resource_spans.append({**otlp.without_spans(resource),
                                   "scopeSpans": [{**otlp.without_spans(scope), "spans": kept}]})
    return {"resourceSpans": resource_spans}


def _complete(live: dict) -> bool:
    """A live trace whose root span arrived and that was built since its last batch (live_store.live_status's
    `complete`)."""
    return bool(live["root_seen"]) and live["built_at"] is not None and live["built_at"] >= live["last_received_at"]


# What every trace an exporter sent is stored under begins with (`_trace_id`): its source's prefix.
LIVE_PREFIXES = (otlp.TRACE_ID_PREFIX, openai_agents.TRACE_ID_PREFIX, *cli_telemetry.TRACE_ID_PREFIXES.values())


def may_be_live(trace_id: str) -> bool:
    """Whether an exporter's batches could have made this trace, by its id: a trace list or trace page of uploaded
    traces then reads nothing of the live traces (on a lake, a read of that table costs 20-45 ms of catalog round
    trips, however few its rows)."""
    return trace_id.startswith(LIVE_PREFIXES)


def live_status(db: Database, trace_id: str) -> dict | None:
    """live_store.live_status of a trace an exporter sent; None for any other."""
    return live_store.live_status(db, trace_id) if may_be_live(trace_id) else None


def receiving_trace_ids(db: Database, trace_ids: list[str]) -> set[str]:
    """Which of these traces (a page of them) are still receiving batches."""
    live = [trace_id for trace_id in trace_ids if may_be_live(trace_id)]
    return live_store.receiving_trace_ids(db, live) if live else set()


def _trace_id(source: str, source_trace: str) -> str:
    if source in cli_telemetry.SOURCES:
        return cli_telemetry.TRACE_ID_PREFIXES[source] + source_trace
    return (otlp.TRACE_ID_PREFIX if source == OTLP else openai_agents.TRACE_ID_PREFIX) + source_trace
