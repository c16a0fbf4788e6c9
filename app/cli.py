"""The `orchestrace` command line. Each subcommand's docstring is its help text."""

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

from app.domain import csvsafe
from app.domain.validation import Problem, format_problem
from app.ingest.documents import DocumentError, TooLarge, Upload, parse_documents
from app.ingest.importers.common import ImportFailed
from app.ingest.pipeline import InvalidTraces, ingest, problems_of
from app.settings import Settings
from app.store.db import Database, DatabaseLocked

TRACE_SUFFIXES = (".json", ".jsonl", ".json.gz", ".jsonl.gz", ".gz")
PROGRESS_MIN_FILES = 5
PROGRESS_MIN_BYTES = 20 * 1024 * 1024


def cmd_serve(args) -> int:
    """Serve the web app and JSON API."""
    import uvicorn

    from app.main import create_app
    from app.services import accounts
    from app.web.security import is_loopback

    settings = Settings.from_env(db=args.db, host=args.host, port=args.port)
    try:
        app = create_app(settings)
    except DatabaseLocked as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not is_loopback(settings.host) and not accounts.has_admin(app.state.db):
        print(f"error: serving on {settings.host} (not loopback) needs accounts, and {settings.db} has no admin "
              "yet: run `orchestrace users add NAME --role admin` first", file=sys.stderr)
        app.state.db.close()
        return 2
    uvicorn.run(app, host=settings.host, port=settings.port)
    return 0


def cmd_migrate(args) -> int:
    """Apply the numbered SQL migrations not yet applied to the database."""
    settings = Settings.from_env(db=args.db)
    db = _open(settings)
    applied = db.migrate(settings.migrations_dir)
    print(f"applied {len(applied)} migration(s)" + (": " + ", ".join(applied) if applied else ""))
    return 0


def cmd_validate(args) -> int:
    """Check trace files against the format; print each problem with its path. Exit 1 if any is invalid."""
    bad = 0
    for source, data in _read_paths(args.paths):
        try:
            traces = parse_documents(data, source)
        except DocumentError as exc:
            print(f"{source}: {exc}")
            bad += 1
            continue
        errors = problems_of(traces)
        for error in errors:
            print(f"{source}: trace {error['trace']}: {format_problem_dict(error)}")
        bad += bool(errors)
        if not errors:
            print(f"{source}: {len(traces)} valid trace(s)")
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


def _ingest(args, fmt: str | None, command: str) -> int:
    settings = Settings.from_env(db=args.db)
    try:
        db = Database(settings.db)
    except DatabaseLocked:
        server = args.server or f"http://{settings.host}:{settings.port}"
        print(f"{settings.db} is held by a running server; posting to {server} instead", file=sys.stderr)
        return _ingest_via_server(args, server)
    db.migrate(settings.migrations_dir)
    existing = "replace" if args.replace else "skip"
    summary = {"ingested": [], "skipped": [], "refused": [], "warnings": []}
    batches = list(_batches(args.paths))
    progress = Progress(len(batches), sum(len(u.data) for _, b in batches for u in b))
    for label, uploads in batches:
        try:
            stored, skipped, warnings = ingest(db, uploads, existing, settings.max_body_bytes, fmt,
                                               getattr(args, "keep_content", False), command)
            summary["ingested"] += stored
            summary["skipped"] += skipped
            summary["warnings"] += warnings
        except InvalidTraces as exc:
            summary["refused"].append((label, [f"trace {e['trace']}: {format_problem_dict(e)}" for e in exc.errors]))
        except (DocumentError, ImportFailed, TooLarge) as exc:
            summary["refused"].append((label, [str(exc)]))
        progress.advance(sum(len(u.data) for u in uploads))
    progress.done()
    _print_summary(summary)
    return _exit_code(summary, command)


def _exit_code(summary: dict, command: str) -> int:
    """1 when a file was refused, or when an import found nothing to import (said, not silent)."""
    if summary["refused"]:
        return 1
    if command == "orchestrace import" and not summary["ingested"] and not summary["skipped"]:
        print("nothing imported: no file held a trace that could be read (see the warnings above)", file=sys.stderr)
        return 1
    return 0


def _batches(paths: list[str]):
    """(label, uploads) per document; a Claude Code session comes with its `<session>/subagents/` files."""
    files = list(_read_paths(paths))
    sessions = {source[:-len(".jsonl")] for source, _ in files if source.endswith(".jsonl")}
    for source, data in files:
        folder = Path(source).parent
        if folder.name == "subagents" and str(folder.parent) in sessions:
            continue  # read with its session below
        uploads = [Upload(source, data)]
        if source.endswith(".jsonl") and (Path(source[:-len(".jsonl")]) / "subagents").is_dir():
            sub = Path(source[:-len(".jsonl")]) / "subagents"
            uploads += [Upload(f"{Path(source).stem}/subagents/{p.name}", p.read_bytes())
                        for p in sorted(sub.iterdir()) if p.is_file() and p.suffix in (".jsonl", ".json")]
        yield source, uploads


def _print_summary(summary: dict) -> None:
    print(f"ingested {len(summary['ingested'])} trace(s), skipped {len(summary['skipped'])} already stored, "
          f"refused {len(summary['refused'])} file(s)")
    for warning in summary.get("warnings", []):
        print(f"  warning: {warning}")
    for trace_id in summary["skipped"]:
        print(f"  skipped {trace_id}: already stored (use --replace to replace it)")
    for source, reasons in summary["refused"]:
        print(f"  refused {source}:")
        for reason in reasons:
            print(f"    {reason}")


def _ingest_via_server(args, server: str) -> int:
    """Post each document (a session with its sub-agent files) to a running server's API, since DuckDB
    lets one process write the file."""
    summary = {"ingested": [], "skipped": [], "refused": [], "warnings": []}
    params = {"replace": "true"} if args.replace else {}
    if getattr(args, "format", None):
        params["format"] = args.format
    if getattr(args, "keep_content", False):
        params["keep_content"] = "true"
    query = "?" + urllib.parse.urlencode(params) if params else ""
    for label, uploads in _batches(args.paths):
        body, content_type = _multipart(uploads)
        request = urllib.request.Request(server.rstrip("/") + "/api/traces" + query, data=body, method="POST",
                                         headers={"Content-Type": content_type, **auth_headers(args)})
        try:
            with urllib.request.urlopen(request) as response:
                answer = json.load(response)
                summary["ingested"] += answer["ingested"]
                summary["warnings"] += answer.get("warnings", [])
        except urllib.error.HTTPError as exc:
            body = json.load(exc)
            if exc.code == 409:
                summary["skipped"] += body.get("trace_ids", [])
            else:
                reasons = [f"trace {e['trace']}: {format_problem_dict(e)}" for e in body.get("errors", [])]
                summary["refused"].append((label, reasons or [body.get("error", str(exc))]))
        except urllib.error.URLError as exc:
            print(f"error: no server answers at {server} ({exc.reason}); stop the process holding the "
                  f"database or pass --server", file=sys.stderr)
            return 2
    _print_summary(summary)
    return _exit_code(summary, "orchestrace import" if args.command == "import" else "orchestrace ingest")


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
    """Import paper-pool or exclusion-log CSV files (the kind is read from each header)."""
    from app.services.papers import CsvProblems, import_csv

    settings = Settings.from_env(db=args.db)
    db = _open(settings)
    db.migrate(settings.migrations_dir)
    failed = 0
    for path in args.files:
        try:
            result = import_csv(db, Path(path).read_bytes())
            print(f"{path}: imported {result['imported']} {result['kind']} row(s)")
        except CsvProblems as exc:
            failed += 1
            print(f"{path}: refused, nothing imported")
            for error in exc.errors:
                print(f"  {error['message']}")
        except OSError as exc:
            failed += 1
            print(f"{path}: {exc.strerror}")
    return 1 if failed else 0


def cmd_audit(args) -> int:
    """Audit traces (named, or --all): findings per trace and rule; exit 1 at --fail-on level."""
    from app.domain.audit import SEVERITIES
    from app.services.analysis import ensure_analysis
    from app.services.cache import TraceCache

    if not args.trace_ids and not args.all:
        raise SystemExit("error: name trace ids or pass --all")
    settings = Settings.from_env(db=args.db)
    db = _open(settings)
    db.migrate(settings.migrations_dir)
    ids = args.trace_ids or [r["trace_id"] for r in db.fetchall("SELECT trace_id FROM traces ORDER BY trace_id")]
    cache, results, missing = TraceCache(), {}, []
    for trace_id in ids:
        result = ensure_analysis(db, cache, trace_id)
        if result is None:
            missing.append(trace_id)
        else:
            results[trace_id] = result["findings"]
    _print_audit(results, args.format)
    for trace_id in missing:
        print(f"error: no trace with id '{trace_id}'", file=sys.stderr)
    worst = {s: any(f["severity"] == s for fs in results.values() for f in fs) for s in SEVERITIES}
    failing = args.fail_on and (worst["error"] or (args.fail_on == "warning" and worst["warning"]))
    return 2 if missing else (1 if failing else 0)


def _print_audit(results: dict[str, list[dict]], fmt: str) -> None:
    from app.domain.audit import RULES

    if fmt == "json":
        print(json.dumps({"traces": [{"trace_id": t, "findings": f} for t, f in results.items()]}, indent=2))
        return
    if fmt == "csv":
        writer = csvsafe.writer(sys.stdout, lineterminator="\n")
        writer.writerow(["trace_id", "rule", "severity", "message", "events"])
        for trace_id, findings in results.items():
            for f in findings:
                writer.writerow([trace_id, f["rule"], f["severity"], f["message"], ";".join(f["events"])])
        return
    used = [rule for rule in RULES if any(f["rule"] == rule for fs in results.values() for f in fs)]
    width = max([len("trace"), *(len(t) for t in results)])
    print(f"{'trace':<{width}}  errors  warnings  info  " + "  ".join(used))
    for trace_id, findings in results.items():
        by = {s: sum(f["severity"] == s for f in findings) for s in ("error", "warning", "info")}
        cells = "  ".join(f"{sum(f['rule'] == r for f in findings):>{len(r)}}" for r in used)
        print(f"{trace_id:<{width}}  {by['error']:>6}  {by['warning']:>8}  {by['info']:>4}  {cells}")


def cmd_demo(args) -> int:
    """Set up the database, load the sample traces (skipping those already there) and serve."""
    settings = Settings.from_env(db=args.db)
    db = _open(settings)
    db.migrate(settings.migrations_dir)
    stored, skipped = load_samples(db, settings.sample_dir)
    print(f"sample traces: {len(stored)} loaded, {len(skipped)} already there")
    db.close()
    return cmd_serve(args)


def load_samples(db: Database, folder: Path) -> tuple[list[str], list[str]]:
    """Ingest every sample trace in `folder`, skipping those already stored."""
    uploads = [Upload(p.name, p.read_bytes()) for p in sorted(folder.glob("*.json"))]
    stored, skipped, _ = ingest(db, uploads, existing="skip", endpoint="orchestrace demo")
    return stored, skipped


def cmd_backup(args) -> int:
    """Write a consistent copy of the database to PATH, one DuckDB file with every table; the server holding
    the database writes it (on its machine). Refuses to replace an existing file unless --force."""
    from app.store.backup import BackupError, backup

    settings = Settings.from_env(db=args.db)
    if not settings.db.exists():
        print(f"error: no database at {settings.db}", file=sys.stderr)
        return 2
    try:
        db = Database(settings.db)
    except DatabaseLocked:
        server = args.server or f"http://{settings.host}:{settings.port}"
        print(f"{settings.db} is held by a running server; asking {server} to write the backup", file=sys.stderr)
        return _backup_via_server(args, server, settings.db)
    try:
        result = backup(db, Path(args.path), args.force)
    except BackupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        db.close()
    print(f"wrote backup {result['path']} of {settings.db}: {_contents(result)}")
    return 0


def _backup_via_server(args, server: str, db_path: Path) -> int:
    """POST /api/backup with PATH made absolute here: the server refuses relative paths, which it would read
    from its own working folder."""
    body = json.dumps({"path": str(Path(args.path).absolute()), "force": args.force}).encode()
    request = urllib.request.Request(server.rstrip("/") + "/api/backup", data=body, method="POST",
                                     headers={"Content-Type": "application/json", **auth_headers(args)})
    try:
        with urllib.request.urlopen(request) as response:
            result = json.load(response)
    except urllib.error.HTTPError as exc:
        need_token = " (pass an admin's API token with --token or ORCHESTRACE_TOKEN)"
        hint = {401: need_token, 403: need_token,
                404: f" ({server} has no /api/backup: is it an older version of Orchestrace?)"}.get(exc.code, "")
        print(f"error: {_error_of(exc)}{hint}", file=sys.stderr)
        return 1
    except urllib.error.URLError as exc:
        print(f"error: no server answers at {server} ({exc.reason}); stop the process holding the "
              f"database or pass --server", file=sys.stderr)
        return 2
    print(f"wrote backup {result['path']} of {db_path} (by the server at {server}): {_contents(result)}")
    return 0


def _error_of(exc: urllib.error.HTTPError) -> str:
    """The `error` of a JSON error answer, else its status line."""
    try:
        return json.load(exc)["error"]
    except (ValueError, KeyError, TypeError):
        return f"{exc.code} {exc.reason}"


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


def cmd_users(args) -> int:
    """Manage accounts: `users add NAME --role admin|reviewer|viewer` (the password from a prompt, or the first
    line of standard input with --password-stdin) and `users list`."""
    from app.services import accounts
    db = _open_migrated(args)
    try:
        if args.users_command == "list":
            for user in accounts.list_users(db):
                print(f"{user['username']}\t{user['role']}\t{user['created_at']:%Y-%m-%d %H:%M} UTC")
            return 0
        password = _read_password(args.password_stdin)
        try:
            user = accounts.add_user(db, args.name, args.role, password)
        except accounts.AccountError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"added {user.role} '{user.name}' to {db.path}")
        return 0
    finally:
        db.close()


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
    hashed); `tokens list [USER]`; `tokens revoke TOKEN_ID`."""
    from app.services import accounts
    db = _open_migrated(args)
    try:
        if args.tokens_command == "create":
            try:
                token = accounts.create_token(db, args.user, args.name or "")
            except accounts.AccountError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
            print(f"API token for '{args.user}' in {db.path}; it is shown once: keep it now.")
            print(token)
        elif args.tokens_command == "list":
            for t in accounts.list_tokens(db, args.user):
                state = f"revoked {t['revoked_at']:%Y-%m-%d}" if t["revoked_at"] else (
                    f"last used {t['last_used_at']:%Y-%m-%d %H:%M}" if t["last_used_at"] else "never used")
                print(f"{t['token_id']}\t{t['username']}\t{t['name']}\t{state}")
        elif not accounts.revoke_token(db, args.token_id):
            print(f"error: no live token with id {args.token_id}", file=sys.stderr)
            return 1
        else:
            print(f"revoked token {args.token_id}")
        return 0
    finally:
        db.close()


def _open_migrated(args) -> Database:
    """The database file, migrated; accounts are managed on the file (stop the server, or run it beside)."""
    settings = Settings.from_env(db=args.db)
    db = _open(settings)
    db.migrate(settings.migrations_dir)
    return db


def _open(settings: Settings) -> Database:
    try:
        return Database(settings.db)
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
        p.add_argument("--port", type=int, help="port to listen on (default 8000)")
    add("migrate", cmd_migrate)
    p = add("validate", cmd_validate, db=False)
    p.add_argument("paths", nargs="+", metavar="PATH")
    for name, func in (("ingest", cmd_ingest), ("import", cmd_import)):
        p = add(name, func)
        p.add_argument("paths", nargs="+", metavar="PATH", help="files, folders, or - for standard input")
        p.add_argument("--replace", action="store_true", help="replace traces already stored")
        p.add_argument("--server", help="server to post to when it holds the database (default http://HOST:PORT)")
        p.add_argument("--token", help="API token for the server (default $ORCHESTRACE_TOKEN)")
        p.add_argument("--keep-content", action="store_true",
                       help="keep raw message and tool content (off: only hashes, as traces carry user data)")
        p.add_argument("--format", choices=("orchestrace", "otlp", "openai_agents", "claude_code"),
                       help="source format (default: recognised from each file's content)")
    papers = sub.add_parser("papers", help="paper pool commands", description="Paper pool commands.")
    papers_sub = papers.add_subparsers(dest="papers_command", required=True)
    p = papers_sub.add_parser("import", help=cmd_papers_import.__doc__, description=cmd_papers_import.__doc__)
    p.set_defaults(func=cmd_papers_import)
    p.add_argument("--db", help="DuckDB file (default: $ORCHESTRACE_DB or data/orchestrace.duckdb)")
    p.add_argument("files", nargs="+", metavar="FILE")
    p = add("audit", cmd_audit)
    p.add_argument("trace_ids", nargs="*", metavar="TRACE_ID")
    p.add_argument("--all", action="store_true", help="audit every stored trace")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
    p.add_argument("--fail-on", choices=("error", "warning"), help="exit 1 when a finding at this level (or worse) exists")
    p = add("backup", cmd_backup)
    p.add_argument("path", metavar="PATH",
                   help="file to write (on the server's machine when a server holds the database)")
    p.add_argument("--force", action="store_true", help="replace PATH if it exists")
    p.add_argument("--server", help="server to ask when it holds the database (default http://HOST:PORT)")
    p.add_argument("--token",
                   help="an admin's API token, when the server requires one (default $ORCHESTRACE_TOKEN)")
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
    p = add_under(users_sub, "add", cmd_users, "add an account")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--role", required=True, choices=("admin", "reviewer", "viewer"))
    p.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    add_under(users_sub, "list", cmd_users, "list the accounts")
    tokens_sub = add("tokens", cmd_tokens, db=False).add_subparsers(dest="tokens_command", required=True)
    p = add_under(tokens_sub, "create", cmd_tokens, "make an API token for USER (printed alone on the last line)")
    p.add_argument("user", metavar="USER")
    p.add_argument("--name", help="what the token is for (shown in lists)")
    p = add_under(tokens_sub, "list", cmd_tokens, "list tokens (of USER)")
    p.add_argument("user", metavar="USER", nargs="?")
    p = add_under(tokens_sub, "revoke", cmd_tokens, "revoke a token by its id")
    p.add_argument("token_id", metavar="TOKEN_ID")
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
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
