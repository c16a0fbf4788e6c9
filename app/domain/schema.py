"""The JSON Schema (draft 2020-12) of an orchestration trace, built from the format's facts in taxonomy.py.

It says everything about a trace that JSON Schema can say. The rules it cannot (unique event ids, edge
endpoints that are event ids, ...) are enforced by app.domain.validation and named in the description.
"""

from app.domain.taxonomy import (
    CREDIT_UNITS,
    EDGE_KEYS,
    EDGE_TYPES,
    EVENT_BOOLEAN_KEYS,
    EVENT_REQUIRED_KEYS,
    EVENT_STRING_KEYS,
    EVENT_TYPES,
    REQUIRED_COSTS,
    REWARD_FAMILIES,
    TOPOLOGIES,
    TRACE_KEYS,
    TRACE_REQUIRED_KEYS,
)
from app.domain.validation import MAX_DEPTH

SCHEMA_ID = "urn:orchestrace:schema:trace:1"
DRAFT = "https://json-schema.org/draft/2020-12/schema"

# The rules beyond JSON Schema, as app.domain.validation enforces them.
BEYOND_SCHEMA = (
    "event ids are unique within the trace",
    "every edge's src and dst is the id of an event of the same trace",
    "integers in events' `t` and in `costs` are below 2**63",
    f"an extra event property nests at most {MAX_DEPTH} levels of objects and arrays",
    "no string or key holds a lone surrogate (an unpaired \\ud800-\\udfff escape)",
    "no object gives the same key twice",
    "every number fits a double (1e400 does not)",
)

TRACE_DESCRIPTIONS = {
    "trace_id": "Identity of the trace: one run of a multi-agent system.",
    "task_id": "The task the team worked on; runs of one task share it.",
    "system": "The producing system, e.g. a model, framework or product name.",
    "topology": "How the team is organised.",
    "events": "The vertices of the temporal event graph, in any order (t orders them in time).",
    "edges": "Typed relations between events of this trace.",
    "rewards": ("Reward channels (name -> number), keyed by credit layer or reward family, e.g. team, "
                "orchestration, tool, process. The families: "
                + "; ".join(f"{rid} {name} (credit unit: {unit})" for rid, (name, unit) in REWARD_FAMILIES.items())
                + "."),
    "costs": (f"Rollout costs (name -> number >= 0); {' and '.join(REQUIRED_COSTS)} are required, "
              "tool_calls and messages are usual."),
    "metrics": ("Trace-level measures (name -> number), e.g. task_success, parallelism_efficiency, "
                "protocol_overhead, error_amplification."),
}
EVENT_DESCRIPTIONS = {
    "id": "Unique within the trace; edges name events by it.",
    "t": "Time in seconds from the start of the trace.",
    "type": "What happened.",
    "agent": "The acting agent (for a tool_result, it may be the tool).",
    "role": "The agent's role, e.g. lead, planner, executor, critic, verifier, summarizer.",
    "from": "Sender agent of a message or return.",
    "to": "Receiver agent of a message or return; for a spawn, the new agent.",
    "tool": "Tool name of a tool_call or tool_result.",
    "content_ref": "Pointer or hash of the text or tool content; the raw content may be withheld for privacy.",
    "trusted": "false marks untrusted content, e.g. a web page a tool returned.",
}
EDGE_DESCRIPTIONS = {
    "src": "Id of the source event.",
    "dst": "Id of the destination event.",
    "type": "The relation.",
}


def _text(description: str, non_empty: bool = False) -> dict:
    """A string property."""
    return {"type": "string", "description": description} | ({"minLength": 1} if non_empty else {})


def _number_map(description: str, non_negative: bool = False) -> dict:
    """An object whose every value is a number (>= 0 if asked)."""
    number = {"type": "number"} | ({"minimum": 0} if non_negative else {})
    return {"type": "object", "description": description, "additionalProperties": number}


def _event() -> dict:
    """An event: the required keys, the optional ones with a type, and any other property kept as sent."""
    properties = {
        "id": _text(EVENT_DESCRIPTIONS["id"], non_empty=True),
        "t": {"type": "number", "minimum": 0, "description": EVENT_DESCRIPTIONS["t"]},
        "type": {"type": "string", "enum": list(EVENT_TYPES), "description": EVENT_DESCRIPTIONS["type"]},
        "agent": _text(EVENT_DESCRIPTIONS["agent"], non_empty=True),
    }
    properties |= {key: _text(EVENT_DESCRIPTIONS[key]) for key in EVENT_STRING_KEYS}
    properties |= {key: {"type": "boolean", "description": EVENT_DESCRIPTIONS[key]} for key in EVENT_BOOLEAN_KEYS}
    return {
        "type": "object",
        "description": ("One vertex of the event graph. Any other property (reward, credit, tokens_in, ...) "
                        "is allowed and kept exactly as sent."),
        "required": list(EVENT_REQUIRED_KEYS),
        "properties": properties,
        "additionalProperties": True,
    }


def _edge() -> dict:
    """An edge: exactly its three keys."""
    src, dst, kind = EDGE_KEYS
    return {
        "type": "object",
        "description": "A typed relation from one event to another; no other keys.",
        "required": list(EDGE_KEYS),
        "properties": {
            src: _text(EDGE_DESCRIPTIONS[src], non_empty=True),
            dst: _text(EDGE_DESCRIPTIONS[dst], non_empty=True),
            kind: {"type": "string", "enum": list(EDGE_TYPES), "description": EDGE_DESCRIPTIONS[kind]},
        },
        "additionalProperties": False,
    }


def trace_schema() -> dict:
    """The JSON Schema of one trace (a fresh dict: callers may change it)."""
    properties = {
        "trace_id": _text(TRACE_DESCRIPTIONS["trace_id"], non_empty=True),
        "task_id": _text(TRACE_DESCRIPTIONS["task_id"], non_empty=True),
        "system": _text(TRACE_DESCRIPTIONS["system"]),
        "topology": {"type": "string", "enum": list(TOPOLOGIES), "description": TRACE_DESCRIPTIONS["topology"]},
        "events": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/event"},
                   "description": TRACE_DESCRIPTIONS["events"]},
        "edges": {"type": "array", "items": {"$ref": "#/$defs/edge"}, "description": TRACE_DESCRIPTIONS["edges"]},
        "rewards": _number_map(TRACE_DESCRIPTIONS["rewards"]),
        "costs": _number_map(TRACE_DESCRIPTIONS["costs"], non_negative=True) | {"required": list(REQUIRED_COSTS)},
        "metrics": _number_map(TRACE_DESCRIPTIONS["metrics"]),
    }
    return {
        "$schema": DRAFT,
        "$id": SCHEMA_ID,
        "title": "Orchestrace orchestration trace",
        "description": (
            "One run of an LLM multi-agent system as a temporal event graph: events (vertices) and typed edges, "
            f"with reward channels, costs and metrics. Credit units, fine to coarse: {', '.join(CREDIT_UNITS)}. "
            "Rules beyond this schema, enforced on ingest: " + "; ".join(BEYOND_SCHEMA) + "."),
        "type": "object",
        "required": list(TRACE_REQUIRED_KEYS),
        "properties": {key: properties[key] for key in TRACE_KEYS},  # the published order
        "additionalProperties": False,
        "$defs": {"event": _event(), "edge": _edge()},
    }
