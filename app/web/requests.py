"""Request bodies as the routes read them: uploaded documents, and a JSON object checked before use."""

from fastapi import HTTPException, Request
from starlette.datastructures import UploadFile

from app.ingest.documents import MAX_FILES, MAX_JSON_VALUES, TooManyValues, Upload, json_values, strict_loads
from app.services import labels


async def read_uploads(request: Request) -> list[Upload]:
    """The request's documents: each multipart `file` part (at most MAX_FILES), or the raw body."""
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        form = await request.form(max_files=MAX_FILES)
        files = [part for part in form.getlist("file") if isinstance(part, UploadFile)]
        if not files:
            raise HTTPException(400, "multipart upload has no `file` part")
        return [Upload(part.filename or "file", await part.read()) for part in files]
    return [Upload("body", await request.body())]


async def json_object(request: Request) -> dict:
    """The body as a JSON object, checked before anything reads it: more than MAX_JSON_VALUES values is 413 (before
    parsing); too deep is 400; a key given twice or a lone surrogate is 422 naming the field."""
    data = await request.body()
    if json_values(data) > MAX_JSON_VALUES:
        raise TooManyValues("body")
    try:
        body = strict_loads(data)
    except ValueError as exc:
        raise HTTPException(400, f"body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise HTTPException(400, "body must be a JSON object")
    labels.check_request(body)
    return body
