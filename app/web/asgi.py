"""The base of the app's middleware: plain ASGI, not Starlette's BaseHTTPMiddleware, which costs a task and a stream
per request (a few milliseconds of each of an exporter's batches)."""

from starlette.types import ASGIApp, Receive, Scope, Send


class HTTPMiddleware:
    """Middleware that sees HTTP requests (`http`); the lifespan and any other scope pass straight through."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.http(scope, receive, send)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError
