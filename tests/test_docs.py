"""The README documents every setting and every API route: users' scripts rely on those names."""

import json
from pathlib import Path

import pytest

from app.main import create_app
from app.settings import ENV_PREFIX, Settings

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


@pytest.mark.parametrize("field", list(Settings.model_fields))
def test_every_setting_is_documented(field):
    assert f"`{ENV_PREFIX}{field.upper()}`" in README


def test_every_api_route_is_documented(settings):
    spec = create_app(settings).openapi()
    paths = {path for path in spec["paths"] if path.startswith(("/api/", "/v1/"))}
    missing = [path for path in sorted(paths) if path not in README]
    assert not missing, f"undocumented API routes: {missing}"


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
