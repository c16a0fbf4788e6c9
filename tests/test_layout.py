"""The folders of `app/` show the architecture: calls run one way, from the web edge down to pure domain code
(web -> services -> ingest -> store -> domain), no route imports another route, and the domain does no I/O."""

import ast
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parent.parent / "app"
LAYERS = ["web", "services", "ingest", "store", "domain"]  # each may import those after it, never before
SHARED = {"app.settings"}  # configuration, read by every layer
IO_MODULES = {"duckdb", "sqlmodel", "sqlalchemy", "fastapi", "starlette", "socket", "subprocess", "urllib", "http"}


def imports_of(path: Path) -> list[str]:
    """Every module `path` imports, at any depth of its code."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names += [f"{node.module}.{alias.name}" for alias in node.names] if node.module == "app" else [node.module]
    return names


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "app" and parts[1] in LAYERS else None


MODULES = sorted(p for layer in LAYERS for p in (APP / layer).rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(APP)))
def test_calls_run_from_the_web_edge_down_to_the_domain(path):
    own = path.relative_to(APP).parts[0]
    upward = [name for name in imports_of(path)
              if name.startswith("app") and name not in SHARED
              and (layer_of(name) is None or LAYERS.index(layer_of(name)) < LAYERS.index(own))]
    assert upward == [], f"{path.relative_to(APP)} ({own}) imports from a layer above it or outside the layers"


@pytest.mark.parametrize("path", sorted((APP / "web" / "routes").glob("*.py")), ids=lambda p: p.name)
def test_no_route_imports_another_route(path):
    assert [name for name in imports_of(path) if name.startswith("app.web.routes")] == []


@pytest.mark.parametrize("path", sorted((APP / "domain").glob("*.py")), ids=lambda p: p.name)
def test_the_domain_is_pure(path):
    assert [name for name in imports_of(path) if name.split(".")[0] in IO_MODULES] == []
