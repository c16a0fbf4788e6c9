"""The OpenAPI description fuzzed by schemathesis, in process over ASGI with a bounded number of examples:
no route answers 5xx, and every route answers only with the statuses, media types, headers and bodies its
description names.

Not checked: that every schema-valid request is accepted (a trace's structural rules, such as edge
endpoints being event ids, are beyond JSON Schema). The Allow header of a 405 is tested in test_api_traces.
"""

import json
import tempfile
from pathlib import Path

import pytest
import schemathesis
from conftest import BASE_URL, make_trace
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app.ingest.documents import Upload
from app.ingest.pipeline import ingest
from app.main import create_app
from app.settings import Settings

EXAMPLES = 25  # per operation: the whole module takes about 20 s
SEEDED = "t-small"  # a stored trace, so routes under /api/traces/{trace_id} answer more than 404
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance, negative_data_rejection]

_folder = tempfile.TemporaryDirectory()
app = create_app(Settings(db=Path(_folder.name) / "fuzz.duckdb"))
ingest(app.state.db, [Upload("seed", json.dumps(make_trace(SEEDED)).encode())])


async def served(scope, receive, send):
    """The app with its lifespan left to this module: schemathesis ends a lifespan after each test, and
    the app's closes its database."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await app(scope, receive, send)


schema = schemathesis.openapi.from_asgi("/openapi.json", served, headers={"Host": "127.0.0.1"})
# Bodies of the binary and line-based media types the description names, sent as generated.
schemathesis.serializer.alias(["application/gzip", "application/zip", "application/x-tar", "application/x-protobuf",
                               "application/protobuf"], "application/octet-stream")
schemathesis.serializer.alias("application/x-ndjson", "text/plain")


@schema.hook
def flatmap_path_parameters(context, path_parameters):
    """Half the cases of a route under a trace name the seeded one."""
    if not path_parameters or "trace_id" not in path_parameters:
        return st.just(path_parameters)
    return st.sampled_from([path_parameters, {**path_parameters, "trace_id": SEEDED}])


@pytest.fixture(scope="module", autouse=True)
def close_app():
    yield
    app.state.live.close()
    app.state.db.close()
    _folder.cleanup()


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_no_5xx_and_described_answers(case):
    case.call_and_validate(base_url=BASE_URL, checks=CHECKS)
