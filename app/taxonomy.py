"""The controlled vocabularies of orchestration traces (TAXONOMY.md), spelled once.

Validation, forms, filters and exports read these names; nothing else spells them.
"""

EVENT_TYPES = (
    "orchestrator_decision",
    "spawn",
    "despawn",
    "message",
    "tool_call",
    "tool_result",
    "return",
    "aggregate",
    "human_intervention",
    "safety_event",
)

EDGE_TYPES = (
    "temporal",
    "causal",
    "spawn",
    "message",
    "tool_dependency",
    "return",
    "aggregate",
    "safety_flow",
)

TOPOLOGIES = (
    "centralized",
    "planner_executor_critic",
    "debate",
    "swarm",
    "hierarchical",
    "harness",
    "mixed",
    "unknown",
)

# Top-level keys of a trace: the required ones first, in the published order.
TRACE_REQUIRED_KEYS = ("trace_id", "task_id", "events", "edges", "rewards", "costs")
TRACE_KEYS = ("trace_id", "task_id", "system", "topology", "events", "edges", "rewards", "costs", "metrics")
REQUIRED_COSTS = ("tokens", "wall_clock_s")

EVENT_REQUIRED_KEYS = ("id", "t", "type", "agent")
# Optional event properties with a published type; any other property is kept as is.
EVENT_STRING_KEYS = ("role", "from", "to", "tool", "content_ref")
EVENT_BOOLEAN_KEYS = ("trusted",)

EDGE_KEYS = ("src", "dst", "type")
