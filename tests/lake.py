"""A throwaway PostgreSQL for running tests against a DuckLake store (`pytest --store=lake`), and a fresh
catalog database per test. Uses the Debian `postgresql` package's binaries; the cluster runs as `postgres`
when the tests run as root (initdb refuses root), on a loopback port with trust authentication."""

import os
import shutil
import socket
import subprocess
import tempfile
from contextlib import contextmanager
from itertools import count
from pathlib import Path

from app.settings import Settings
from app.store.db import Database

POSTGRES_BINS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
CLUSTER_USER = "postgres"
TEMPLATE = "lake_template"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ThrowawayPostgres:
    """A PostgreSQL cluster in a temporary folder, stopped and removed by `stop`."""

    def __init__(self):
        if not POSTGRES_BINS:
            raise FileNotFoundError("PostgreSQL is not installed (apt-get install postgresql)")
        self.bin = POSTGRES_BINS[0]
        self.folder = Path(tempfile.mkdtemp(prefix="orchestrace-pg-"))
        self.port = free_port()
        self.as_root = os.geteuid() == 0
        self._empty = count(1)
        if self.as_root:
            shutil.chown(self.folder, CLUSTER_USER)
        self._run("initdb", "-D", str(self.folder / "data"), "-U", CLUSTER_USER, "--auth=trust", "-E", "UTF8")
        self._run("pg_ctl", "-D", str(self.folder / "data"), "-l", str(self.folder / "log"), "-w", "-o",
                  f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off", "start")

    def _run(self, program: str, *args: str, stdin: str | None = None) -> None:
        command = [str(self.bin / program), *args]
        if self.as_root and program in ("initdb", "pg_ctl"):
            command = ["runuser", "-u", CLUSTER_USER, "--", *command]
        # without pytest's PYTEST_CURRENT_TEST, which names the test with its parameters (one is a megabyte long):
        # an environment that large is refused by exec (E2BIG)
        env = {name: value for name, value in os.environ.items() if name != "PYTEST_CURRENT_TEST"}
        subprocess.run(command, check=True, capture_output=True, cwd=self.folder, input=stdin, text=True, env=env)

    def new_database(self) -> str:
        """A new empty database (for a lake made from nothing, as a new deployment's is); its connection string."""
        name = f"empty_{next(self._empty)}"
        self.psql(f"CREATE DATABASE {name};")
        return self.url(name)

    def url(self, name: str) -> str:
        """The libpq connection string of database `name`."""
        return f"dbname={name} host=127.0.0.1 port={self.port} user={CLUSTER_USER}"

    def psql(self, script: str, **variables: str) -> None:
        """Run a psql script on the `postgres` database, stopping at the first error; `variables` are quoted
        into it where it says :'name'."""
        settings = [arg for name, value in variables.items() for arg in ("-v", f"{name}={value}")]
        self._run("psql", "-X", "-q", "-h", "127.0.0.1", "-p", str(self.port), "-U", CLUSTER_USER, "-d", "postgres",
                  "-v", "ON_ERROR_STOP=1", *settings, stdin=script)

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.folder / "data"), "-m", "immediate", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)


class MigratedLake:
    """A lake migrated once (a template catalog database and its data folder) that each test gets a fresh copy
    of: running the migrations on DuckLake takes over a second, copying the result some 50 ms."""

    def __init__(self, postgres: ThrowawayPostgres, folder: Path):
        self.postgres = postgres
        self.data = folder / "data"
        self.data.mkdir()  # there to copy even when the migrations write no file
        postgres.psql(f"CREATE DATABASE {TEMPLATE};")
        db = Database(f"ducklake:postgres:{postgres.url(TEMPLATE)}", str(self.data))
        try:
            db.migrate(Settings().migrations_dir)
        finally:
            db.close()  # CREATE DATABASE ... TEMPLATE refuses a template anyone is connected to
        self._names = count(1)

    @contextmanager
    def copy(self, data: Path):
        """A new lake with its data in the new folder `data`, dropped at the end; its `ducklake:` URL. The
        catalog names the data folder (DuckLake refuses an ATTACH with another DATA_PATH), so the copy's is
        rewritten; the Parquet files the migrations wrote are copied with it. Dropping keeps the cluster small: a
        run would otherwise leave gigabytes to write and remove."""
        name = f"lake_{next(self._names)}"
        self.postgres.psql(
            f"CREATE DATABASE {name} TEMPLATE {TEMPLATE};\n"
            f"\\connect {name}\n"
            "UPDATE ducklake_metadata SET value = replace(value, :'old', :'new') WHERE key = 'data_path';\n",
            old=str(self.data), new=str(data))
        shutil.copytree(self.data, data)
        try:
            yield f"ducklake:postgres:{self.postgres.url(name)}"
        finally:
            self.postgres.psql(f"DROP DATABASE {name} WITH (FORCE);")  # FORCE: a test may leave a connection open
