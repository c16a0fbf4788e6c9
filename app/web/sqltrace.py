"""A request's SQL, shown on demand (as Datasette's `_trace=1`): with ORCHESTRACE_TRACE_SQL set, a request whose
URL has `_trace=1` runs with its statements collected (app.store.sql); its answer gets a `Server-Timing` header
with their number and total time, and a page lists them, each with its time, at its foot."""

import html

from fastapi import Request
from starlette.responses import Response

from app.store.sql import traced_statements

TRACE_PARAM = "_trace"


async def sql_trace(request: Request, call_next):
    if not request.app.state.settings.trace_sql or request.query_params.get(TRACE_PARAM) != "1":
        return await call_next(request)
    with traced_statements() as statements:
        response = await call_next(request)
        body = b"".join([chunk async for chunk in response.body_iterator])
    total = sum(ms for _, _, ms in statements)
    headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
    headers["Server-Timing"] = f'sql;dur={total:.1f};desc="{len(statements)} statements"'
    if response.media_type == "text/html" or headers.get("content-type", "").startswith("text/html"):
        body = body.replace(b"</body>", _listing(statements).encode() + b"</body>", 1)
    return Response(body, status_code=response.status_code, headers=headers)


def _listing(statements: list) -> str:
    rows = "".join(f"<tr><td class=\"num\">{ms:.1f}</td><td><code>{html.escape(sql)}</code></td>"
                   f"<td><code>{html.escape(repr(params))}</code></td></tr>" for sql, params, ms in statements)
    total = sum(ms for _, _, ms in statements)
    return (f'<details id="sql-trace" class="card" open><summary>{len(statements)} SQL statements, {total:.1f} ms'
            f'</summary><table class="data compact"><thead><tr><th class="num">ms</th><th>statement</th>'
            f"<th>parameters</th></tr></thead><tbody>{rows}</tbody></table></details>")
