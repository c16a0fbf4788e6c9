"""Request body limits: enforced while the body streams in, so an oversized upload is never buffered whole,
and again on what a compressed body expands to."""

import zlib

from starlette.types import ASGIApp, Receive, Scope, Send

from app.domain.refusals import Refusal
from app.ingest.documents import GZIP_WBITS, DocumentError, TooLarge, inflate
from app.web.asgi import HTTPMiddleware
from app.web.errors import refusal_response


class BodyTooLarge(Refusal):
    """The request body passed the configured limit."""

    status = 413

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        super().__init__(f"request body exceeds the limit of {max_bytes} bytes")

    def details(self) -> dict:
        return {"max_bytes": self.max_bytes}


class BodyLimitMiddleware(HTTPMiddleware):
    """Answer 413 on a declared Content-Length over the limit; raise BodyTooLarge when a stream passes it."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        super().__init__(app)
        self.max_bytes = max_bytes

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        declared = dict(scope["headers"]).get(b"content-length")
        if declared and declared.isdigit() and int(declared) > self.max_bytes:
            await refusal_response(BodyTooLarge(self.max_bytes))(scope, receive, send)
            return
        received = 0

        async def limited_receive():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        await self.app(scope, limited_receive, send)


class UnsupportedEncoding(ValueError):
    """A Content-Encoding the server does not decode."""


# Content-Encoding -> zlib window bits: gzip framing, or zlib framing for "deflate" (RFC 9110), which
# some clients send raw; that is tried when the zlib header is missing.
CONTENT_ENCODINGS = {"gzip": GZIP_WBITS, "x-gzip": GZIP_WBITS, "deflate": 15}
RAW_DEFLATE_WBITS = -15


def decode_content(body: bytes, encoding: str | None, max_bytes: int) -> bytes:
    """The body after its Content-Encoding, inflated with a running cap at `max_bytes` (see documents.inflate)."""
    encoding = (encoding or "identity").strip().lower()
    if encoding == "identity":
        return body
    if encoding not in CONTENT_ENCODINGS:
        raise UnsupportedEncoding(f"Content-Encoding {encoding!r} is not supported; send gzip, deflate or none")
    try:
        try:
            return inflate(body, CONTENT_ENCODINGS[encoding], max_bytes)
        except zlib.error:
            if encoding != "deflate":
                raise DocumentError("body is not readable gzip data") from None
            try:
                return inflate(body, RAW_DEFLATE_WBITS, max_bytes)
            except zlib.error as exc:
                raise DocumentError(f"body is not readable deflate data ({exc})") from None
    except EOFError:
        raise DocumentError(f"truncated {encoding} body") from None
    except TooLarge as exc:
        raise TooLarge(f"body {exc}") from None
