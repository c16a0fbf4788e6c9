"""Refusals: errors that are the sender's fault. Each class states its HTTP status once, as `status`, and the
fields its JSON answer holds beside `error`; the API, the pages and the ingest log all read them from here."""


class Refusal(Exception):
    """A request refused for what it holds or asks."""

    status = 422

    def details(self) -> dict:
        return {}


class NotFound(Refusal, LookupError):
    """What the request names does not exist; `what` names it for a page ("trace 'x'")."""

    status = 404

    def __init__(self, message: str, what: str | None = None):
        self.what = what
        super().__init__(message)


class InvalidParameter(Refusal, ValueError):
    """A query parameter valid on its own but not as asked (with another, or too many of it): answered as one of the
    wrong type is, its path in `errors`."""

    status = 422

    def __init__(self, parameter: str, message: str):
        self.parameter, self.message = parameter, message
        super().__init__(f"{parameter}: {message}")

    def details(self) -> dict:
        return {"errors": [{"path": f"query.{self.parameter}", "message": self.message}]}


def status_of(exc: Exception) -> int:
    """The HTTP status of a refusal (or of a Starlette HTTPException)."""
    return getattr(exc, "status_code", None) or getattr(exc, "status", 422)
