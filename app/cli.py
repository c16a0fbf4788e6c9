"""The `orchestrace` command line. Each subcommand's docstring is its help text.

DuckDB lets one process write a database file. A command that reads or writes traces, papers or
backups opens the file itself, or, when `orchestrace serve` holds it, sends its work to that server's
API: the one `--server URL` names, else the one whose URL `serve` records beside the file
(`<db>.server`, written once it listens, removed when it stops).
"""

import argparse
import errno
import json
import os
import socket
import sys
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from app.domain import csvsafe
from app.domain.validation import Problem, format_problem
from app.ingest.documents import DEFAULT_MAX_BYTES, DocumentError, TooLarge, Upload
from app.ingest.importers import FORMATS, SUBAGENTS, atif_companions, own_traces, subagent_uploads
from app.ingest.importers.codex import session_files, session_groups, state_db_bytes
from app.ingest.importers.common import ImportFailed, strictest
from app.ingest.importers.kimi import WIRE as KIMI_WIRE
from app.ingest.importers.kimi import is_subagent_wire
from app.ingest.pipeline import InvalidTraces, ingest, load_document, load_uploads, store_documents
from app.settings import Settings
from app.store.db import CommitConflict, Database, DatabaseLocked, DatabaseTooNew, MigrationsMissing
from app.store.lake import LakeUnavailable, is_lake_url, shown

TRACE_SUFFIXES = (".json", ".jsonl", ".json.gz", ".jsonl.gz", ".gz")
PROGRESS_MIN_FILES = 5
PROGRESS_MIN_BYTES = 20 * 1024 * 1024
ADDRESS_SUFFIX = ".server"  # `<db>.server`: the URL of the server holding <db>
HEALTH_TIMEOUT_S = 5
AUDIT_CHUNK = 1000  # traces whose findings `audit` reads at once from a store, or asks a server for
FINDINGS_QUERY_CHARS = 6000  # a request line well within what HTTP servers take (uvicorn's h11: 16 KiB of head)
# `ingest` into a store writes the traces of many documents together, at most this many traces and events a write (as
# a request of 1,000 rollouts): a write of each file cost 50 ms of commit and analysis round trip a file.
STORED_TOGETHER = (1000, 200_000)
POSTED_TOGETHER_BYTES = 16 * 1024**2  # of files posted to a server in one request (see _post_batches)
WILDCARD_HOSTS = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}  # listening on all: reach it on loopback
WHAT_TO_DO = "stop the process holding the file, or pass --server URL of the server holding it"
NEED_TOKEN = " (pass an API token with --token or ORCHESTRACE_TOKEN)"
NEED_ADMIN_TOKEN = " (pass an admin's API token with --token or ORCHESTRACE_TOKEN)"


class CommandError(Exception):
    """A command that cannot go on; `main` prints `error: <message>` and exits 2."""


def address_file(db: Path) -> Path:
    """The file beside the database where `serve` records the URL it answers at."""
    return db.with_name(db.name + ADDRESS_SUFFIX)


class RecordingServer(uvicorn.Server):
    """uvicorn's server, recording its URL beside the database while it listens."""

    def __init__(self, config: uvicorn.Config, db: Path):
        super().__init__(config)
        self.address = address_file(db)

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets)
        if self.started and not self.should_exit:
            port = self.servers[0].sockets[0].getsockname()[1]  # the real one, when --port 0 let the system pick
            host = WILDCARD_HOSTS.get(self.config.host, self.config.host)
            self.address.write_text(f"http://[{host}]:{port}\n" if ":" in host else f"http://{host}:{port}\n")

    async def shutdown(self, sockets=None) -> None:
        self.address.unlink(missing_ok=True)  # first: from here on it stops answering
        await super().shutdown(sockets)


def cmd_serve(args) -> int:
    """Serve the web app and JSON API; while it listens, `<db>.server` beside a database file holds its URL,
    where the other commands find it."""
    from app.main import create_app
    from app.services import accounts
    from app.web.security import is_loopback

    settings = Settings.from_env(db=args.db, host=args.host, port=args.port)
    if taken := port_taken(settings.host, settings.port):
        print(taken, file=sys.stderr)
        return 2
    # Absolute, so that /api/health names the file whatever folder a client runs in.
    if not is_lake_url(str(settings.db)):
        settings = settings.model_copy(update={"db": settings.db.absolute()})
    try:
        app = create_app(settings)
    except DatabaseLocked as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not is_loopback(settings.host) and not accounts.has_admin(app.state.db):
        print(f"error: serving on {settings.host} (not loopback) needs accounts, and {shown(settings.db)} has no "
              "admin yet: run `orchestrace users add NAME --role admin` first", file=sys.stderr)
        app.state.db.close()
        return 2
    config = uvicorn.Config(app, host=settings.host, port=settings.port)
    # No process holds a lake (the other commands open it themselves), and a record named after its URL would
    # put the libpq string, password and all, in a file name; several instances would overwrite it.
    server = uvicorn.Server(config) if app.state.db.is_lake else RecordingServer(config, settings.db)
    try:
        server.run()
    except KeyboardInterrupt:  # uvicorn stops gracefully, then raises the interrupt again
        pass
    return 0 if server.started else 1


def port_taken(host: str, port: int) -> str | None:
    """One line saying the port is in use and how to pick another, or None when it is free (uvicorn's own failure
    is a bare "[Errno 98]" after the app has started)."""
    if not port:
        return None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: a closing socket is no clash
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                return None  # not ours to judge: uvicorn reports it
            other = port + 100
            return (f"error: port {port} on {host} is already in use (another server?); pick another: "
                    f"make demo PORT={other}, orchestrace serve --port {other}, or ORCHESTRACE_PORT={other}")
    return None


def cmd_migrate(args) -> int:
    """Apply the numbered SQL migrations not yet applied to the database; on a DuckLake store, also make the key
    that signs sessions unless ORCHESTRACE_SECRET_KEY is set."""
    from app.services import accounts

    settings = Settings.from_env(db=args.db)
    db = _open(settings)
    try:
        applied = db.migrate(settings.migrations_dir)
        if db.is_lake:  # made here, once: instances starting together on a new lake would each store their own
            accounts.secret_key(db, settings.secret_key)
    finally:
        db.close()
    print(f"applied {len(applied)} migration(s) to {shown(settings.db)}" + (": " + ", ".join(applied) if applied else ""))
    return 0


def cmd_migrate_store(args) -> int:
    """Copy every table and row of a DuckDB file into a new, empty DuckLake store (or of a lake into a new
    file), ids kept, in one transaction; both are migrated first. Stop the server holding the file first."""
    from app.store.transfer import TransferError, move_store

    settings = Settings.from_env(lake_data=args.lake_data)
    if not settings.lake_data and (is_lake_url(args.source) or is_lake_url(args.target)):
        raise CommandError("a DuckLake store needs its data folder: pass --lake-data FOLDER "
                           "(or set ORCHESTRACE_LAKE_DATA)")
    try:
        moved = move_store(args.source, args.target, settings.lake_data, settings.migrations_dir)
    except (TransferError, DatabaseLocked, CommitConflict) as exc:  # a conflict: another writer on the new store
        raise CommandError(str(exc)) from exc
    if moved.applied_to_source:
        print(f"brought {shown(args.source)} up to date first: {', '.join(moved.applied_to_source)}")
    print(f"copied {shown(args.source)} into {shown(args.target)} (migration {moved.migration}); rows per "
          "table, counted in both after the commit:")
    width = max(map(len, moved.rows))
    for table, n in moved.rows.items():
        print(f"  {table:<{width}}  {n:>10}")
    print(f"{sum(moved.rows.values())} rows in {len(moved.rows)} tables")
    return 0


def cmd_validate(args) -> int:
    """Check files without storing them: each is read in its format (detected, or --format), imported, and its
    traces checked against ours; print each problem with its path, and importers' warnings. Exit 1 if any file
    is refused."""
    bad = 0
    for source, uploads in _batches(args.paths):
        try:
            result = load_uploads(uploads, DEFAULT_MAX_BYTES, args.format)
        except InvalidTraces as exc:
            for error in exc.errors:
                print(f"{source}: trace {error['trace']}: {format_problem_dict(error)}")
            bad += 1
            continue
        except (DocumentError, ImportFailed, TooLarge) as exc:
            print(f"{source}: {exc}")
            bad += 1
            continue
        for warning in result.warnings:
            print(f"{source}: warning: {warning}")
        print(f"{source}: {len(result.traces)} valid trace(s)")
    return 1 if bad else 0


def format_problem_dict(error: dict) -> str:
    """An API-style problem dict printed the way the validator words its problems."""
    return format_problem(Problem(error["path"], error["message"]))


def cmd_ingest(args) -> int:
    """Store trace files (files, folders, or - for standard input) in our format or an industrial one
    (detected from content); traces already stored are skipped unless --replace."""
    return _ingest(args, getattr(args, "format", None), "orchestrace ingest")


def cmd_import(args) -> int:
    """Import industrial traces (OTLP/JSON, OpenAI Agents SDK, Claude Code sessions) from files and folders;
    exits 1 when nothing could be imported."""
    return _ingest(args, args.format, "orchestrace import")


@dataclass
class Server:
    """A running Orchestrace server, and the database file it says it holds (None: it did not say, as a server
    that requires accounts does not to a caller without a token)."""

    url: str
    db: str | None

    def holds(self, db: Path) -> bool:
        """Whether it serves `db`: the file it names, or, when it names none, the server that `db`'s record
        beside it names (all there is to go by)."""
        if self.db is None:
            try:
                return address_file(Path(db)).read_text().strip() == self.url
            except OSError:
                return False
        return os.path.exists(self.db) and os.path.exists(db) and os.path.samefile(self.db, db)


def _target(args, settings: Settings, doing: str) -> Database | Server:
    """Where a command works: the server --server names; else the database file, opened here; else the
    running server holding the file, found by the URL it records beside it. Says on stderr which server
    it uses and what it asks of it (`doing`, e.g. "posting to {url}")."""
    if args.server:
        server = _server_at(args.server.rstrip("/"), auth_headers(args))
        if server.holds(settings.db):
            print(f"{settings.db} is held by a running server; {doing.format(url=server.url)}", file=sys.stderr)
        else:
            print(f"{doing.format(url=server.url)} (--server), the server of {server.db}", file=sys.stderr)
        return server
    try:
        return Database(settings.db, settings.lake_data)
    except DatabaseLocked:
        server = _holder(settings.db, auth_headers(args))
        print(f"{settings.db} is held by a running server; {doing.format(url=server.url)}", file=sys.stderr)
        return server


def _server_at(url: str, headers: dict) -> Server:
    """The Orchestrace server answering /api/health at url."""
    reason = _probe(url, headers)
    if isinstance(reason, str):
        raise CommandError(f"no Orchestrace server answers at {url} ({reason})")
    return reason


def _holder(db: Path, headers: dict) -> Server:
    """The running server holding db, by the URL it recorded beside it. Without a record, or with a record
    no live server of db answers at (a server killed before it could remove it), says what to do."""
    record = address_file(db)
    try:
        url = record.read_text().strip()
    except FileNotFoundError:
        raise CommandError(f"{db} is held by another process, and no server recorded its address beside it "
                           f"({record}): {WHAT_TO_DO}") from None
    server = _probe(url, headers)
    if isinstance(server, str):
        stale = f"no server answers there ({server})"
    elif not server.holds(db):
        stale = f"the server there holds {server.db}"
    else:
        return server
    raise CommandError(f"{db} is held by another process, and {record} names {url}, but {stale}: a stale record, "
                       f"not trusted; {WHAT_TO_DO}")


def _probe(url: str, headers: dict) -> Server | str:
    """The server at url by its /api/health answer, or why no Orchestrace server answers there. It names its
    database only to a logged-in caller (or in open mode), so the probe sends the command's token (auth_headers)."""
    request = urllib.request.Request(url + "/api/health", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=HEALTH_TIMEOUT_S) as response:
            health = json.load(response)
    except urllib.error.HTTPError as exc:
        return f"/api/health answered {exc.code} {exc.reason}"
    except urllib.error.URLError as exc:
        return str(exc.reason)
    except (OSError, ValueError) as exc:  # a timeout, or an answer that is not JSON
        return str(exc) or type(exc).__name__
    if not isinstance(health, dict) or health.get("status") != "ok" or not isinstance(health.get("db", ""), str):
        return "its /api/health does not answer as Orchestrace's does"
    return Server(url, health.get("db"))


def _call(args, server: Server, path: str, body: bytes | None = None,
          content_type: str | None = None, method: str | None = None) -> tuple[int, dict]:
    """Status and JSON answer of one API call (error answers too; 204's empty one is {}), with the API token if
    any; GET without a body, POST with one, unless `method` says."""
    headers = auth_headers(args) | ({"Content-Type": content_type} if content_type else {})
    request = urllib.request.Request(server.url + path, data=body, headers=headers,
                                     method=method or ("GET" if body is None else "POST"))
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, {} if response.status == 204 else json.load(response)
    except urllib.error.HTTPError as exc:
        try:
            answer = json.load(exc)
        except ValueError:
            answer = None
        return exc.code, answer if isinstance(answer, dict) else {"error": f"{exc.code} {exc.reason}"}
    except urllib.error.URLError as exc:
        raise CommandError(f"the server at {server.url} stopped answering ({exc.reason})") from None


def _refusal(status: int, answer: dict, token_hint: str = NEED_TOKEN) -> str:
    """A refused call's error, with what to do when it wants a token."""
    return answer.get("error", f"{status}") + (token_hint if status in (401, 403) else "")


def _where(target: Database | Server) -> str:
    return target.url if isinstance(target, Server) else shown(target.path)


def _ingest(args, fmt: str | None, command: str) -> int:
    settings = Settings.from_env(db=args.db)
    batches = list(_batches(args.paths))
    target = _target(args, settings, "posting to {url}")
    if isinstance(target, Server):
        summary = _post_batches(args, target, batches, fmt)
    else:
        try:
            summary = _store_batches(args, target, settings, batches, fmt, command)
        finally:
            target.close()
    _print_summary(summary, _where(target))
    return _exit_code(summary, command)


def _store_batches(args, db: Database, settings: Settings, batches: list, fmt: str | None, command: str) -> dict:
    """Each document loaded (and refused) on its own, as `ingest` would; the loaded ones stored together, up to
    STORED_TOGETHER traces or events a write (a document whose trace id the group holds already starts the next),
    and the lanes of the large ones kept, as the server keeps them after an upload."""
    db.migrate(settings.migrations_dir)
    existing = "replace" if args.replace else "skip"
    summary = {"ingested": [], "skipped": [], "refused": [], "warnings": []}
    progress = Progress(len(batches), sum(len(u.data) for _, b in batches for u in b))
    group: list = []  # documents loaded, not stored yet
    ids: set[str] = set()
    events = 0

    def store() -> None:
        nonlocal events
        from app.services.graph import prepare_lod

        if group:
            stored, skipped, warnings, sizes = store_documents(db, group, existing, fmt, command)
            prepare_lod(db, sizes)  # as after an upload: a large trace's first view does not wait for its lanes
            summary["ingested"] += stored
            summary["skipped"] += skipped
            summary["warnings"] += warnings
            group.clear()
            ids.clear()
            events = 0

    for label, uploads in batches:
        try:
            result = load_document(db, uploads, settings.max_body_bytes, fmt,
                                   strictest(settings.content, args.content), command)
        except InvalidTraces as exc:
            summary["refused"].append((label, [f"trace {e['trace']}: {format_problem_dict(e)}" for e in exc.errors]))
        except (DocumentError, ImportFailed, TooLarge) as exc:
            summary["refused"].append((label, [str(exc)]))
        else:
            loaded = {trace["trace_id"] for trace in result.traces}
            size = sum(len(trace["events"]) for trace in result.traces)
            if ids & loaded or len(ids) + len(loaded) > STORED_TOGETHER[0] or events + size > STORED_TOGETHER[1]:
                store()
            group.append(result)
            ids.update(loaded)
            events += size
        progress.advance(sum(len(u.data) for u in uploads))
    store()
    progress.done()
    return summary


def _post_batches(args, server: Server, batches: list, fmt: str | None) -> dict:
    """Post each document (a session with its sub-agent files) to the server's API; files plainly in our own
    format many in one request (see `_post_together`), each of the others in one of its own."""
    summary = {"ingested": [], "skipped": [], "refused": [], "warnings": []}
    params = {"replace": "true"} if args.replace else {}
    if fmt:
        params["format"] = fmt
    if args.content == "hash":
        params["content"] = "hash"
    path = "/api/traces" + ("?" + urllib.parse.urlencode(params) if params else "")
    group: list[tuple[str, list[Upload], set[str]]] = []  # own-format files waiting to be posted together
    ids: set[str] = set()
    events = size = 0

    def post_group() -> None:
        nonlocal events, size
        _post_together(args, server, path, group, summary)
        group.clear()
        ids.clear()
        events = size = 0

    for label, uploads in batches:
        traces = own_traces(uploads[0]) if len(uploads) == 1 and fmt in (None, "orchestrace") else None
        if traces is None:
            post_group()
            _post_one(args, server, path, label, uploads, summary)
            continue
        loaded = {trace["trace_id"] for trace in traces}
        n = sum(len(trace["events"]) for trace in traces if isinstance(trace.get("events"), list))
        if ids & loaded or len(ids) + len(loaded) > STORED_TOGETHER[0] or events + n > STORED_TOGETHER[1] \
                or size + len(uploads[0].data) > POSTED_TOGETHER_BYTES:
            post_group()
        group.append((label, uploads, loaded))
        ids.update(loaded)
        events += n
        size += len(uploads[0].data)
    post_group()
    return summary


def _post_together(args, server: Server, path: str, group: list[tuple[str, list[Upload], set[str]]],
                   summary: dict) -> None:
    """Post files in our own format in one request, with what posting each alone would give: the server stores a
    request's traces all or none, so the files holding ids it has already (409 without --replace) are skipped and
    the others posted again, and on any other refusal each file is posted alone, to be refused or stored alone."""
    while group:
        status, answer = _call(args, server, path, *_multipart([upload for _, uploads, _ in group
                                                                 for upload in uploads]))
        if status < 300 or len(group) == 1:
            _tally(group[0][0], status, answer, summary)
            return
        taken = set(answer.get("trace_ids", [])) if status == 409 else set()
        kept = [document for document in group if not document[2] & taken]
        if len(kept) == len(group):
            break
        summary["skipped"] += answer["trace_ids"]
        group = kept
    for label, uploads, _ in group:
        _post_one(args, server, path, label, uploads, summary)


def _post_one(args, server: Server, path: str, label: str, uploads: list[Upload], summary: dict) -> None:
    """Post one document: stored, skipped (its trace ids are stored already) or refused, with why."""
    _tally(label, *_call(args, server, path, *_multipart(uploads)), summary)


def _tally(label: str, status: int, answer: dict, summary: dict) -> None:
    """What the server answered a post of documents (one, or several stored together) into the summary."""
    if status < 300:
        summary["ingested"] += answer["ingested"]
        summary["warnings"] += answer.get("warnings", [])
    elif status == 409:
        summary["skipped"] += answer.get("trace_ids", [])
    else:
        reasons = [f"trace {e['trace']}: {format_problem_dict(e)}" for e in answer.get("errors", [])]
        summary["refused"].append((label, reasons or [_refusal(status, answer)]))


def _exit_code(summary: dict, command: str) -> int:
    """1 when a file was refused, or when an import found nothing to import (said, not silent)."""
    if summary["refused"]:
        return 1
    if command == "orchestrace import" and not summary["ingested"] and not summary["skipped"]:
        print("nothing imported: no file held a trace that could be read (see the warnings above)", file=sys.stderr)
        return 1
    return 0


def _batches(paths: list[str]):
    """(label, uploads) per document: a Claude Code session comes with the files of its `<session>/subagents/`
    folder, at any depth; a Codex session tree with its sub-agents' rollouts and its CODEX_HOME's state
    database; an ATIF trajectory with the sub-agent files it names. Those are not documents of their own."""
    files = list(_read_paths(paths))
    data = dict(files)
    rollouts = [Path(source) for source, _ in files if _is_rollout(source)]
    for group in session_groups(rollouts):
        uploads = [Upload(str(path), data[str(path)]) for path in group]
        database = session_files(group[0].parent)[1] if len(group) > 1 else None
        if database is not None:
            uploads.append(Upload(str(database), state_db_bytes(database)))
        yield str(group[0]), uploads
    files = [(source, content) for source, content in files if not _is_rollout(source)]
    sessions = [Path(source).parent for source, _ in files if Path(source).name == KIMI_WIRE
                and not is_subagent_wire(source)]
    for folder in sessions:  # a Kimi session folder: its wire and its sub-agents' wires, nothing else of it
        yield str(folder), [Upload(source, content) for source, content in files if Path(source).parent == folder
                            and Path(source).name == KIMI_WIRE or is_subagent_wire(source)
                            and Path(source).parents[2] == folder]
    files = [(source, content) for source, content in files if not set(sessions) & set(Path(source).parents)]
    folders = {Path(source).with_suffix("") / SUBAGENTS for source, _ in files if source.endswith(".jsonl")}
    companions = {source: atif_companions(Path(source), content) for source, content in files
                  if source.endswith(".json")}
    named = {Path(upload.source).resolve() for uploads in companions.values() for upload in uploads}
    for source, content in files:
        if folders.intersection(Path(source).parents) or Path(source).resolve() in named:
            continue  # read with its session, or with the ATIF trajectory that names it
        uploads = [Upload(source, content)]
        if source.endswith(".jsonl"):
            uploads += subagent_uploads(Path(source))
        yield source, uploads + companions.get(source, [])


def _is_rollout(source: str) -> bool:
    """A Codex CLI session rollout (`rollout-*.jsonl`), read with the other rollouts of its session tree."""
    name = Path(source).name
    return name.startswith("rollout-") and name.endswith(".jsonl")


def _print_summary(summary: dict, into: str) -> None:
    print(f"ingested {len(summary['ingested'])} trace(s) into {into}, skipped {len(summary['skipped'])} already "
          f"stored, refused {len(summary['refused'])} file(s)")
    for warning in summary.get("warnings", []):
        print(f"  warning: {warning}")
    for trace_id in summary["skipped"]:
        print(f"  skipped {trace_id}: already stored (use --replace to replace it)")
    for source, reasons in summary["refused"]:
        print(f"  refused {source}:")
        for reason in reasons:
            print(f"    {reason}")


def auth_headers(args) -> dict:
    """The Authorization header of the API token given by --token or ORCHESTRACE_TOKEN, if any."""
    token = getattr(args, "token", None) or os.environ.get("ORCHESTRACE_TOKEN")
    return {"Authorization": f"Bearer {token}"} if token else {}


def _multipart(uploads: list[Upload]) -> tuple[bytes, str]:
    """A multipart/form-data body with one `file` part per upload, named by its source path (quotes and
    line breaks escaped as browsers do)."""
    boundary = f"orchestrace-{uuid.uuid4().hex}"
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{_escape(u.source)}"\r\n'
             f"Content-Type: application/octet-stream\r\n\r\n".encode() + u.data + b"\r\n" for u in uploads]
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def _escape(name: str) -> str:
    return name.replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")


def cmd_generate(args) -> int:
    """Write a deterministic, realistic large swarm trace (valid by construction)."""
    from app.domain.generate import generate_swarm

    trace = generate_swarm(agents=args.agents, events=args.events, seed=args.seed)
    text = json.dumps(trace, separators=(",", ":"))
    if args.output == "-":
        sys.stdout.write(text + "\n")
    else:
        Path(args.output).write_text(text)
        print(f"wrote {args.output}: {len(trace['events'])} events, {len(trace['edges'])} edges, "
              f"{len(text) / 1e6:.1f} MB")
    return 0


def cmd_papers_import(args) -> int:
    """Import paper-pool or exclusion-log CSV files (the kind is read from each header) into the database, or
    through the server holding it."""
    settings = Settings.from_env(db=args.db)
    target = _target(args, settings, "posting to {url}")
    if isinstance(target, Database):
        target.migrate(settings.migrations_dir)
    failed = 0
    for path in args.files:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            failed += 1
            print(f"{path}: {exc.strerror}")
            continue
        result, problems = _import_papers(args, target, data)
        if not problems:
            print(f"{path}: imported {result['imported']} {result['kind']} row(s) into {_where(target)}")
            continue
        failed += 1
        print(f"{path}: refused, nothing imported into {_where(target)}")
        for problem in problems:
            print(f"  {problem}")
    if isinstance(target, Database):
        target.close()
    return 1 if failed else 0


def _import_papers(args, target: Database | Server, data: bytes) -> tuple[dict, list[str]]:
    """The result of importing one CSV, or the problems that refused it."""
    from app.services.papers import CsvProblems, import_csv

    if isinstance(target, Database):
        try:
            return import_csv(target, data), []
        except CsvProblems as exc:
            return {}, [error["message"] for error in exc.errors]
    status, answer = _call(args, target, "/api/papers/import", data, "text/csv")
    if status < 300:
        return answer, []
    return answer, [e["message"] for e in answer.get("errors", [])] or [_refusal(status, answer, NEED_ADMIN_TOKEN)]


def cmd_audit(args) -> int:
    """Audit traces (named, or --all) of the database, or through the server holding it: findings per trace and
    rule; exit 1 at --fail-on level."""
    from app.domain.audit import SEVERITIES
    from app.domain.triage import failing

    if not args.trace_ids and not args.all:
        raise SystemExit("error: name trace ids or pass --all")
    settings = Settings.from_env(db=args.db)
    target = _target(args, settings, "asking {url} for the findings")
    if isinstance(target, Server):
        results, missing = _findings_from(args, target)
    else:
        try:
            results, missing = _findings_of(args, target, settings)
        finally:
            target.close()
    _print_audit(results, args.format)
    for trace_id in missing:
        print(f"error: no trace with id '{trace_id}' in {_where(target)}", file=sys.stderr)
    # A finding a reviewer marked accepted_risk or false_positive (issue 32) no longer fails the audit
    worst = {s: any(f["severity"] == s for fs in results.values() for f in failing(fs)) for s in SEVERITIES}
    fails = args.fail_on and (worst["error"] or (args.fail_on == "warning" and worst["warning"]))
    return 2 if missing else (1 if fails else 0)


def _findings_of(args, db: Database, settings: Settings) -> tuple[dict[str, list[dict]], list[str]]:
    """Findings by trace id, and the ids named that are not stored."""
    from app.services.cache import TraceCache
    from app.services.triage import findings_of
    from app.store import traces as trace_store

    db.migrate(settings.migrations_dir)
    ids = list(dict.fromkeys(args.trace_ids or trace_store.trace_ids(db)))
    cache, results = TraceCache(), {}
    for start in range(0, len(ids), AUDIT_CHUNK):  # a chunk's findings in a few reads, not four reads a trace
        results |= findings_of(db, cache, ids[start:start + AUDIT_CHUNK])
    return {trace_id: results[trace_id] for trace_id in ids if trace_id in results}, \
        [trace_id for trace_id in ids if trace_id not in results]


def _findings_from(args, server: Server) -> tuple[dict[str, list[dict]], list[str]]:
    """Findings (with their marks) by trace id from the server's GET /api/findings, up to AUDIT_CHUNK traces a
    call, and the ids named that it does not have."""
    if args.trace_ids:
        results, missing = {}, []
        for query in _findings_queries(args.trace_ids):
            answer = _findings_call(args, server, query)
            results |= {item["trace_id"]: item["findings"] for item in answer["items"]}
            missing += answer["missing"]
        return results, missing
    results, offset = {}, 0
    while True:  # every trace, a page at a time in id order
        answer = _findings_call(args, server, urllib.parse.urlencode({"limit": AUDIT_CHUNK, "offset": offset}))
        results |= {item["trace_id"]: item["findings"] for item in answer["items"]}
        offset += AUDIT_CHUNK
        if not answer["items"] or offset >= answer["total"]:
            return results, []


def _findings_call(args, server: Server, query: str) -> dict:
    status, answer = _call(args, server, f"/api/findings?{query}")
    if status != 200:
        raise CommandError(f"{server.url} refused the audit: {_refusal(status, answer)}")
    return answer


def _findings_queries(trace_ids: list[str]):
    """The queries of GET /api/findings naming these traces, each under FINDINGS_QUERY_CHARS."""
    named: list[str] = []
    for trace_id in dict.fromkeys(trace_ids):
        if named and (len(named) == AUDIT_CHUNK or len(urllib.parse.urlencode({"trace_id": named + [trace_id]},
                                                                              doseq=True)) > FINDINGS_QUERY_CHARS):
            yield urllib.parse.urlencode({"trace_id": named}, doseq=True)
            named = []
        named.append(trace_id)
    yield urllib.parse.urlencode({"trace_id": named}, doseq=True)


def _print_audit(results: dict[str, list[dict]], fmt: str) -> None:
    from app.domain.audit import RULES
    from app.domain.triage import failing

    if fmt == "json":
        print(json.dumps({"traces": [{"trace_id": t, "findings": f} for t, f in results.items()]}, indent=2))
        return
    if fmt == "csv":
        writer = csvsafe.writer(sys.stdout, lineterminator="\n")
        writer.writerow(["trace_id", "finding_id", "rule", "severity", "agent", "message", "events", "mark", "note",
                         "marked_by"])
        for trace_id, findings in results.items():
            for f in findings:
                mark = f["mark"] or {}
                writer.writerow([trace_id, f["id"], f["rule"], f["severity"], f["agent"] or "", f["message"],
                                 ";".join(f["events"]), mark.get("mark", ""), mark.get("note", ""),
                                 mark.get("by") or ""])
        return
    used = [rule for rule in RULES if any(f["rule"] == rule for fs in results.values() for f in fs)]
    width = max([len("trace"), *(len(t) for t in results)])
    print(f"{'trace':<{width}}  errors  warnings  info  dismissed  " + "  ".join(used))
    for trace_id, findings in results.items():
        by = {s: sum(f["severity"] == s for f in findings) for s in ("error", "warning", "info")}
        dismissed = len(findings) - len(failing(findings))
        cells = "  ".join(f"{sum(f['rule'] == r for f in findings):>{len(r)}}" for r in used)
        print(f"{trace_id:<{width}}  {by['error']:>6}  {by['warning']:>8}  {by['info']:>4}  {dismissed:>9}  {cells}")


EXPORT_CHUNK = 1 << 16


def cmd_export(args) -> int:
    """Export labels as the labels, queue and trace pages' export menu does: `--format csv|json|rllm|trl_stepwise|
    credit_jsonl|preference_pairs` of one trace (`--trace`), one review queue (`--queue`, with `--final` its items' final labels) or
    everything, to FILE (`-o`) or standard output; through the server holding the database, else from the file."""
    from app.domain.refusals import NotFound
    from app.services import exports

    settings = Settings.from_env(db=args.db)
    target = _target(args, settings, "asking {url} for the export")
    out = open(args.output, "wb") if args.output else sys.stdout.buffer
    try:
        if isinstance(target, Server):
            params = {"format": args.format, "trace_id": args.trace, "queue_id": args.queue,
                      "final": "true" if args.final else None, "history": "true" if args.history else None}
            query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
            request = urllib.request.Request(f"{target.url}/api/annotations/export?{query}", headers=auth_headers(args))
            try:
                with urllib.request.urlopen(request) as response:
                    while chunk := response.read(EXPORT_CHUNK):
                        out.write(chunk)
            except urllib.error.HTTPError as exc:
                try:
                    answer = json.load(exc)
                except ValueError:
                    answer = {}
                raise CommandError(f"{target.url} refused the export: {_refusal(exc.code, answer)}") from None
        else:
            try:
                target.migrate(settings.migrations_dir)
                export = exports.label_export(target, None, args.format, args.trace, args.queue, args.final,
                                              args.history)
                for chunk in export.chunks:
                    out.write(chunk)
            except (exports.ExportRefused, NotFound) as exc:
                raise CommandError(str(exc)) from None
            finally:
                target.close()
    finally:
        if args.output:
            out.close()
    if args.output:
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


def cmd_demo(args) -> int:
    """Set up the database, load the sample traces (skipping those already there) and serve."""
    settings = Settings.from_env(db=args.db, host=args.host, port=args.port)
    if taken := port_taken(settings.host, settings.port):  # before loading samples, not after
        print(taken, file=sys.stderr)
        return 2
    db = _open(settings)
    db.migrate(settings.migrations_dir)
    stored, skipped = load_samples(db, settings.sample_dir)
    print(f"sample traces in {shown(settings.db)}: {len(stored)} loaded, {len(skipped)} already there")
    db.close()
    return cmd_serve(args)


def load_samples(db: Database, folder: Path) -> tuple[list[str], list[str]]:
    """Ingest every sample trace in `folder`, skipping those already stored."""
    uploads = [Upload(p.name, p.read_bytes()) for p in sorted(folder.glob("*.json"))]
    stored, skipped, *_ = ingest(db, uploads, existing="skip", endpoint="orchestrace demo")
    return stored, skipped


def cmd_backup(args) -> int:
    """Write a consistent copy of the database to PATH, one DuckDB file with every table, readable by its owner
    only. A relative PATH is a file in the backup folder (ORCHESTRACE_BACKUP_DIR, by default `backups` beside the
    database); the server holding the database writes it, on its machine and in that folder only. Refuses to
    replace an existing file unless --force, and the database and its write-ahead log always."""
    from app.store.backup import BackupError, backup, folder_of

    settings = Settings.from_env(db=args.db)
    if not args.server and not is_lake_url(str(settings.db)) and not settings.db.exists():
        print(f"error: no database at {settings.db}", file=sys.stderr)
        return 2
    target = _target(args, settings, "asking {url} to write the backup")
    if isinstance(target, Server):
        return _backup_via_server(args, target, settings.db)
    try:
        result = backup(target, args.path, args.force, folder_of(settings.backup_dir, settings.db), anywhere=True)
    except BackupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        target.close()
    print(f"wrote backup {result['path']} of {settings.db}: {_contents(result)}")
    return 0


def _backup_via_server(args, server: Server, db) -> int:
    """POST /api/backup with PATH as given: the server writes a relative one in its own backup folder."""
    body = json.dumps({"path": args.path, "force": args.force}).encode()
    status, answer = _call(args, server, "/api/backup", body, "application/json")
    if status >= 300:
        old = f" ({server.url} has no /api/backup: is it an older version of Orchestrace?)" if status == 404 else ""
        print(f"error: {_refusal(status, answer, NEED_ADMIN_TOKEN)}{old}", file=sys.stderr)
        return 1
    print(f"wrote backup {answer['path']} of {server.db or db} (by the server at {server.url}): {_contents(answer)}")
    return 0


def _contents(result: dict) -> str:
    rows = ", ".join(f"{n} {table}" for table, n in result["rows"].items())
    paused = f", writes paused {result['writes_paused_s']:.2f} s" if "writes_paused_s" in result else ""
    return f"{result['bytes'] / 1e6:.1f} MB, migration {result['migration']}, {rows}{paused}"


def cmd_restore(args) -> int:
    """Replace the database file with BACKUP (a file `orchestrace backup` wrote), after checking it opens and
    has schema_migrations; the replaced file is kept as FILE.before-restore. Stop the server first."""
    from app.store.backup import BackupError, restore

    settings = Settings.from_env(db=args.db)
    try:
        result = restore(Path(args.backup), settings.db, args.force)
    except BackupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"restored {result['path']} from {result['source']}: {_contents(result)}")
    if result["kept"]:
        print(f"the database it replaced is kept as {result['kept']}")
    return 0


class AccountRefused(Exception):
    """An account operation the server (or the service, on the file) refused; printed as one line, exit 1."""


def cmd_users(args) -> int:
    """Manage accounts: `users add NAME --role admin|reviewer|viewer` (the password from a prompt, or the first
    line of standard input with --password-stdin), `users list`, `users set NAME [--role R] [--disable|--enable]
    [--password-stdin]`. Through the server holding the database (with an admin's --token), or on the file when no
    server holds it, as when making the first admin."""
    from app.services import accounts

    target = _accounts_target(args)
    try:
        if args.users_command == "list":
            for user in _users(args, target):
                state = "disabled" if user["disabled"] else "enabled"
                print(f"{user['name']}\t{user['role']}\t{user['created_at'][:16].replace('T', ' ')} UTC\t{state}")
        elif args.users_command == "add":
            body = {"name": args.name, "role": args.role, "password": _read_password(args.password_stdin)}
            user = _account_call(args, target, "POST", "/api/users", body,
                                 lambda db: accounts.create_user(db, body))
            print(f"added {user['role']} '{user['name']}' to {_where(target)}")
        else:
            changes = _user_changes(args)
            user = _account_call(args, target, "PATCH", f"/api/users/{_segment(args.name)}", changes,
                                 lambda db: accounts.update_user(db, args.name, changes))
            state = "disabled" if user["disabled"] else "enabled"
            said = ", new password set" if "password" in changes else ""
            print(f"changed '{user['name']}' in {_where(target)}: {user['role']}, {state}{said}")
        return 0
    except AccountRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        _close(target)


def _user_changes(args) -> dict:
    changes = {"role": args.role} if args.role else {}
    if args.disable or args.enable:
        changes["disabled"] = args.disable
    if args.password_stdin:
        changes["password"] = _read_password(True)
    return changes


def _read_password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    import getpass

    password = getpass.getpass("password: ")
    if getpass.getpass("again: ") != password:
        raise SystemExit("error: the two passwords differ")
    return password


def cmd_tokens(args) -> int:
    """API tokens: `tokens create USER [--name N]` prints the token alone on its last line (shown once, stored
    hashed); `tokens list [USER]`; `tokens revoke TOKEN_ID [--user USER]`. Through the server holding the
    database (with --token: an admin's, or USER's own), or on the file when no server holds it."""
    from app.services import accounts

    target = _accounts_target(args)
    try:
        if args.tokens_command == "create":
            label = args.name or ""
            token = _account_call(args, target, "POST", f"/api/users/{_segment(args.user)}/tokens", {"name": label},
                                  lambda db: accounts.issue_token(db, args.user, label))
            print(f"API token for '{args.user}' in {_where(target)}; it is shown once: keep it now.")
            print(token["token"])
        elif args.tokens_command == "list":
            for t in _tokens(args, target, args.user):
                state = f"revoked {t['revoked_at'][:10]}" if t["revoked_at"] else (
                    f"last used {t['last_used_at'][:16].replace('T', ' ')}" if t["last_used_at"] else "never used")
                print(f"{t['token_id']}\t{t['user']}\t{t['name']}\t{state}")
        else:
            owner = args.user or next((t["user"] for t in _tokens(args, target, None)
                                       if t["token_id"] == args.token_id and not t["revoked_at"]), None)
            if owner is None:
                raise AccountRefused(f"no live token with id {args.token_id}")
            _account_call(args, target, "DELETE", f"/api/users/{_segment(owner)}/tokens/{_segment(args.token_id)}",
                          None, lambda db: accounts.revoke_token_of(db, owner, args.token_id))
            print(f"revoked token {args.token_id} of '{owner}' in {_where(target)}")
        return 0
    except AccountRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        _close(target)


def _users(args, target: Database | Server) -> list[dict]:
    """Every account (listing them takes an admin)."""
    from app.services import accounts

    return _account_call(args, target, "GET", "/api/users", None, lambda db: {"users": accounts.users(db)})["users"]


def _tokens(args, target: Database | Server, user: str | None) -> list[dict]:
    """The tokens of `user`, or of every account (which takes an admin, as listing accounts does)."""
    from app.services import accounts

    names = [user] if user else [u["name"] for u in _users(args, target)]
    return [t for name in names for t in _account_call(
        args, target, "GET", f"/api/users/{_segment(name)}/tokens", None,
        lambda db, name=name: {"tokens": accounts.tokens_of(db, name)})["tokens"]]


def _accounts_target(args) -> Database | Server:
    """The server holding the database, or the file itself, migrated, when none does."""
    settings = Settings.from_env(db=args.db)
    target = _target(args, settings, "managing accounts through {url}")
    if isinstance(target, Database):
        target.migrate(settings.migrations_dir)
    return target


def _account_call(args, target: Database | Server, method: str, path: str, body: dict | None, local):
    """The answer of one account operation: the server's API at `path`, or `local(db)` (the same service) on the
    file. A refusal raises AccountRefused with the server's message, and what to do when it wants a token."""
    from app.services import accounts

    if isinstance(target, Database):
        try:
            return local(target)
        except accounts.AccountError as exc:
            raise AccountRefused(str(exc)) from None
    data = None if body is None else json.dumps(body).encode()
    status, answer = _call(args, target, path, data, "application/json" if data else None, method)
    if status >= 300:
        raise AccountRefused(_refusal(status, answer, NEED_ADMIN_TOKEN if path == "/api/users" else NEED_TOKEN))
    return answer


def _segment(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def _close(target: Database | Server) -> None:
    if isinstance(target, Database):
        target.close()


def _open(settings: Settings) -> Database:
    try:
        return Database(settings.db, settings.lake_data)
    except DatabaseLocked as exc:
        raise SystemExit(f"error: {exc}") from exc


def _read_paths(paths: list[str]):
    """(source name, bytes) for each file named, each trace file inside a folder, and stdin for `-`."""
    for raw in paths:
        if raw == "-":
            yield "stdin", sys.stdin.buffer.read()
            continue
        path = Path(raw)
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                if child.is_file() and child.name.endswith(TRACE_SUFFIXES):
                    yield str(child), child.read_bytes()
        elif path.is_file():
            yield str(path), path.read_bytes()
        else:
            raise SystemExit(f"error: {raw}: no such file or folder")


class Progress:
    """A one-line progress bar on a terminal, for many files or large ones; silent otherwise."""

    WIDTH = 30

    def __init__(self, files: int, total_bytes: int):
        self.files, self.total, self.done_files, self.done_bytes = files, max(total_bytes, 1), 0, 0
        self.shown = sys.stderr.isatty() and (files >= PROGRESS_MIN_FILES or total_bytes >= PROGRESS_MIN_BYTES)

    def advance(self, nbytes: int) -> None:
        self.done_files += 1
        self.done_bytes += nbytes
        if self.shown:
            filled = int(self.WIDTH * self.done_bytes / self.total)
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (self.WIDTH - filled)}] "
                             f"{self.done_files}/{self.files} files, {self.done_bytes / 1e6:.1f} MB")
            sys.stderr.flush()

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\n")


def build_parser() -> argparse.ArgumentParser:
    from app.services.exports import FORMATS as EXPORT_FORMATS

    parser = argparse.ArgumentParser(prog="orchestrace", description=__doc__)
    sub = parser.add_subparsers(dest="command")

    def add(name, func, db=True):
        p = sub.add_parser(name, help=func.__doc__, description=func.__doc__)
        p.set_defaults(func=func)
        if db:
            p.add_argument("--db", help="DuckDB file (default: $ORCHESTRACE_DB or data/orchestrace.duckdb)")
        return p

    for name, func in (("serve", cmd_serve), ("demo", cmd_demo)):
        p = add(name, func)
        p.add_argument("--host", help="interface to listen on (default 127.0.0.1)")
        p.add_argument("--port", type=int, help="port to listen on (default: ORCHESTRACE_PORT, else 8000)")
    add("migrate", cmd_migrate)
    p = add("migrate-store", cmd_migrate_store, db=False)
    p.add_argument("--from", dest="source", required=True, metavar="FILE",
                   help="the store to copy: a DuckDB file (or a DuckLake URL, to move back)")
    p.add_argument("--to", dest="target", required=True, metavar="URL",
                   help="the new, empty store: ducklake:postgres:<libpq connection string> (or a DuckDB file)")
    p.add_argument("--lake-data", metavar="FOLDER",
                   help="the lake's data folder or object-storage URL (default $ORCHESTRACE_LAKE_DATA)")
    p = add("validate", cmd_validate, db=False)
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--format", choices=FORMATS, help="source format (default: recognised from each file's content)")
    def add_server(p, token_help="API token for the server (default $ORCHESTRACE_TOKEN)"):
        p.add_argument("--server", metavar="URL", help="send to this running server, and open no database file "
                       "(default: the server holding the database, found by the URL it records beside it)")
        p.add_argument("--token", help=token_help)

    for name, func in (("ingest", cmd_ingest), ("import", cmd_import)):
        p = add(name, func)
        p.add_argument("paths", nargs="+", metavar="PATH", help="files, folders, or - for standard input")
        p.add_argument("--replace", action="store_true", help="replace traces already stored")
        add_server(p)
        p.add_argument("--content", choices=("keep", "hash"), default="keep",
                       help="keep what each event said (default), or only its hashes; a server (or "
                            "ORCHESTRACE_CONTENT) set to hash keeps hashes whatever is asked")
        p.add_argument("--format", choices=FORMATS, help="source format (default: recognised from each file's content)")
    papers = sub.add_parser("papers", help="paper pool commands", description="Paper pool commands.")
    papers_sub = papers.add_subparsers(dest="papers_command", required=True)
    p = papers_sub.add_parser("import", help=cmd_papers_import.__doc__, description=cmd_papers_import.__doc__)
    p.set_defaults(func=cmd_papers_import)
    p.add_argument("--db", help="DuckDB file (default: $ORCHESTRACE_DB or data/orchestrace.duckdb)")
    p.add_argument("files", nargs="+", metavar="FILE")
    add_server(p, "an admin's API token, when the server requires one (default $ORCHESTRACE_TOKEN)")
    p = add("audit", cmd_audit)
    add_server(p)
    p.add_argument("trace_ids", nargs="*", metavar="TRACE_ID")
    p.add_argument("--all", action="store_true", help="audit every stored trace")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
    p.add_argument("--fail-on", choices=("error", "warning"),
                   help="exit 1 when a finding at this level (or worse) exists that no reviewer marked accepted_risk "
                   "or false_positive")
    p = add("export", cmd_export)
    add_server(p)
    p.add_argument("--format", choices=EXPORT_FORMATS, default="csv",
                   help="preference_pairs: a pairwise review queue's (--queue) decided pairs, as TRL reads them")
    p.add_argument("--trace", metavar="TRACE_ID", help="the labels of this trace only")
    p.add_argument("--queue", metavar="QUEUE_ID", help="the labels (and adjudications) of this review queue only")
    p.add_argument("--final", action="store_true", help="with --queue: one row per item with its final label")
    p.add_argument("--history", action="store_true", help="csv, json: every version, not only current labels")
    p.add_argument("-o", "--output", metavar="FILE", help="write here (default: standard output)")
    p = add("backup", cmd_backup)
    p.add_argument("path", metavar="PATH",
                   help="file to write (on the server's machine when a server holds the database)")
    p.add_argument("--force", action="store_true", help="replace PATH if it exists")
    add_server(p, "an admin's API token, when the server requires one (default $ORCHESTRACE_TOKEN)")
    p = add("restore", cmd_restore)
    p.add_argument("backup", metavar="BACKUP", help="a file written by `orchestrace backup`")
    p.add_argument("--force", action="store_true",
                   help="replace an existing database (kept as FILE.before-restore)")
    def add_under(group, name, func, help_):
        p = group.add_parser(name, help=help_, description=help_)
        p.set_defaults(func=func)
        p.add_argument("--db", help="DuckDB file (default: $ORCHESTRACE_DB or data/orchestrace.duckdb)")
        return p

    users_sub = add("users", cmd_users, db=False).add_subparsers(dest="users_command", required=True)
    admin_token = "an admin's API token, when a server holds the database (default $ORCHESTRACE_TOKEN)"
    p = add_under(users_sub, "add", cmd_users, "add an account")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--role", required=True, choices=("admin", "reviewer", "viewer"))
    p.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    add_server(p, admin_token)
    add_server(add_under(users_sub, "list", cmd_users, "list the accounts"), admin_token)
    p = add_under(users_sub, "set", cmd_users, "change an account's role, state or password")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--role", choices=("admin", "reviewer", "viewer"))
    state = p.add_mutually_exclusive_group()
    state.add_argument("--disable", action="store_true", help="end its sessions and refuse its tokens")
    state.add_argument("--enable", action="store_true", help="let it log in and use its tokens again")
    p.add_argument("--password-stdin", action="store_true", help="a new password, the first line of standard input")
    add_server(p, "an admin's API token, or NAME's own to change only its password (default $ORCHESTRACE_TOKEN)")
    tokens_sub = add("tokens", cmd_tokens, db=False).add_subparsers(dest="tokens_command", required=True)
    own_token = "an admin's API token, or USER's own, when a server holds the database (default $ORCHESTRACE_TOKEN)"
    p = add_under(tokens_sub, "create", cmd_tokens, "make an API token for USER (printed alone on the last line)")
    p.add_argument("user", metavar="USER")
    p.add_argument("--name", help="what the token is for (shown in lists)")
    add_server(p, own_token)
    p = add_under(tokens_sub, "list", cmd_tokens, "list tokens (of USER; of everyone takes an admin)")
    p.add_argument("user", metavar="USER", nargs="?")
    add_server(p, own_token)
    p = add_under(tokens_sub, "revoke", cmd_tokens, "revoke a token by its id")
    p.add_argument("token_id", metavar="TOKEN_ID")
    p.add_argument("--user", help="the token's owner (else found among every account's tokens, which takes an admin)")
    add_server(p, own_token)
    p = add("generate", cmd_generate, db=False)
    p.add_argument("--agents", type=int, default=1000)
    p.add_argument("--events", type=int, default=20000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("-o", "--output", default="-", help="output file (default: standard output)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not getattr(args, "func", None):
        args = build_parser().parse_args(["serve", *(argv or [])])
    try:
        return args.func(args)
    except (CommandError, MigrationsMissing, DatabaseTooNew, LakeUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
