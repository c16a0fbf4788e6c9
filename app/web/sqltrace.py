"""A request's SQL, shown on demand (as Datasette's `_trace=1`): with ORCHESTRACE_TRACE_SQL set, a request whose
URL has `_trace=1` runs with its statements collected (app.store.sql); its answer gets a `Server-Timing` header
with their number and total time, and a page lists them, each with its time, at its foot."""

import html

from starlette.datastructures import Headers, QueryParams
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.store.sql import traced_statements
from app.web.asgi import HTTPMiddleware

TRACE_PARAM = "_trace"


class SQLTrace(HTTPMiddleware):
    """Every request but one asking for its trace passes straight through, an exporter's batches too."""

    def __init__(self, app: ASGIApp, enabled: bool):
        super().__init__(app)
        self.enabled = enabled

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.enabled or QueryParams(scope["query_string"]).get(TRACE_PARAM) != "1":
            await self.app(scope, receive, send)
            return
        head: Message = {}
        chunks: list[bytes] = []

        async def keep(message: Message) -> None:
            if message["type"] == "http.response.start":
                head.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        with traced_statements() as statements:
            await self.app(scope, receive, keep)
        body = b"".join(chunks)
        total = sum(ms for _, _, ms in statements)
        headers = {k: v for k, v in Headers(raw=head["headers"]).items() if k.lower() != "content-length"}
        headers["Server-Timing"] = f'sql;dur={total:.1f};desc="{len(statements)} statements"'
        if headers.get("content-type", "").startswith("text/html"):
            body = body.replace(b"</body>", _listing(statements).encode() + b"</body>", 1)
        await Response(body, status_code=head["status"], headers=headers)(scope, receive, send)


def _listing(statements: list) -> str:
    rows = "".join(f"<tr><td class=\"num\">{ms:.1f}</td><td><code>{html.escape(sql)}</code></td>"
                   f"<td><code>{html.escape(repr(params))}</code></td></tr>" for sql, params, ms in statements)
    total = sum(ms for _, _, ms in statements)
    return (f'<details id="sql-trace" class="card" open><summary>{len(statements)} SQL statements, {total:.1f} ms'
            f'</summary><table class="data compact"><thead><tr><th class="num">ms</th><th>statement</th>'
            f"<th>parameters</th></tr></thead><tbody>{rows}</tbody></table></details>")
