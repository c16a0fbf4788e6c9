"""Template rendering: the only place that reads HX-* headers.

A page includes its fragments (`_events_table.html` renders the element `id="events-table"`), so
markup exists once; an htmx request aimed at one of them gets just that fragment.
"""

import json
from pathlib import Path
from urllib.parse import urlencode

from fastapi import Request
from fastapi.templating import Jinja2Templates
from jinja2 import BytecodeCache
from jinja2.bccache import Bucket
from starlette.responses import HTMLResponse

from app.web.browser import reviewer_of

HTMX_JS = "vendor/htmx-2.0.11.min.js"


class CompiledTemplates(BytecodeCache):
    """Templates' compiled code, kept in memory for every environment of the process: a server makes one app, but
    tests make one per test, and each compiled the same templates again (0.6 s for all; loaded from here, 20 ms).
    Jinja checks a template's source against the checksum stored with its code, so an edited one compiles again."""

    def __init__(self):
        self._code: dict[str, bytes] = {}

    def load_bytecode(self, bucket: Bucket) -> None:
        if (code := self._code.get(bucket.key)) is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket: Bucket) -> None:
        self._code[bucket.key] = bucket.bytecode_to_string()


COMPILED = CompiledTemplates()


def make_templates(directory: Path, plotly_js_url: str) -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(directory))
    templates.env.bytecode_cache = COMPILED
    templates.env.globals.update(htmx_js=HTMX_JS, plotly_js_url=plotly_js_url, url_with=url_with)
    templates.env.filters["num"] = format_number
    templates.env.filters["pretty_json"] = pretty_json
    return templates


def compile_templates(templates: Jinja2Templates) -> int:
    """Compile every template of the folder into the environment's cache, so that no page's first view pays for
    compiling its own (a trace page's first view took 265 ms against 69 after). Returns how many."""
    names = templates.env.list_templates()
    for name in names:
        templates.env.get_template(name)
    return len(names)


def pretty_json(value) -> str:
    """JSON indented for reading, characters as they are (the template escapes the text; tojson's \u003c
    escapes are for scripts, not for people)."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def url_with(request: Request, path: str | None = None, **changes) -> str:
    """The current URL (or `path`) with some query parameters changed (None or "" removes one, a list gives each
    of its values); a parameter given more than once (the trace list's `range`) keeps every value unless changed."""
    kept = request.query_params.multi_items() if path is None or path == request.url.path else []
    params, changed = [], set()
    for key, value in kept + list(changes.items()):
        if key in changes:
            if key in changed:
                continue
            changed.add(key)
            value = changes[key]
        params += [(key, item) for item in (value if isinstance(value, list) else [value])
                   if item is not None and item != ""]
    query = urlencode(params)
    return (path or request.url.path) + ("?" + query if query else "")


def format_number(value) -> str:
    """Compact display of counts and measures: 12,000 · 0.25 · 1.5e-05."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e15):
        return f"{int(value):,}"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) >= 1e-3 else f"{value:.3g}"
    return str(value)


def is_htmx(request: Request) -> bool:
    return request.headers.get("HX-Request") == "true"


def hx_target(request: Request) -> str | None:
    """The element id an htmx request will swap, or None for a normal page load."""
    return request.headers.get("HX-Target") if is_htmx(request) else None


def render(request: Request, template: str, context: dict, fragments: tuple[str, ...] = (),
           status_code: int = 200) -> HTMLResponse:
    """The whole page, or the fragment whose element id the htmx request targets."""
    target = hx_target(request)
    name = template
    for fragment in fragments:
        if target == Path(fragment).stem.lstrip("_").replace("_", "-"):
            name = fragment
    templates: Jinja2Templates = request.app.state.templates
    context = {"reviewer": reviewer_of(request), "csrf_token": request.state.csrf_token} | context
    response = templates.TemplateResponse(request, name, context, status_code=status_code)
    response.headers["Vary"] = "HX-Request"
    return response
