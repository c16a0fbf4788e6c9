"""Which HTTP status each refusal gets: one table, for the JSON answers, the pages and the ingest log."""

from app.documents import DocumentError, TooLarge
from app.importers.common import ImportFailed
from app.importers.otlp_protobuf import NotProtobuf
from app.limits import BodyTooLarge
from app.store import TracesExist

STATUS = {
    DocumentError: 400,
    NotProtobuf: 400,
    ImportFailed: 422,
    TracesExist: 409,
    TooLarge: 413,
    BodyTooLarge: 413,
}


def status_of(exc: Exception) -> int:
    """The status of a refusal: its own `status_code`/`status`, else the table's, else 422."""
    for attr in ("status_code", "status"):
        value = getattr(exc, attr, None)
        if isinstance(value, int):
            return value
    for kind, status in STATUS.items():
        if isinstance(exc, kind):
            return status
    return 422
