"""The trace format's JSON Schema, for exporter authors and their editors and validators."""

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app.domain.schema import trace_schema
from app.web.access import AnyViewer
from app.web.apidoc import OBJECT, READ_REFUSALS, TEXT, TEXTS, object_schema, reply

router = APIRouter(prefix="/api", tags=["format"])

SCHEMA_MEDIA_TYPE = "application/schema+json"
JSON_SCHEMA = object_schema({"$schema": TEXT, "$id": TEXT, "title": TEXT, "description": TEXT, "type": TEXT,
                             "required": TEXTS, "properties": OBJECT, "$defs": OBJECT},
                            "$schema", "$id", "title", "type", "properties")


class SchemaBody(JSONResponse):
    media_type = SCHEMA_MEDIA_TYPE


@router.get("/schema", dependencies=[AnyViewer], response_class=SchemaBody, responses=READ_REFUSALS | {
    200: reply("the JSON Schema (draft 2020-12) of one trace; the rules beyond it are in its description",
               JSON_SCHEMA, SCHEMA_MEDIA_TYPE)})
def read_schema():
    """The JSON Schema of the trace format, built from the taxonomy the validator uses."""
    return SchemaBody(trace_schema())
