"""Import OpenTelemetry GenAI spans sent as OTLP/JSON (IMPORTERS.md §0 and §1): one trace per traceId.

Input is an OTLP/HTTP JSON traces document, `{"resourceSpans": [...]}`. Ids may be hex (the OTLP/JSON
rule) or base64 (plain protobuf JSON, e.g. `MessageToDict`); enums may be integers or their proto names;
the pre-1.0 `instrumentationLibrarySpans` key is read like `scopeSpans`.

Choices where the mapping is silent, made for an auditor who wants to trace every event back to a span:
- Event ids are `e1`, `e2`, ... in time order (zero-padded); every event keeps `span_id`,
  `parent_span_id`, `trace_id` (hex) and `operation`, plus `tool_call_id`, `agent_id`,
  `conversation_id` where the span has them.
- A `tool_result` has the tool as its agent (as in the synthetic traces) and no role; temporal edges
  therefore chain only the acting agents. A fan-out `aggregate` belongs to the calling agent, keeps
  `tool`, counts its sub-agent runs in `inputs`, and takes an `aggregate` edge (no `return` edge)
  from each of their returns. A failed tool (status 2 or `error.type`) gives `error: true`.
- Root runs: the user's `message` gets a `message` edge into the root agent's first event, so the
  request is connected to the work it caused. The root agent's `return` goes to `user`.
- A sub-agent whose parent span is not an `execute_tool` (directly nested, or under unknown spans)
  returns with a `return` edge into its parent agent's next model call, when there is one.
- Spans between GenAI spans that are not GenAI (HTTP, custom app spans) are transparent: a sub-agent
  under an `execute_tool` with such spans in between is still delegated by that tool.
- Instance id: the first of `gen_ai.agent.id`, `gen_ai.agent.call.id`, spanId not already taken by
  another instance. Which runs are one instance is otlp_patterns' rule (the agent's id, else its name;
  only concurrent runs apart); its first run spawns it, each later run gets a message from whoever
  passed control (`resumed`, `handoff` when handed off) linked to its next event, never backwards.
- A handoff's spawn or message names the span that asked for it in `transfer_span_id` (a transfer tool, an
  OpenLLMetry `handoff` span, a model call whose output asked for it).
- Topology (`topology`): hierarchical when sub-agents spawn; with handoffs, centralized when one agent
  takes part in every handoff, else swarm.
- Model output -> tool_call: matched by tool call id within the agent instance; without ids (content
  not captured) the agent's latest model call that ended before the tool started.
- Tool results and agent outputs are not marked `trusted`: nothing in the spans says where they came from.
- `content_ref`: a tool_call's is its `gen_ai.tool.call.id` (spec), else the hash of its arguments;
  everything else is the hash of the span's content (`sha256:...`).
- `content` (unless the content policy is `hash`; cut to common.CONTENT_CAP_BYTES): what the span carried,
  parsed from JSON where it is JSON, in whichever convention carried it (see `_carried`): an agent's first
  event keeps the run's input, its return the run's output; a tool_call the arguments, a tool_result the
  result; a model call `{"system", "input", "output"}` (each when carried: system instructions, input and
  output messages); a plan its output. pydantic-ai writes no input on its agent span: the run's input is the
  messages before the first model response in `pydantic_ai.all_messages`.
- Tokens: `gen_ai.usage.input_tokens`/`output_tokens` (≤1.26 names `prompt_tokens`/`completion_tokens`
  accepted) of inference and `embeddings` spans; an `invoke_agent` or `plan` span's own usage
  (or pydantic-ai's `gen_ai.aggregated_usage.*`) counts only when no span below it carries usage.
  Cache token sums go to `metrics` (`cache_read_input_tokens`, `cache_creation_input_tokens`).
- Rewards: `gen_ai.evaluation.result` span events, or log records when the document also holds
  `resourceLogs`; Agent Lightning `agentlightning.annotation` spans (`agentlightning.reward.<i>.*`).
  When a name repeats, the latest value wins and a warning says so.
- t = 0 and `wall_clock_s` are measured over all spans of the trace, GenAI or not. `costs.messages`
  counts LLM calls (spec), decisions included, so it can exceed the number of `message` events.
- A duplicate spanId (an exporter retry) keeps the first span; a parent missing from the document
  makes a root. Both are warnings. A trace with no agent, model or tool span is skipped with a warning, and a
  document with none (e.g. an exporter batch of HTTP spans) gives no trace: it is not malformed.
- task_id: the root span's `gen_ai.conversation.id`, else the root agent's, else the workflow name,
  else the traceId. system: the scope name of the root agent span, else of the root span, else
  `service.name`.

`common.TraceBuilder` (ids in time order, temporal edges, edge ends) is shared with the other importers.
"""

import base64
import binascii
import math
import re
from bisect import bisect_left, bisect_right
from collections import Counter
from functools import cache

import orjson

from app.ingest.importers import cli_telemetry, otlp_patterns
from app.ingest.importers.common import (
    KEEP,
    Batch,
    ContentPolicy,
    Format,
    ImportFailed,
    ImportResult,
    TraceBuilder,
    keeps,
    put_content,
    ref,
    show,
    span_tree,
)
from app.ingest.importers.conventions import CHAIN, OI_KIND, TRACELOOP_KIND, translate, unflatten
from app.store.gcpause import paused_gc

NS_PER_S = 1_000_000_000
TRACE_ID_BYTES = 16
SPAN_ID_BYTES = 8
STATUS_ERROR = 2
SPAN_KINDS = {"SPAN_KIND_UNSPECIFIED": 0, "SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2,
              "SPAN_KIND_CLIENT": 3, "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5}
INTERNAL, CLIENT, MAX_SPAN_KIND = 1, 3, 5
STATUS_CODES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
TRACE_ID_PREFIX = "otlp-"  # + the 32 hex digits of the traceId: the stored trace's id
USER = "user"
RUN_KEYS = ("gen_ai.conversation.id", "session.id")  # attributes that name the run a span belongs to
NO_AGENT_SPAN = "no agent, model or tool span (OpenTelemetry GenAI, OpenInference or OpenLLMetry conventions)"
SYSTEM = "system"  # spawns by no agent, e.g. create_agent outside any agent span
UNKNOWN_SERVICE = "unknown_service"

AGENT, CREATE, WORKFLOW, PLAN, INFERENCE, TOOL, TOOLISH, REWARD, STRUCTURE = (
    "agent", "create", "workflow", "plan", "inference", "tool", "toolish", "reward", "structure")
OPERATIONS = {
    "invoke_agent": AGENT,
    "create_agent": CREATE,
    "invoke_workflow": WORKFLOW,
    "invoke_swarm": WORKFLOW,  # Strands' multi-agent patterns
    "invoke_graph": WORKFLOW,
    "workflow.run": WORKFLOW,  # Microsoft Agent Framework's workflow span (no GenAI operation name)
    "plan": PLAN,
    "chat": INFERENCE,
    "text_completion": INFERENCE,
    "generate_content": INFERENCE,
    "execute_tool": TOOL,
    "embeddings": TOOLISH,
    "retrieval": TOOLISH,
    "agentlightning.annotation": REWARD,
    CHAIN: STRUCTURE,
    "handoff": STRUCTURE,  # OpenLLMetry's handoff span: read by otlp_patterns, no event of its own
}
EVALUATION_EVENT = "gen_ai.evaluation.result"
REWARD_ATTR = "agentlightning.reward.{}.{}"
USAGE_KEYS = (("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"),
              ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"))
# pydantic-ai writes a run's total on its invoke_agent span under these names.
AGENT_USAGE_KEYS = (USAGE_KEYS[0] + ("gen_ai.aggregated_usage.input_tokens",),
                    USAGE_KEYS[1] + ("gen_ai.aggregated_usage.output_tokens",))
CACHE_METRICS = {"gen_ai.usage.cache_read.input_tokens": "cache_read_input_tokens",
                 "gen_ai.usage.cache_creation.input_tokens": "cache_creation_input_tokens"}
# Where each convention writes what a span took in and gave out (see _carried), by side.
INPUT, OUTPUT = "input", "output"
MESSAGES = {INPUT: "gen_ai.input.messages", OUTPUT: "gen_ai.output.messages"}
TOOL_IO = {INPUT: "gen_ai.tool.call.arguments", OUTPUT: "gen_ai.tool.call.result"}
NUMBERED = {INPUT: "gen_ai.prompt.", OUTPUT: "gen_ai.completion."}  # OpenLLMetry before gen_ai.*.messages
LANGSMITH = {INPUT: "gen_ai.prompt", OUTPUT: "gen_ai.completion"}  # LangSmith's run inputs and outputs as JSON
FIRST_FLATTENED = ("role", "content", "message.role", "message.content")  # what a flattened first message holds

INSTRUMENTATION_PREFIX = re.compile(r"^(openinference|opentelemetry)\.instrumentation\.")
_HEX = {TRACE_ID_BYTES: re.compile(r"[0-9a-fA-F]{32}"), SPAN_ID_BYTES: re.compile(r"[0-9a-fA-F]{16}")}


def topology(max_depth: int, handoffs: list[tuple[str, str]] = ()) -> str:
    """From who passed control to whom: hierarchical when sub-agents spawn sub-agents of their own; among
    agents that hand off to each other, centralized when one agent takes part in every handoff (a hub
    such as a coordinator that workers hand back to), else a swarm; centralized when the lead's sub-agents
    spawn nobody; unknown without spawns or handoffs."""
    if max_depth >= 2:
        return "hierarchical"
    if handoffs:
        hub = set.intersection(*({a, b} for a, b in handoffs))
        return "centralized" if hub else "swarm"
    return "unknown" if max_depth < 1 else "centralized"


def looks_like_otlp(doc) -> bool:
    """True for an OTLP/JSON traces document."""
    return isinstance(doc, dict) and isinstance(doc.get("resourceSpans"), list)


def import_otlp(doc: dict, content_policy: ContentPolicy = KEEP, one_run: bool = False) -> ImportResult:
    """Orchestration traces from an OTLP/JSON traces document, one per run (traceIds joined by `_join_runs`),
    in order of appearance. `one_run`: the caller knows the traceIds are one run (a live build of the
    traces its run keys tied together, some by traces that carried no GenAI span and were not kept)."""
    if not looks_like_otlp(doc):
        raise ImportFailed("not an OTLP/JSON traces document: expected an object with a resourceSpans array")
    result = ImportResult()
    with paused_gc():
        by_trace = _read_spans(doc["resourceSpans"], result.warnings)
        _import_spans(by_trace, doc.get("resourceLogs"), content_policy, one_run, result)
    return result


def import_read(groups: list[list["_Span"]], content_policy: ContentPolicy = KEEP,
                one_run: bool = False) -> ImportResult:
    """import_otlp of the document holding one resourceSpans entry per group, with one scopeSpans entry of the
    group's spans (a live trace's stored parts), from those spans as a SpanReader read them on receipt: the same
    traces and warnings without writing, parsing and reading them again. The spans must have read without odd
    kinds or repeated attributes, none a coding CLI's (what reading the document would warn about), and be used
    once (a build changes them)."""
    result = ImportResult()
    with paused_gc():
        by_trace: dict[str, list[_Span]] = {}
        for ri, spans in enumerate(groups):
            where = f"resourceSpans[{ri}].scopeSpans[0]"  # as iter_spans names it in the stored document
            for pi, span in enumerate(spans):
                span.where = (where, pi)
                same_trace = by_trace.get(span.trace_id)
                if same_trace is None:
                    by_trace[span.trace_id] = [span]
                else:
                    same_trace.append(span)
        if not by_trace:
            result.warnings.append("the document has no spans")
        _import_spans(by_trace, None, content_policy, one_run, result)
    return result


def prepare(spans: list["_Span"], content_policy: ContentPolicy = KEEP) -> None:
    """Read ahead, while a live run still arrives, what the attributes of its model and tool spans say for their
    events (content, model, token counts; see `_says`), so that its build does not. A span whose attributes are
    at fault is left to the build, which names it in order."""
    keep = keeps(content_policy)
    for span in spans:
        if span.op is INFERENCE or span.op is TOOL or span.op is TOOLISH:
            try:
                span.said = _says(span, keep)
            except ValueError:
                span.said = None


def _says(span: "_Span", keep: bool) -> tuple:
    """What a model or tool span's attributes say for its events, tagged with what it was read under (the policy,
    the attributes' count: otlp_patterns only adds attributes, and only to spans that lack them, the operation)."""
    attrs = span.attrs
    if span.op is INFERENCE:
        model = _text(attrs, "gen_ai.request.model") or _text(attrs, "gen_ai.response.model")
        output = _get(attrs, MESSAGES[OUTPUT])  # GenAI parts, or the tool calls OpenInference flattens
        said = _content({}, keep, output, _exchange(attrs))
        return keep, len(attrs), span.op, model, said, _counts(attrs, USAGE_KEYS), _requested_tool_calls(output)
    return keep, len(attrs), span.op, *_tool_call_says(attrs, keep), *_tool_result_says(attrs, keep)


def _tool_call_says(attrs: dict, keep: bool) -> tuple:
    """(call id, content) of a tool span's call."""
    call_id = _text(attrs, "gen_ai.tool.call.id")
    return call_id, _content({}, keep, _get(attrs, TOOL_IO[INPUT]), _carried(attrs, INPUT, TOOL_IO),
                             keep_ref=not call_id)


def _tool_result_says(attrs: dict, keep: bool) -> tuple:
    """(content, error type) of a tool span's result."""
    return _content({}, keep, _get(attrs, TOOL_IO[OUTPUT]), _carried(attrs, OUTPUT, TOOL_IO)), \
        _text(attrs, "error.type")


def _content(props: dict, keep: bool, hashed, kept=None, *, keep_ref=True) -> dict:
    """An event's content_ref, the hash of `hashed` as the span wrote it (else of `kept`), and, when content is
    kept, its content: `kept` (parsed already), else `hashed` parsed; `props`, so added to."""
    if keep_ref and (hashed is not None or kept is not None):
        props["content_ref"] = ref(hashed if hashed is not None else kept)
    kept = kept if kept is not None else _parsed(hashed)
    if keep and kept is not None:
        put_content(props, kept)
    return props


def _counts(attrs: dict, keys) -> tuple:
    """(tokens in, tokens out, (cache metric, count) of each present) a span reports under `keys`."""
    return (_count(attrs, keys[0]), _count(attrs, keys[1]),
            tuple((metric, _count(attrs, (key,)) or 0) for key, metric in CACHE_METRICS.items() if key in attrs))


def copy_read(groups: list[list["_Span"]]) -> list[list["_Span"]]:
    """Spans a SpanReader read, anew for import_read, which changes them: those given are left as read."""
    return [[span.copy() for span in spans] for spans in groups]


def _import_spans(by_trace: dict[str, list["_Span"]], resource_logs, content_policy: ContentPolicy, one_run: bool,
                  result: ImportResult) -> None:
    """The traces of spans read, by trace in order of appearance, into `result`."""
    _fold_created_agents(by_trace)
    for dropped, kept in otlp_patterns.twins(by_trace, PATTERN_OPS).items():
        del by_trace[dropped]
        result.warnings.append(f"trace {dropped} holds the same model calls as trace {kept} (two "
                               f"instrumentations of one run): only {kept} is imported")
    _join_runs(by_trace, result.warnings, one_run)
    rewards = _log_rewards(resource_logs, result.warnings)
    for trace_id, spans in by_trace.items():
        try:
            trace = _Trace(trace_id, spans, content_policy, result.warnings).build(rewards.get(trace_id, []))
        except ImportFailed:
            raise
        except ValueError as e:  # an attribute read outside the walk, which names the span itself
            raise ImportFailed(f"trace {trace_id}: {e}") from None
        _unlink(spans)
        if trace is not None:
            result.traces.append(trace)


def _unlink(spans: list["_Span"]) -> None:
    """Cut the links a walk made between spans and agents (parent and children, an agent and its tools):
    as cycles they would outlive the import until a garbage collection walked every object it made."""
    for span in spans:
        span.parent = span.children = span.agent = span.caller = span.delegator = span.delegations = \
            span.handoff = span.resumes = span.joined = None


def _fold_created_agents(by_trace: dict[str, list]) -> None:
    """Move traces made only of `create_agent` spans into the trace that runs those agents.

    AutoGen creates its agents before the run, each `create_agent` span the root of a trace of its own;
    they belong to the earliest run, starting after them, of that agent: the same service, and the same
    `gen_ai.agent.id` where both name one (never by name alone across services)."""
    runs = sorted((span.start, span.service, _agent_name(span), _text(span.attrs, "gen_ai.agent.id"), trace_id)
                  for trace_id, spans in by_trace.items() for span in spans
                  if span.op is AGENT and _agent_name(span))
    for trace_id, spans in list(by_trace.items()):
        if not all(span.op is CREATE for span in spans):
            continue
        created = {(span.service, _agent_name(span), _text(span.attrs, "gen_ai.agent.id")) for span in spans}
        start = min(span.start for span in spans)
        target = next((run_trace for run_start, service, name, agent_id, run_trace in runs
                       if run_start >= start and run_trace != trace_id and any(
                           service == c_service and name == c_name and (agent_id is None or c_id is None
                                                                        or agent_id == c_id)
                           for c_service, c_name, c_id in created)), None)
        if target is not None:
            for span in spans:
                span.trace_id = target
            by_trace[target] = by_trace.pop(trace_id) + by_trace[target]


def run_keys(span: "_Span") -> list[tuple[str, str]]:
    """What ties a span to a run across traceIds: the conversation or session its agent or workflow span
    names, and the traces it links to (`("trace", traceId)`)."""
    keys = [("trace", trace) for trace, _ in span.links]
    if span.op is AGENT or span.op is WORKFLOW:
        for key in RUN_KEYS:
            try:
                value = _text(span.attrs, key)
            except ValueError as e:
                raise ImportFailed(f"{span.location()}: {e}") from None
            if value:
                keys.append((key, value))
    return keys


def _join_runs(by_trace: dict[str, list["_Span"]], warnings: list[str], one_run: bool = False) -> None:
    """One run spread over several traceIds (one trace per runtime message joined by span links, one per
    agent turn, sub-agents' runs sharing a conversation id) becomes one trace: traces that a span link, a
    conversation id or a session id ties together are merged into the one that started first. A root of a
    joined trace goes under the span it links to, else under the innermost agent or tool span of the
    others that runs around it (the sub-agent was called from there), else it stays a root."""
    if len(by_trace) < 2:
        return
    leader = {trace: trace for trace in by_trace}

    def find(trace: str) -> str:
        while leader[trace] != trace:
            leader[trace] = leader[leader[trace]]
            trace = leader[trace]
        return trace

    seen: dict[tuple[str, str], str] = {}
    runs = [trace for trace, spans in by_trace.items() if not all(span.op is CREATE for span in spans)]
    for trace in runs[1:] if one_run else ():
        leader[find(trace)] = find(runs[0])
    for trace, spans in by_trace.items():
        for span in spans:
            for key in run_keys(span):
                other = key[1] if key[0] == "trace" else seen.setdefault(key, trace)
                if other in leader and find(other) != find(trace):
                    leader[find(trace)] = find(other)
    groups: dict[str, list[str]] = {}
    for trace in by_trace:
        groups.setdefault(find(trace), []).append(trace)
    for members in groups.values():
        if len(members) < 2:
            continue
        members.sort(key=lambda trace: min(span.start for span in by_trace[trace]))
        spans = [span for trace in members for span in by_trace.pop(trace)]
        _attach_roots(spans)
        by_trace[members[0]] = spans
        warnings.append(f"traces {', '.join(members[1:])} joined to trace {members[0]}: one run over "
                        f"{len(members)} traceIds (span links, or a shared conversation or session id)")


def _attach_roots(spans: list["_Span"]) -> None:
    """Put the roots of each joined trace under the span they link to, else under the innermost agent or
    tool span of another trace that runs around them."""
    by_id = {span.id: span for span in spans}
    hosts = sorted((s for s in spans if s.op is AGENT or s.op is TOOL), key=lambda s: s.end - s.start)
    for span in spans:
        if span.parent_id is not None and span.parent_id in by_id:
            continue
        linked = next((by_id[s] for t, s in span.links if s in by_id and by_id[s].trace_id != span.trace_id), None)
        host = linked or next((h for h in hosts if h.trace_id != span.trace_id and h.start <= span.start
                               and span.end <= h.end), None)
        if host is not None:
            span.parent_id = host.id


def _agent_name(span: "_Span") -> str | None:
    try:
        return _text(span.attrs, "gen_ai.agent.name")
    except ValueError as e:
        raise ImportFailed(f"{span.location()}: {e}") from None


def iter_spans(doc: dict):
    """(location, resourceSpans entry, scopeSpans entry, raw span) of every span of an OTLP document;
    ImportFailed when its structure is not that of an ExportTraceServiceRequest."""
    for ri, rs in enumerate(doc["resourceSpans"]):
        where_rs = f"resourceSpans[{ri}]"
        if not isinstance(rs, dict):
            raise ImportFailed(f"{where_rs}: {show(rs)} is not an object")
        key = "scopeSpans" if "scopeSpans" in rs else "instrumentationLibrarySpans"
        scope_spans = rs.get(key, [])
        if not isinstance(scope_spans, list):
            raise ImportFailed(f"{where_rs}.{key}: {show(scope_spans)} is not an array")
        for si, ss in enumerate(scope_spans):
            where_ss = f"{where_rs}.{key}[{si}]"
            if not isinstance(ss, dict):
                raise ImportFailed(f"{where_ss}: {show(ss)} is not an object")
            spans = ss.get("spans", [])
            if not isinstance(spans, list):
                raise ImportFailed(f"{where_ss}.spans: {show(spans)} is not an array")
            for pi, raw in enumerate(spans):
                yield (where_ss, pi), rs, ss, raw


def without_spans(entry: dict) -> dict:
    """A resourceSpans or scopeSpans entry without the spans below it (its resource or scope alone)."""
    return {k: v for k, v in entry.items() if k not in ("scopeSpans", "instrumentationLibrarySpans", "spans")}


class SpanReader:
    """Reads the spans of one document: each decoded and checked (ids, times, status; ImportFailed names the
    span and the fault), with the service and scope names of its entries. Ids repeat across spans and are
    decoded once; names are found once per entry, which must stay alive while the reader reads."""

    def __init__(self):
        self.odd_kinds: Counter = Counter()
        self.repeated_attributes: Counter = Counter()  # attribute key -> spans that give it more than once
        self._ids: dict[int, dict[str, str]] = {TRACE_ID_BYTES: {}, SPAN_ID_BYTES: {}}  # decoded, by size
        self._names: dict[int, str] = {}  # service name by resourceSpans entry, scope name by scopeSpans entry
        self._cli: dict[int, bool] = {}  # by scopeSpans entry: whether its spans may be a coding CLI's

    def cli_reason(self, rs: dict, ss: dict, raw) -> str | None:
        """cli_telemetry.span_reason of a span. It depends on the span only through a name starting with the CLI
        prefix (and the session it names): an entry for whose resource and scope a span so named has no reason
        holds no CLI span, and its spans are not asked one by one (a fifth of reading a batch)."""
        resource, scope = rs.get("resource"), ss.get("scope") or ss.get("instrumentationLibrary")
        maybe = self._cli.get(id(ss))
        if maybe is None:
            maybe = self._cli[id(ss)] = cli_telemetry.span_reason(
                resource, scope, {"name": cli_telemetry.PREFIX}) is not None
        return cli_telemetry.span_reason(resource, scope, raw) if maybe else None

    def read(self, where: tuple[str, int], rs: dict, ss: dict, raw) -> "_Span":
        service = self._names.get(id(rs))
        if service is None:
            service = self._names[id(rs)] = _service_name(rs.get("resource"), where[0].partition(".")[0])
        scope_name = self._names.get(id(ss))
        if scope_name is None:
            scope = ss.get("scope") or ss.get("instrumentationLibrary") or {}
            scope_name = scope.get("name") if isinstance(scope, dict) else None
            scope_name = self._names[id(ss)] = scope_name if isinstance(scope_name, str) else ""
        span = _read_span(raw, where, self.odd_kinds, self._ids)
        attributes = raw.get("attributes")
        if attributes and len(span.attrs) < len(attributes):  # the spec asks for unique keys; the last one is read
            counts = Counter(a["key"] for a in attributes)
            self.repeated_attributes.update(key for key, n in counts.items() if n > 1)
        span.scope, span.service = scope_name, service
        return span


def only_traces(doc: dict, trace_hexes: set[str]) -> dict:
    """The document keeping only the spans of these traces (ids compared decoded: hex or base64)."""
    out = []
    for resource in doc["resourceSpans"]:
        scopes = []
        for scope in resource.get("scopeSpans") or resource.get("instrumentationLibrarySpans") or []:
            spans = [s for s in scope.get("spans") or [] if _trace_of(s) in trace_hexes]
            if spans:
                scopes.append({**without_spans(scope), "spans": spans})
        if scopes:
            out.append({**without_spans(resource), "scopeSpans": scopes})
    return {"resourceSpans": out}


def _trace_of(span) -> str | None:
    try:
        raw = span.get("traceId")
        # The stored parts of a live trace hold its id as lower-case hex: no decoding.
        return raw if type(raw) is str and len(raw) == 2 * TRACE_ID_BYTES and raw.islower() \
            else _decode_id(raw, TRACE_ID_BYTES, "traceId")
    except (ValueError, AttributeError):
        return None


# What a _Span holds as read (the rest the walk learns), each but the attributes unchanged by an import or changed
# only by replacing it.
_READ_SLOTS = ("where", "trace_id", "id", "parent_id", "name", "kind", "start", "end", "error", "status_message",
               "span_events", "operation", "op", "scope", "service", "links")


class _Span:
    """One decoded span, and what the walk learns about it."""

    __slots__ = ("where", "trace_id", "id", "parent_id", "name", "kind", "start", "end", "attrs", "error",
                 "status_message", "span_events", "operation", "op", "scope", "service", "parent", "children", "agent",
                 "caller", "delegator", "delegations", "tool_name", "call_id", "usage_below", "first", "last",
                 "handoff", "resumes", "handed_off", "resumed_later", "joined", "links", "said")

    def __init__(self, where: tuple[str, int], trace_id: str, span_id: str, parent_id: str | None, name: str,
                 kind: int, start: int, end: int, attrs: dict, error: bool, status_message, span_events: list | tuple,
                 links: tuple = ()):
        self.where, self.trace_id, self.id, self.parent_id, self.name, self.kind = \
            where, trace_id, span_id, parent_id, name, kind
        self.start, self.end, self.attrs, self.error, self.status_message, self.span_events = \
            start, end, attrs, error, status_message, span_events
        self.links = links  # (traceId, spanId) of each span link, decoded
        operation = attrs.get("gen_ai.operation.name")
        if operation is None or OI_KIND in attrs or TRACELOOP_KIND in attrs:
            operation = translate(name, attrs) or name.partition(" ")[0]
        else:
            operation = operation["stringValue"] if type(operation) is dict and "stringValue" in operation \
                else _value(operation)
            if type(operation) is not str:
                operation = str(operation)
        self.operation = operation
        self.op = OPERATIONS.get(operation)
        self.said = None  # what its attributes say for its events, once `prepare` read it
        self._unwalked()

    def _unwalked(self) -> None:
        """What the walk learns, not learnt yet."""
        self.children: list[_Span] = []
        # Empty tuples until set: a span kept from receipt to build (see live.READ_SPANS) holds as few objects as
        # the garbage collector must walk.
        self.delegations: list[_Delegation] | tuple = ()
        self.parent = self.agent = self.caller = self.delegator = self.tool_name = self.call_id = self.first = self.last = None
        self.usage_below = self.handed_off = self.resumed_later = False
        self.handoff = self.resumes = None  # set by otlp_patterns
        self.joined: list[_Span] | tuple = ()  # other runs a fan-in waited for (otlp_patterns)

    def copy(self) -> "_Span":
        """The span as read, before an import changed it (its tree, operation, attributes, ids), for another."""
        span = _Span.__new__(_Span)
        for name in _READ_SLOTS:
            setattr(span, name, getattr(self, name))
        span.attrs = dict(self.attrs)
        span.said = None  # its events get their own content objects
        span._unwalked()
        return span

    def location(self) -> str:
        return f"{self.where[0]}.spans[{self.where[1]}] (spanId {self.id})"


def _read_spans(resource_spans: list, warnings: list[str]) -> dict[str, list[_Span]]:
    """Decode every span (ids, times, status, raw attributes), grouped by trace in order of appearance."""
    by_trace: dict[str, list[_Span]] = {}
    reader = SpanReader()
    claimed: Counter = Counter()
    for where, rs, ss, raw in iter_spans({"resourceSpans": resource_spans}):
        reason = reader.cli_reason(rs, ss, raw)
        if reason:  # a coding CLI's span: its session is built from the CLI's log events
            claimed[reason] += 1
            continue
        span = reader.read(where, rs, ss, raw)
        same_trace = by_trace.get(span.trace_id)
        if same_trace is None:
            by_trace[span.trace_id] = [span]
        else:
            same_trace.append(span)
    for reason, count in claimed.items():
        warnings.append(f"{count} span(s) skipped: {reason}")
    if not by_trace and not claimed:
        warnings.append("the document has no spans")
    for kind, count in reader.odd_kinds.items():
        warnings.append(f"{count} span(s) of unknown kind {kind}: read as INTERNAL")
    for key, count in reader.repeated_attributes.items():
        warnings.append(f"{count} span(s) give the attribute {show(key)} more than once: the last value was read")
    return by_trace


def _read_span(raw, where: tuple[str, int], odd_kinds: Counter, ids: dict[int, dict[str, str]]) -> _Span:
    """One span, checked; attribute values stay encoded until they are needed."""
    if type(raw) is not dict:
        raise ImportFailed(f"{where[0]}.spans[{where[1]}]: {show(raw)} is not an object")
    try:
        span_id = _decode_id(raw.get("spanId"), SPAN_ID_BYTES, "spanId", ids)
    except ValueError as e:
        raise ImportFailed(f"{where[0]}.spans[{where[1]}]: {e}") from None
    try:
        trace_id = _decode_id(raw.get("traceId"), TRACE_ID_BYTES, "traceId", ids)
        parent = raw.get("parentSpanId")
        parent_id = _decode_id(parent, SPAN_ID_BYTES, "parentSpanId", ids) if parent else None
        start, end = raw.get("startTimeUnixNano"), raw.get("endTimeUnixNano")
        # The common cases without a call: decimal strings (OTLP/JSON), integers (as protobuf decodes them).
        if type(start) is not int or start < 0:
            start = int(start) if type(start) is str and start.isdecimal() else _timestamp(start, "startTimeUnixNano")
        if type(end) is not int or end < 0:
            end = int(end) if type(end) is str and end.isdecimal() else _timestamp(end, "endTimeUnixNano")
        if end < start:
            raise ValueError(f"endTimeUnixNano {end} is before startTimeUnixNano {start}")
        name = raw.get("name", "")
        if type(name) is not str:
            raise ValueError(f"name {show(name)} is not a string")
        kind = raw.get("kind", 0)
        if type(kind) is not int or not 0 <= kind <= MAX_SPAN_KIND:
            kind = SPAN_KINDS.get(kind) if type(kind) is str else None
            if kind is None:
                odd_kinds[show(raw.get("kind"))] += 1
                kind = INTERNAL
        status = raw.get("status")
        error, status_message = _status(status) if status else (False, None)
        span_events = raw.get("events")
        if not span_events:
            span_events = ()
        elif type(span_events) is not list:
            raise ValueError(f"events {show(span_events)} is not an array")
        links = raw.get("links")
        return _Span(where, trace_id, span_id, parent_id, name, kind, start, end, _attributes(raw.get("attributes")),
                     error, status_message, span_events, _links(links, ids) if links else ())
    except ValueError as e:
        raise ImportFailed(f"{where[0]}.spans[{where[1]}] (spanId {span_id}): {e}") from None


def _links(raw, ids: dict[int, dict[str, str]]) -> tuple:
    if type(raw) is not list:
        raise ValueError(f"links {show(raw)} is not an array")
    links = []
    for i, link in enumerate(raw):
        if type(link) is not dict:
            raise ValueError(f"links[{i}] {show(link)} is not an object")
        links.append((_decode_id(link.get("traceId"), TRACE_ID_BYTES, f"links[{i}].traceId", ids),
                      _decode_id(link.get("spanId"), SPAN_ID_BYTES, f"links[{i}].spanId", ids)))
    return tuple(links)


def _status(status) -> tuple[bool, str | None]:
    """(is an error, message) of a span status."""
    if type(status) is not dict:
        raise ValueError(f"status {show(status)} is not an object")
    code = status.get("code", 0)
    code = STATUS_CODES.get(code, code) if type(code) is str else code
    return code == STATUS_ERROR, status.get("message") or None


def _attributes(raw) -> dict:
    """key -> encoded AnyValue; decoding waits until a value is read."""
    if raw is None:
        return {}
    try:
        return {a["key"]: a.get("value") for a in raw}
    except (TypeError, KeyError, AttributeError):
        raise ValueError("attributes must be an array of {key, value} objects") from None


def _service_name(resource, where: str) -> str:
    if resource is None:
        return UNKNOWN_SERVICE
    if not isinstance(resource, dict):
        raise ImportFailed(f"{where}.resource: {show(resource)} is not an object")
    try:
        name = _get(_attributes(resource.get("attributes")), "service.name")
    except ValueError as e:
        raise ImportFailed(f"{where}.resource: {e}") from None
    return name if isinstance(name, str) and name else UNKNOWN_SERVICE


def _decode_id(raw, size: int, field: str, ids: dict[int, dict[str, str]] | None = None) -> str:
    """Lower-case hex of an id sent as hex (OTLP/JSON) or base64 (plain protobuf JSON); `ids` remembers
    ids already decoded, by size, since trace and parent ids repeat across spans."""
    seen = ids[size] if ids is not None else {}
    if type(raw) is str:
        known = seen.get(raw)
        if known is not None:
            return known
    if not isinstance(raw, str) or not raw:
        raise ValueError(f"{field} {show(raw)} is missing or not a string")
    if len(raw) == 2 * size and _HEX[size].fullmatch(raw):
        known = raw.lower()
    else:
        try:
            known = base64.b64decode(raw, validate=True).hex()
        except (binascii.Error, ValueError):
            known = ""
        if len(known) != 2 * size:
            raise ValueError(f"{field} {show(raw)} is neither {2 * size} hex digits nor base64 of {size} bytes")
    seen[raw] = known
    return known


def _timestamp(value, field: str) -> int:
    if value is None:
        raise ValueError(f"missing {field}")
    try:
        ns = _integer(value)
    except ValueError:
        raise ValueError(f"{field} {show(value)} is not a number") from None
    if ns < 0:
        raise ValueError(f"{field} {ns} is below 0")
    return ns


def _integer(value) -> int:
    """A 64-bit integer sent as a decimal string (OTLP/JSON) or as a number; ValueError otherwise."""
    kind = type(value)
    if kind is str:
        return int(value)
    if kind is int:
        return value
    if kind is float and value.is_integer():
        return int(value)
    raise ValueError(show(value))


def _value(v):
    """The Python value of an encoded AnyValue; ValueError when a number is malformed."""
    if not isinstance(v, dict):
        raise ValueError(f"{show(v)} is not an AnyValue object")
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        try:
            return _integer(v["intValue"])
        except ValueError:
            raise ValueError(f"intValue {show(v['intValue'])} is not an integer") from None
    if "doubleValue" in v:
        number = v["doubleValue"]
        if isinstance(number, str):  # "NaN", "Infinity", "-Infinity", or a number in a string
            try:
                return float(number)
            except ValueError:
                raise ValueError(f"doubleValue {show(number)} is not a number") from None
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            raise ValueError(f"doubleValue {show(number)} is not a number")
        return number
    if "boolValue" in v:
        return v["boolValue"]
    if "arrayValue" in v:
        return [_value(item) for item in _values(v["arrayValue"], "arrayValue")]
    if "kvlistValue" in v:
        pairs = _values(v["kvlistValue"], "kvlistValue")
        if not all(isinstance(kv, dict) and isinstance(kv.get("key"), str) for kv in pairs):
            raise ValueError(f"kvlistValue {show(v['kvlistValue'])} holds an entry without a string key")
        return {kv["key"]: _value(kv.get("value", {})) for kv in pairs}
    if "bytesValue" in v:
        return v["bytesValue"]  # base64 text, kept as sent
    return None


def _values(container, field: str) -> list:
    """The `values` of an arrayValue or kvlistValue (null is empty, as protobuf's JSON mapping reads it)."""
    if container is None:
        return []
    if not isinstance(container, dict):
        raise ValueError(f"{field} {show(container)} is not an object")
    values = container.get("values")
    if values is None:
        return []
    if not isinstance(values, list):
        raise ValueError(f"{field}.values {show(values)} is not an array")
    return values


def _get(attrs: dict, key: str):
    """The decoded value of an attribute, None when absent; ValueError names the attribute."""
    v = attrs.get(key)
    if v is None:
        return None
    if type(v) is dict and "stringValue" in v:  # the common case, without a call
        return v["stringValue"]
    try:
        return _value(v)
    except ValueError as e:
        raise ValueError(f"attribute {key}: {e}") from None


def _text(attrs: dict, key: str) -> str | None:
    value = _get(attrs, key)
    return None if value is None or value == "" else value if isinstance(value, str) else str(value)


def _count(attrs: dict, keys: tuple[str, ...]) -> int | None:
    """A token count from the first present key; ValueError unless a non-negative number."""
    for key in keys:
        encoded = attrs.get(key)
        if encoded is None:
            continue
        number = encoded.get("intValue") if type(encoded) is dict else None
        if type(number) is str and number.isdecimal():  # the common case, without a call
            return int(number)
        if type(number) is int and number >= 0 and "stringValue" not in encoded:  # as protobuf decodes it
            return number
        value = _get(attrs, key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or value == math.inf:
            raise ValueError(f"attribute {key}: {show(value)} is not a token count")
        return int(value)
    return None


def _parsed(value):
    """A structured attribute parsed from its JSON string; left as is when it is not JSON."""
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def _carried(attrs: dict, side: str, genai: dict):
    """What a span carried as its input or output (`side`), in the first convention that has it: OpenInference's
    flattened messages (`llm.<side>_messages.*`), the GenAI attribute (`genai[side]`: messages, or a tool's
    arguments and result; OpenInference's `<side>.value` arrives there too), OpenInference's `<side>.value`,
    OpenLLMetry's numbered `gen_ai.prompt.<i>.*` / `gen_ai.completion.<i>.*` and `traceloop.entity.<side>`,
    LangSmith's `gen_ai.prompt` / `gen_ai.completion`. Parsed from JSON where it is JSON; None when none has it."""
    if OI_KIND in attrs:
        messages = _flattened(attrs, f"llm.{side}_messages.")
        if messages is not None:
            return messages
    for key in (genai[side], f"{side}.value"):
        value = _get(attrs, key)
        if value is not None:
            return _parsed(value)
    numbered = _flattened(attrs, NUMBERED[side])
    if numbered is not None:
        return numbered
    for key in (f"traceloop.entity.{side}", LANGSMITH[side]):
        value = _get(attrs, key)
        if value is not None:
            return _parsed(value)
    return None


@cache
def _first_keys(prefix: str) -> tuple[str, ...]:
    """The keys one of which a first message flattened under `prefix` has."""
    return tuple(f"{prefix}0.{field}" for field in FIRST_FLATTENED)


def _flattened(attrs: dict, prefix: str):
    """The messages a convention flattens into attributes under `prefix` (the first one has a role or a content),
    regrouped; None without any."""
    for key in _first_keys(prefix):
        if key in attrs:
            break
    else:
        return None
    pairs = {key[len(prefix):]: _get(attrs, key) for key in attrs if type(key) is str and key.startswith(prefix)}
    return unflatten(pairs)


def _exchange(attrs: dict) -> dict | None:
    """A model call's content: `{"system", "input", "output"}`, each as the span carried it (when it did)."""
    exchange = {side: value for side, value in (
        ("system", _parsed(_get(attrs, "gen_ai.system_instructions"))),
        (INPUT, _carried(attrs, INPUT, MESSAGES)),
        (OUTPUT, _carried(attrs, OUTPUT, MESSAGES))) if value is not None}
    return exchange or None


def _run_input(attrs: dict):
    """An agent run's input: as its span carried it, else (pydantic-ai, which writes none) the messages of
    `pydantic_ai.all_messages` before the first model response."""
    carried = _carried(attrs, INPUT, MESSAGES)
    if carried is not None:
        return carried
    history = _parsed(_get(attrs, "pydantic_ai.all_messages"))
    if not isinstance(history, list):
        return None
    first = next((i for i, message in enumerate(history)
                  if isinstance(message, dict) and message.get("role") == "assistant"), len(history))
    return history[:first] or None


def _requested_tool_calls(output) -> list[str] | None:
    """Ids of the tool calls a model output asks for; None when the output is not known."""
    if output is None:
        return None
    if isinstance(output, str):
        if '"tool_call"' not in output:  # most outputs are plain text: skip parsing them
            return []
        output = _parsed(output)
    ids = []
    for message in output if isinstance(output, list) else ():
        for part in message.get("parts", ()) if isinstance(message, dict) else ():
            if isinstance(part, dict) and part.get("type") == "tool_call":
                ids.append(part.get("id"))
    return ids


def _made_span(model: _Span, span_id: str, operation: str, attrs: dict) -> _Span:
    """A span a framework implies but does not emit (e.g. a CrewAI coworker's run), over `model`'s time."""
    span = _Span(model.where, model.trace_id, span_id, model.id, model.name, model.kind, model.start, model.end,
                 attrs, False, None, [])
    span.operation, span.op = operation, OPERATIONS.get(operation)
    span.scope, span.service = model.scope, model.service
    return span


class _PatternOps:
    """The operation names and span factory otlp_patterns works with."""

    AGENT, INFERENCE, TOOL, TOOLISH, STRUCTURE, WORKFLOW = AGENT, INFERENCE, TOOL, TOOLISH, STRUCTURE, WORKFLOW
    make_span = staticmethod(_made_span)


PATTERN_OPS = _PatternOps()


class _Agent:
    """One agent instance and what its events need to be linked."""

    __slots__ = ("key", "role", "depth", "spawns", "calls", "tools", "nested_returns", "real")

    def __init__(self, key: str, role: str, depth: int, real: bool):
        self.key, self.role, self.depth, self.real = key, role, depth, real
        self.spawns = False
        self.calls: list[list] = []  # [start, end, event index, requested call ids or None, asks for tools]
        self.tools: list[_Span] = []
        self.nested_returns: list[tuple[int, int]] = []  # (time, return event) of sub-agents not run by a tool


class _Trace:
    """Maps the spans of one traceId onto one orchestration trace."""

    def __init__(self, trace_id: str, spans: list[_Span], content_policy: ContentPolicy, warnings: list[str]):
        self.trace_id = trace_id
        self.spans = spans
        self.keep = keeps(content_policy)
        self.warnings = warnings
        self.b = TraceBuilder()
        self.used_keys: set[str] = set()
        self.agents: list[_Agent] = []
        self.services: dict[str, _Agent] = {}
        self.tokens = 0
        self.llm_calls = 0
        self.tool_calls = 0
        self.metrics: Counter = Counter()
        self.rewards: list[tuple[int, str, float]] = []
        self.workflow: str | None = None
        self.root_agent_span: _Span | None = None
        self.created: dict[str, str] = {}  # agent name -> instance key of a create_agent not yet run
        self.handoffs: list[tuple[str, str]] = []  # (from, to) of each handoff, for the topology

    def build(self, log_rewards: list[tuple[int, str, float]]) -> dict | None:
        roots = self._tree()
        otlp_patterns.apply(self.spans, roots, PATTERN_OPS)
        for root in roots:
            self._walk(root)
        holding = self._holding()
        skipped = Counter(span.operation for span in self.spans if span.op is None and id(span) not in holding)
        for operation, count in skipped.items():
            self.warnings.append(f"trace {self.trace_id}: {count} span(s) with unknown operation "
                                 f"{show(operation)} skipped: no agent, model or tool span below them")
        steps = Counter(span.name for span in self.spans if span.op is STRUCTURE and span.operation != "handoff"
                        and id(span) not in holding)
        for name, count in steps.items():
            self.warnings.append(f"trace {self.trace_id}: {count} step span(s) {show(name)} skipped: no agent, "
                                 "model or tool span below them")
        if not self.b.times:
            self.warnings.append(f"trace {self.trace_id}: {NO_AGENT_SPAN}, skipped")
            return None
        self._link_agents()
        if not self.tokens and not self.llm_calls:
            self.tokens = otlp_patterns.reported_tokens(self.spans) or 0
        root = min(roots, key=lambda span: span.start)
        origin = min(span.start for span in self.spans)
        events, edges = self.b.finish(origin, NS_PER_S)
        return {
            "trace_id": TRACE_ID_PREFIX + self.trace_id,
            "task_id": self._task_id(root),
            "system": self._system(root),
            "topology": topology(max((agent.depth for agent in self.agents), default=0), self.handoffs),
            "events": events,
            "edges": edges,
            "rewards": self._rewards(log_rewards),
            "costs": {
                "tokens": self.tokens,
                "wall_clock_s": (max(span.end for span in self.spans) - origin) / NS_PER_S,
                "tool_calls": self.tool_calls,
                "messages": self.llm_calls,
            },
            "metrics": dict(self.metrics),
        }

    def _holding(self) -> set[int]:
        """The spans (ids of the objects) with an agent, model or tool span below them: spans of unknown
        operation among them (executors, swarm nodes, event loop cycles) give the run its structure."""
        holding: set[int] = set()
        for span in self.spans:
            if span.op is not None and span.op is not STRUCTURE:
                parent = span.parent
                while parent is not None and id(parent) not in holding:
                    holding.add(id(parent))
                    parent = parent.parent
        return holding

    def _tree(self) -> list[_Span]:
        """Children under parents, duplicates dropped; the roots, in document order."""
        by_id: dict[str, _Span] = {}
        for span in self.spans:
            if span.id in by_id:
                self.warnings.append(f"{span.location()}: duplicate spanId in trace {self.trace_id}, skipped")
                continue
            by_id[span.id] = span
        self.spans = list(by_id.values())
        return span_tree(self.spans, self.trace_id, self.warnings, "parentSpanId")

    def _walk(self, root: _Span) -> None:
        """Start-side events before the children, end-side events after them (ties keep that order)."""
        stack: list[tuple[_Span, _Span | None, bool]] = [(root, None, False)]
        while stack:
            span, parent, leaving = stack.pop()
            try:
                if not leaving:
                    self._enter(span, parent)
                    if span.children:  # leave after them; a leaf (most spans) leaves at once
                        stack.append((span, parent, True))
                        stack.extend([(child, span, False) for child in reversed(span.children)])
                        continue
                self._leave(span, parent)
            except ValueError as e:
                raise ImportFailed(f"{span.location()}: {e}") from None

    def _service(self, span: _Span) -> _Agent:
        """The agent of spans outside any invoke_agent span: the service that emitted them."""
        agent = self.services.get(span.service)
        if agent is None:
            agent = self.services[span.service] = _Agent(span.service, span.service, 0, False)
            self.agents.append(agent)
        return agent

    def _tag(self, props: dict, span: _Span) -> dict:
        """props with the source identifiers of the span added."""
        props["span_id"] = span.id
        if span.parent_id:
            props["parent_span_id"] = span.parent_id
        props["trace_id"] = span.trace_id  # the span's own traceId: a run joined from several keeps each
        props["operation"] = span.operation
        return props

    def _content(self, props: dict, hashed, kept=None, *, keep_ref=True) -> None:
        """An event's content_ref, the hash of `hashed` as the span wrote it (else of `kept`), and, unless the
        policy is hash, its content: `kept` (parsed already), else `hashed` parsed."""
        _content(props, self.keep, hashed, kept, keep_ref=keep_ref)

    def _said(self, span: _Span) -> tuple | None:
        """`_says` of a model or tool span as `prepare` read it, when that still holds."""
        said = span.said
        if said is not None and said[0] == self.keep and said[1] == len(span.attrs) and said[2] is span.op:
            return said
        return None

    def _enter(self, span: _Span, parent: _Span | None) -> None:
        if parent is None:
            span.agent = self._service(span)
        else:
            span.agent = parent.agent
            span.delegator = parent if parent.op is TOOL else \
                parent.delegator if parent.op is None or parent.op is STRUCTURE else None
        op = span.op
        if op is AGENT:
            self._enter_agent(span)
        elif op is TOOL or op is TOOLISH:
            self._enter_tool(span)
        elif op is CREATE:
            self._create_agent(span)
        elif op is WORKFLOW:
            if self.workflow is None:
                self.workflow = _text(span.attrs, "gen_ai.workflow.name") or span.name.partition(" ")[2] or None
        elif op is REWARD:
            self._annotation_rewards(span)
        for event in span.span_events:
            self._span_event_reward(span, event)

    def _leave(self, span: _Span, parent: _Span | None) -> None:
        op = span.op
        if op is AGENT:
            self._leave_agent(span)
        elif op is INFERENCE:
            self._model_call(span)
        elif op is TOOL or op is TOOLISH:
            self._leave_tool(span)
        elif op is PLAN:
            self._plan(span)
        if parent is not None and (span.usage_below or op is INFERENCE):
            parent.usage_below = True

    def _usage(self, span: _Span, props: dict, keys=USAGE_KEYS, counts: tuple | None = None) -> None:
        tokens_in, tokens_out, metrics = counts or _counts(span.attrs, keys)
        if tokens_in is not None:
            props["tokens_in"] = tokens_in
            self.tokens += tokens_in
        if tokens_out is not None:
            props["tokens_out"] = tokens_out
            self.tokens += tokens_out
        for metric, count in metrics:
            self.metrics[metric] += count

    def _own_usage(self, span: _Span, props: dict, keys) -> None:
        """Usage on a wrapper span counts only when no model call below it does (no double count)."""
        if span.usage_below:
            return
        self._usage(span, props, keys)
        if "tokens_in" in props or "tokens_out" in props:
            span.usage_below = True  # so the wrappers above this one do not count it again

    def _enter_agent(self, span: _Span) -> None:
        """The run's start: a spawn (or the user's message) the first time its instance runs, a message from
        whoever passed control when a later run resumes it (never a second spawn)."""
        parent = span.agent if span.agent.real else None
        if span.handoff is not None:  # a handoff's target takes the place of the agent that handed off
            source = span.handoff[0]
            sender, caller, depth = source.agent, source.caller, source.agent.depth
        else:  # nested in an agent's run (or its tool): a delegate, which comes back
            sender, caller, depth = parent, parent, parent.depth + 1 if parent else 0
        if span.resumes is not None:  # a later run of an instance already started: its lane goes on
            span.agent, span.caller = span.resumes.agent, caller
            if sender is not None and sender is not span.agent:
                props = self._tag({"role": sender.role, "from": sender.key, "to": span.agent.key, "resumed": True},
                                  span)
                self._content(props, _get(span.attrs, MESSAGES[INPUT]), _run_input(span.attrs))
                span.first = self._pass(span, sender, "message", props)
            return
        attrs = span.attrs
        name = otlp_patterns.run_name(span)
        key, instance_id = self.created.pop(name, None), span.id  # an agent created earlier now runs
        for candidate in () if key else (_text(attrs, "gen_ai.agent.id"), _text(attrs, "gen_ai.agent.call.id")):
            if candidate and f"{name}#{candidate}" not in self.used_keys:
                key, instance_id = f"{name}#{candidate}", candidate
                break
        if key is None:
            key = f"{name}#{span.id}"
        self.used_keys.add(key)
        agent = _Agent(key, name, depth, True)
        self.agents.append(agent)
        span.agent = agent
        span.caller = caller  # None for a root run
        props = self._tag({}, span)
        if instance_id != span.id:
            props["agent_id"] = instance_id
        conversation = _text(attrs, "gen_ai.conversation.id")
        if conversation:
            props["conversation_id"] = conversation
        if span.kind == CLIENT:
            props["remote"] = True
        self._content(props, _get(attrs, MESSAGES[INPUT]), _run_input(attrs))
        if sender is None:
            if self.root_agent_span is None:
                self.root_agent_span = span
            start = self.b.add(span.start, "message", USER, {"role": USER, "from": USER, "to": key, **props})
            self.b.link_to_first(start, key, "message")
        else:
            sender.spawns = True
            start = self._pass(span, sender, "spawn", {"role": name, "to": key, **props})
        span.first = start

    def _pass(self, span: _Span, sender: _Agent, type_: str, props: dict) -> int:
        """Control passing from `sender` to the run `span`: a spawn, or a message to an instance that ran
        before; linked to the run's next event, from the transfer that asked for it (a handoff) or the tool
        that delegated, and from the other runs a fan-in waited for."""
        handoff = span.handoff
        said = handoff[1] if handoff is not None else None  # the span that asked for it: a tool, handoff, model call
        if handoff is not None:
            props["handoff"] = True
            self.handoffs.append((sender.key, props["to"]))
            if said is not None:
                props["transfer_span_id"] = said.id
        index = self.b.add(span.start, type_, sender.key, props)
        self.b.link_to_next(index, props["to"], type_)
        if handoff is not None:
            if said is not None:
                origin = said.first if said.first is not None else said.last
                if origin is not None:
                    self.b.link(origin, index, "causal")
            for other in span.joined:
                if other.last is not None:
                    self.b.link_to_next(other.last, props["to"], "message")
        elif span.delegator is not None:
            self.b.link(span.delegator.first, index, "causal")
            if not span.delegator.delegations:
                span.delegator.delegations = []
            span.delegator.delegations.append(_Delegation(span))  # counted when the tool ends
        return index

    def _leave_agent(self, span: _Span) -> None:
        """The run's end: a return to whoever waits for it (every run of a delegate), a despawn when it handed
        control on and does not run again; nothing when its instance goes on in a later run."""
        agent, caller = span.agent, span.caller
        if span.resumed_later and (span.handed_off or caller is None):
            return
        if span.handed_off:  # it handed control to another agent and is done: no answer of its own
            props = self._tag({"role": agent.role, "from": agent.key, "handoff": True}, span)
        else:
            props = self._tag({"role": agent.role, "from": agent.key, "to": caller.key if caller else USER}, span)
        output = _get(span.attrs, MESSAGES[OUTPUT])
        self._content(props, output if output is not None else _get(span.attrs, "final_result"),
                      _carried(span.attrs, OUTPUT, MESSAGES))
        if span.error:
            props["error"] = True
            if span.status_message:
                props["error_message"] = span.status_message
        self._own_usage(span, props, AGENT_USAGE_KEYS)
        end = self.b.add(span.end, "despawn" if span.handed_off else "return", agent.key, props)
        span.last = end
        if caller is not None and not span.handed_off:
            if span.delegator is not None and span.handoff is None:
                for delegation in span.delegator.delegations:
                    if delegation.span is span:
                        delegation.returned = end
            else:
                caller.nested_returns.append((span.end, end))

    def _model_call(self, span: _Span) -> None:
        agent = span.agent
        *_, model, said, counts, requested = self._said(span) or _says(span, self.keep)
        props = {"role": agent.role, "from": agent.key}
        if model:
            props["to"] = model
        props.update(said)
        self._tag(props, span)
        if model:
            props["model"] = model
        self._usage(span, props, counts=counts)
        if span.error:
            props["error"] = True
        self.llm_calls += 1
        index = self.b.add(span.end, "message", agent.key, props)
        span.last = index
        agent.calls.append([span.start, span.end, index, requested, False])

    def _enter_tool(self, span: _Span) -> None:
        agent, attrs = span.agent, span.attrs
        tool = (_text(attrs, "gen_ai.tool.name") or span.name.partition(" ")[2] or span.operation) \
            if span.op is TOOL else span.operation
        said = self._said(span)
        call_id, said = said[3:5] if said else _tool_call_says(attrs, self.keep)
        props = {"role": agent.role, "tool": tool}
        if call_id:
            props["content_ref"] = call_id
        props.update(said)
        self._tag(props, span)
        if call_id:
            props["tool_call_id"] = call_id
        if span.op is TOOLISH:
            model = _text(attrs, "gen_ai.request.model")
            if model:
                props["model"] = model
            source = _text(attrs, "gen_ai.data_source.id")
            if source:
                props["data_source"] = source
            self._usage(span, props)
            span.usage_below = "tokens_in" in props or "tokens_out" in props
        self.tool_calls += 1
        span.first = self.b.add(span.start, "tool_call", agent.key, props)
        span.tool_name, span.call_id = tool, call_id
        agent.tools.append(span)

    def _leave_tool(self, span: _Span) -> None:
        tool = span.tool_name
        said = self._said(span)
        said, error_type = said[5:] if said else _tool_result_says(span.attrs, self.keep)
        props = {"tool": tool, **said}
        self._tag(props, span)
        if span.error or error_type:
            props["error"] = True
            if error_type:
                props["error_type"] = error_type
        span.last = self.b.add(span.end, "tool_result", tool, props)
        self.b.link(span.first, span.last, "tool_dependency")

    def _plan(self, span: _Span) -> None:
        agent = span.agent
        props = self._tag({"role": agent.role}, span)
        self._content(props, _get(span.attrs, MESSAGES[OUTPUT]), _carried(span.attrs, OUTPUT, MESSAGES))
        self._own_usage(span, props, USAGE_KEYS)
        span.last = self.b.add(span.end, "orchestrator_decision", agent.key, props)

    def _create_agent(self, span: _Span) -> None:
        attrs = span.attrs
        name = _text(attrs, "gen_ai.agent.name") or span.name.partition(" ")[2] or "agent"
        agent_id = _text(attrs, "gen_ai.agent.id")
        creator = span.agent if span.agent.real else None
        key = f"{name}#{agent_id or span.id}"
        self.used_keys.add(key)
        self.created[name] = key  # its first run is this instance
        depth = creator.depth + 1 if creator else 1
        self.agents.append(_Agent(key, name, depth, True))
        props = self._tag({"role": name, "to": key}, span)
        if agent_id:
            props["agent_id"] = agent_id
        if creator:
            creator.spawns = True
        span.first = self.b.add(span.start, "spawn", creator.key if creator else SYSTEM, props)
        self.b.link_to_first(span.first, key, "spawn")

    def _link_agents(self) -> None:
        """Model output -> tool_call, tool_result -> next model call, returns; then decide event types."""
        b = self.b
        for agent in self.agents:
            calls = sorted(agent.calls, key=lambda call: call[1])
            ends = [call[1] for call in calls]
            by_start = sorted(agent.calls, key=lambda call: call[0])
            starts = [call[0] for call in by_start]
            requested: dict[str, list] = {}
            for call in calls:
                for call_id in call[3] or ():
                    requested.setdefault(call_id, []).append(call)
            for time, returned in agent.nested_returns:
                following = bisect_left(starts, time)
                if following < len(by_start):
                    b.link(returned, by_start[following][2], "return")
            for tool in agent.tools:
                call_id = tool.call_id
                source = None
                for call in reversed(requested.get(call_id, ())) if call_id else ():
                    if call[1] <= tool.start:
                        source = call
                        break
                if source is None:
                    before = bisect_right(ends, tool.start)
                    source = calls[before - 1] if before else None
                if source is not None:
                    source[4] = True
                    b.link(source[2], tool.first, "causal")
                end = self._tool_end(tool, agent)
                following = bisect_left(starts, tool.end)
                if following < len(by_start):
                    b.link(end, by_start[following][2], "causal")
            if agent.spawns:
                for call in calls:
                    if call[4] or call[3]:
                        b.types[call[2]] = "orchestrator_decision"

    def _tool_end(self, tool: _Span, agent: _Agent) -> int:
        """A tool that delegated to two or more sub-agents ends in an aggregate of their returns."""
        delegations = tool.delegations
        end = tool.last
        if len(delegations) >= 2:
            self.b.types[end], self.b.agents[end] = "aggregate", agent.key
            self.b.props[end] = {"role": agent.role, **self.b.props[end], "inputs": len(delegations)}
            for delegation in delegations:
                if delegation.returned is not None:
                    self.b.link(delegation.returned, end, "aggregate")
        else:
            for delegation in delegations:
                if delegation.returned is not None:
                    self.b.link(delegation.returned, end, "return")
        return end

    def _span_event_reward(self, span: _Span, event) -> None:
        if not isinstance(event, dict) or event.get("name") != EVALUATION_EVENT:
            return
        attrs = _attributes(event.get("attributes"))
        reward = _evaluation(attrs)
        if reward is not None:
            time = event.get("timeUnixNano")
            self.rewards.append((_integer(time) if time is not None else span.end, *reward))

    def _annotation_rewards(self, span: _Span) -> None:
        i = 0
        while (value := _get(span.attrs, REWARD_ATTR.format(i, "value"))) is not None:
            name = _text(span.attrs, REWARD_ATTR.format(i, "name")) or ("primary" if i == 0 else f"reward_{i}")
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                self.rewards.append((span.end, name, value))
            i += 1

    def _rewards(self, log_rewards: list[tuple[int, str, float]]) -> dict:
        rewards: dict[str, float] = {}
        for _, name, value in sorted(self.rewards + log_rewards, key=lambda reward: reward[0]):
            if name in rewards:
                self.warnings.append(f"trace {self.trace_id}: reward {show(name)} given more than once; "
                                     "the latest value is kept")
            rewards[name] = value
        return rewards

    def _task_id(self, root: _Span) -> str:
        for span in (root, self.root_agent_span):
            if span is not None:
                conversation = _text(span.attrs, "gen_ai.conversation.id")
                if conversation:
                    return conversation
        return self.workflow or self.trace_id

    def _system(self, root: _Span) -> str:
        """The framework: the scope of the root agent (or root) span, named without an instrumentation
        package's prefix (`openinference.instrumentation.crewai` is crewai)."""
        for span in (self.root_agent_span, root):
            if span is not None and span.scope:
                return INSTRUMENTATION_PREFIX.sub("", span.scope) or span.scope
        return root.service


class _Delegation:
    """A sub-agent run an execute_tool span started, and its return once known."""

    __slots__ = ("span", "returned")

    def __init__(self, span: _Span):
        self.span = span
        self.returned: int | None = None


def _evaluation(attrs: dict) -> tuple[str, float] | None:
    name = _text(attrs, "gen_ai.evaluation.name")
    score = _get(attrs, "gen_ai.evaluation.score.value")
    if name and isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score):
        return name, score
    return None


def _log_rewards(resource_logs, warnings: list[str]) -> dict[str, list[tuple[int, str, float]]]:
    """gen_ai.evaluation.result log records, by trace id, when the document also carries OTLP logs."""
    rewards: dict[str, list] = {}
    if not isinstance(resource_logs, list):
        return rewards
    unplaced = 0
    for ri, rl in enumerate(resource_logs):
        for si, sl in enumerate(rl.get("scopeLogs", ()) if isinstance(rl, dict) else ()):
            for li, record in enumerate(sl.get("logRecords", ()) if isinstance(sl, dict) else ()):
                if not isinstance(record, dict):
                    continue
                where = f"resourceLogs[{ri}].scopeLogs[{si}].logRecords[{li}]"
                try:
                    attrs = _attributes(record.get("attributes"))
                    if (record.get("eventName") or _get(attrs, "event.name")) != EVALUATION_EVENT:
                        continue
                    reward = _evaluation(attrs)
                    if reward is None:
                        continue
                    if not record.get("traceId"):
                        unplaced += 1
                        continue
                    trace_id = _decode_id(record["traceId"], TRACE_ID_BYTES, "traceId")
                    time = _integer(record.get("timeUnixNano") or record.get("observedTimeUnixNano") or 0)
                except ValueError as e:
                    raise ImportFailed(f"{where}: {e}") from None
                rewards.setdefault(trace_id, []).append((time, *reward))
    if unplaced:
        warnings.append(f"{unplaced} evaluation log record(s) without a traceId skipped")
    return rewards


def _convert(batch: Batch, content_policy: ContentPolicy) -> ImportResult:
    """Each document of the upload: one OTLP/JSON traces document, or JSON Lines of them (merged)."""
    result = ImportResult()
    for upload, records in batch.documents:
        odd = next((i for i, r in enumerate(records, 1) if not looks_like_otlp(r)), None)
        if len(records) > 1 and odd is not None:
            raise ImportFailed(f"{upload.source}: record {odd} of its JSON Lines is not an OTLP/JSON traces "
                               "document (an object with a resourceSpans array)")
        doc = records[0] if len(records) == 1 else {"resourceSpans": [rs for r in records for rs in r["resourceSpans"]]}
        batch.merge(result, import_otlp(doc, content_policy), upload.source)
    return result


FORMAT = Format("otlp", "OpenTelemetry GenAI spans as OTLP/JSON (the GenAI, OpenInference, OpenLLMetry and LangSmith "
                        "conventions)", lambda records: len(records) == 1 and looks_like_otlp(records[0]), _convert, 10)
