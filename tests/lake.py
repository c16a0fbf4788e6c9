"""A throwaway PostgreSQL for running tests against a DuckLake store (`pytest --store=lake`), and a fresh
catalog database per test. Uses the Debian `postgresql` package's binaries; the cluster runs as `postgres`
when the tests run as root (initdb refuses root), on a loopback port with trust authentication."""

import os
import shutil
import socket
import subprocess
import tempfile
from itertools import count
from pathlib import Path

POSTGRES_BINS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
CLUSTER_USER = "postgres"


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
        self._names = count(1)
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.folder, CLUSTER_USER)
        self._run("initdb", "-D", str(self.folder / "data"), "-U", CLUSTER_USER, "--auth=trust", "-E", "UTF8")
        self._run("pg_ctl", "-D", str(self.folder / "data"), "-l", str(self.folder / "log"), "-w", "-o",
                  f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off", "start")

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.bin / program), *args]
        if self.as_root and program in ("initdb", "pg_ctl"):
            command = ["runuser", "-u", CLUSTER_USER, "--", *command]
        subprocess.run(command, check=True, capture_output=True, cwd=self.folder)

    def new_database(self) -> str:
        """A new empty database; its libpq connection string."""
        name = f"lake_{next(self._names)}"
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", CLUSTER_USER, name)
        return f"dbname={name} host=127.0.0.1 port={self.port} user={CLUSTER_USER}"

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.folder / "data"), "-m", "immediate", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)
