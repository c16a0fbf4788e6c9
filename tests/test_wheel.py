"""The package as a user installs it: a wheel built from the repo, installed into a fresh venv, serves the app
from another directory, with its templates, static files, migrations and sample traces inside it.

The fresh venv gets the wheel from pip and, of the packages the wheel requires (Requires-Dist, followed through
their own requirements), exactly those: linked from the venv running the tests, not fetched again from an index
(two minutes of a package index's round trips for nothing this test checks, and no network needed). A requirement the
wheel forgets to declare is missing there, as it would be for a user."""

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
import venv
import zipfile
from pathlib import Path

import pytest
from conftest import free_port
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from app.store.db import Database, MigrationsMissing

pytestmark = pytest.mark.heavy

ROOT = Path(__file__).resolve().parent.parent
DATA_FOLDERS = ("templates", "static", "migrations", "sample_traces")
INSTALL_TIMEOUT_S = 600
START_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # with this venv's setuptools (a test requirement): a build environment would be fetched from the index
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w",
                    str(out), str(ROOT)], check=True, timeout=INSTALL_TIMEOUT_S)
    (built,) = out.glob("orchestrace-*.whl")
    return built


def test_the_wheel_holds_every_package_and_data_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = [init.relative_to(ROOT).as_posix() for init in (ROOT / "app").rglob("__init__.py")]
    missing = [p for p in packages if p not in names]
    assert missing == []
    for folder in DATA_FOLDERS:
        shipped = {path.relative_to(ROOT).as_posix() for path in (ROOT / folder).rglob("*") if path.is_file()}
        assert shipped and {f"app/{name}" for name in shipped} <= names, folder


def required_by(wheel: Path) -> list[Requirement]:
    """The wheel's own Requires-Dist, extras' requirements left out."""
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        text = archive.read(metadata).decode()
    return [Requirement(line.split(":", 1)[1]) for line in text.splitlines() if line.startswith("Requires-Dist:")]


def link_requirements(requirements: list[Requirement], site_packages: Path) -> set[str]:
    """Link each required distribution (and what it requires, markers evaluated for no extra) from this venv into
    `site_packages`: its top-level modules, packages and metadata, as its RECORD lists them. Their names."""
    linked: set[str] = set()
    todo = list(requirements)
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if name in linked or (requirement.marker and not requirement.marker.evaluate({"extra": ""})):
            continue
        linked.add(name)
        dist = importlib.metadata.distribution(name)
        for top in {file.parts[0] for file in dist.files if file.parts[0] != ".."}:
            target = site_packages / top
            if not target.exists():
                target.symlink_to(Path(dist.locate_file(top)).resolve())
        todo += [Requirement(text) for text in dist.requires or ()]
    return linked


def test_a_fresh_venv_with_only_the_wheel_serves_the_app_from_another_directory(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir)  # this venv's pip installs into it (--python): installing pip there costs half a minute
    pip = [sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python")]
    (site_packages,) = (env_dir / "lib").glob("python3*/site-packages")
    assert {"duckdb", "fastapi", "plotly"} <= link_requirements(required_by(wheel), site_packages)
    subprocess.run([*pip, "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
                   check=True, timeout=INSTALL_TIMEOUT_S, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    check = subprocess.run([*pip, "check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr  # every requirement of every package is there
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORCHESTRACE_", "PYTHON"))}
    server = subprocess.Popen([str(env_dir / "bin" / "orchestrace"), "demo", "--port", str(port), "--db",
                               str(elsewhere / "demo.duckdb")], cwd=elsewhere, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        traces = json.loads(wait_for(url + "/api/traces", server))
        assert len(traces["items"]) == len(list((ROOT / "sample_traces").glob("*.json")))
        home = fetch(url + "/")
        first = traces["items"][0]["trace_id"]
        assert first in home
        page = fetch(f"{url}/traces/{first}")
        assert "trace.js" in page and first in page
        assert fetch(url + "/static/app.css")
        plotly = re.search(r'src="(/static/vendor/plotly[^"]+)"', page)  # the vendored bundle the graph needs
        assert plotly and "Plotly" in fetch(url + plotly.group(1))
    finally:
        server.terminate()
        output = server.communicate(timeout=30)[0].decode(errors="replace")
    assert "Traceback" not in output, output


def wait_for(url: str, server: subprocess.Popen) -> str:
    deadline = time.time() + START_TIMEOUT_S
    while time.time() < deadline:
        if server.poll() is not None:
            pytest.fail(f"the installed server exited: {server.stdout.read().decode(errors='replace')}")
        try:
            return fetch(url)
        except OSError:
            time.sleep(0.2)
    pytest.fail("the installed server did not answer")


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.status == 200
        return response.read().decode()


def test_a_missing_or_empty_migrations_folder_is_an_error_naming_it(tmp_path):
    db = Database(tmp_path / "x.duckdb")
    try:
        for folder in (tmp_path / "nowhere", tmp_path):
            with pytest.raises(MigrationsMissing, match=str(folder)):
                db.migrate(folder)
    finally:
        db.close()
