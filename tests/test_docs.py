"""The README documents every setting, docs/api.md every API route, docs/format.md the whole taxonomy: users'
scripts and exporters rely on those names."""

import json
import re
from pathlib import Path

import pytest

from app.domain.audit import audit
from app.domain.schema import trace_schema
from app.domain.taxonomy import (
    CREDIT_UNITS,
    EDGE_TYPES,
    EVENT_TYPES,
    REWARD_FAMILIES,
    SUBDECISIONS,
    TOPOLOGIES,
)
from app.domain.validation import validate_trace
from app.main import create_app
from app.settings import ENV_PREFIX, Settings

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
API_DOC = (ROOT / "docs" / "api.md").read_text()
FORMAT_DOC = (ROOT / "docs" / "format.md").read_text()


@pytest.mark.parametrize("field", list(Settings.model_fields))
def test_every_setting_is_documented(field):
    assert f"`{ENV_PREFIX}{field.upper()}`" in README


def test_every_api_route_is_documented(settings):
    spec = create_app(settings).openapi()
    paths = {path for path in spec["paths"] if path.startswith(("/api/", "/v1/"))}
    missing = [path for path in sorted(paths) if path not in API_DOC]
    assert not missing, f"API routes missing from docs/api.md (the API reference): {missing}"


def test_the_readme_links_the_api_and_format_docs():
    assert "(docs/api.md)" in README and "(docs/format.md)" in README


@pytest.mark.parametrize("name", [*EVENT_TYPES, *EDGE_TYPES, *TOPOLOGIES, *REWARD_FAMILIES, *CREDIT_UNITS,
                                  *SUBDECISIONS])
def test_the_format_doc_names_every_term_of_the_taxonomy(name):
    assert f"`{name}`" in FORMAT_DOC or f"| {name} |" in FORMAT_DOC


def test_the_format_docs_example_is_a_valid_trace_without_audit_findings():
    from jsonschema import Draft202012Validator

    (example,) = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", FORMAT_DOC, re.DOTALL)]
    assert validate_trace(example) == []
    assert list(Draft202012Validator(trace_schema()).iter_errors(example)) == []
    assert audit(example) == []  # exporter authors copy it: it shows no bad habit


def test_readme_starts_with_the_two_commands():
    block = README.split("```sh", 1)[1].split("```", 1)[0]
    assert [line.split()[:2] for line in block.strip().splitlines()] == [["make", "demo"], ["make", "test"]]


def test_the_openapi_description_of_an_invalid_request_is_what_the_app_answers(client):
    import jsonschema
    spec = client.get("/openapi.json").json()
    schema = spec["components"]["schemas"]["HTTPValidationError"]
    answer = client.get("/api/traces", params={"limit": 0})
    assert answer.status_code == 422
    jsonschema.validate(answer.json(), schema)
    assert "#/components/schemas/ValidationError" not in json.dumps(spec)


def test_the_importers_doc_names_every_format_of_the_registry():
    from app.ingest.importers import REGISTRY

    doc = (ROOT / "docs" / "importers.md").read_text()
    for declared in REGISTRY:
        assert f"| `{declared.name}` | {declared.summary} |" in doc, declared.name
