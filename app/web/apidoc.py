"""The OpenAPI description's shared pieces: JSON schemas of the answers (routes return plain dicts) and the
refusals every route may meet before it runs (app.security), so each route names every status it answers."""


def object_schema(properties: dict, *required: str) -> dict:
    """A JSON schema of an object with these properties (others allowed), the `required` ones always there."""
    return {"type": "object", "properties": properties, "required": list(required)}


TEXT = {"type": "string"}
TEXTS = {"type": "array", "items": TEXT}
COUNT = {"type": "integer", "minimum": 0}
NUMBER = {"type": "number"}
OBJECT = {"type": "object"}
BINARY = {"type": "string", "format": "binary"}
ERROR = object_schema({"error": TEXT}, "error")
PROBLEMS = object_schema({"error": TEXT, "errors": {"type": "array", "items": OBJECT}}, "error")
MAYBE_TEXT = {"type": ["string", "null"]}
MAYBE_COUNT = {"type": ["integer", "null"]}
DOCUMENT_ERROR = object_schema({"error": TEXT, "source": MAYBE_TEXT, "line": MAYBE_COUNT, "column": MAYBE_COUNT},
                               "error")


def reply(description: str, schema: dict = ERROR, media_type: str = "application/json") -> dict:
    """One entry of a route's `responses`: what the status means and the body it carries."""
    return {"description": description, "content": {media_type: {"schema": schema}}}


# What every API route may answer before it runs (app.security: the Host allow-list, and a login or token
# when ORCHESTRACE_AUTH=required); INVALID for a route with query parameters.
READ_REFUSALS = {
    400: reply("the Host header names a host this server does not answer to"),
    401: reply("a login or an API token is needed"),
}
INVALID = {422: reply("a parameter is not valid: each problem with its path", PROBLEMS)}
# ... and what a write may also meet: a cross-site request, a role that may not write, a body too large.
WRITE_REFUSALS = READ_REFUSALS | INVALID | {
    403: reply("a cross-site request, or a role that may not do this"),
    413: reply("the body, or what it decompresses to, is larger than the server's limit",
               object_schema({"error": TEXT, "max_bytes": COUNT}, "error")),
}


def json_body(description: str) -> dict:
    """`openapi_extra` of a route that reads a JSON object itself (not through a model)."""
    return {"requestBody": {"required": True, "description": description,
                            "content": {"application/json": {"schema": OBJECT}}}}


FIELD_ERROR = object_schema({"error": TEXT, "field": MAYBE_TEXT}, "error")
NOT_JSON = {400: reply("the body is not a JSON object (or is nested too deeply to read)")}
CSV = {"type": "string", "description": "RFC 4180 CSV with a header row"}
