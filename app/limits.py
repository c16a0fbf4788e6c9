"""Request body limit, enforced while the body streams in so an oversized upload is never buffered whole."""

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send


class BodyTooLarge(Exception):
    """The request body passed the configured limit."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        super().__init__(f"request body exceeds the limit of {max_bytes} bytes")


def too_large_response(exc: BodyTooLarge) -> JSONResponse:
    return JSONResponse({"error": str(exc), "max_bytes": exc.max_bytes}, status_code=413)


class BodyLimitMiddleware:
    """Answer 413 on a declared Content-Length over the limit; raise BodyTooLarge when a stream passes it."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared and declared.isdigit() and int(declared) > self.max_bytes:
            await too_large_response(BodyTooLarge(self.max_bytes))(scope, receive, send)
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
