"""Refusals: errors that are the sender's fault. Each class states its HTTP status once, as `status`, and the
fields its JSON answer holds beside `error`; the API, the pages and the ingest log all read them from here."""


class Refusal(Exception):
    """A request refused for what it holds or asks."""

    status = 422

    def details(self) -> dict:
        return {}


def status_of(exc: Exception) -> int:
    """The HTTP status of a refusal (or of a Starlette HTTPException)."""
    return getattr(exc, "status_code", None) or getattr(exc, "status", 422)
