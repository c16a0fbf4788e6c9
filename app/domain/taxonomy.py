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

# Reward design: the eight families (TAXONOMY.md §2): id -> (name, typical credit unit).
REWARD_FAMILIES = {
    "R1": ("shared team / outcome reward", "team"),
    "R2": ("individual agent reward", "agent"),
    "R3": ("role-specific reward", "role"),
    "R4": ("process reward (per step or turn)", "turn"),
    "R5": ("tool-use reward", "tool call"),
    "R6": ("debate / verifier reward", "message or turn"),
    "R7": ("orchestration reward: parallelism, split correctness, aggregation quality", "orchestrator decision"),
    "R8": ("hybrid local-global", "mixed"),
}

# Credit- and signal-bearing units, fine to coarse (§3).
CREDIT_UNITS = ("token", "tool call", "message", "turn", "agent", "role", "orchestrator", "team")

# Orchestration learning: the five sub-decisions (§4): id -> (decision, typical trace evidence).
SUBDECISIONS = {
    "O1": ("when to spawn", "orchestrator_decision followed by spawn"),
    "O2": ("whom to delegate to", "spawn / message to a chosen agent or role"),
    "O3": ("how to communicate", "message events and their edges"),
    "O4": ("how to aggregate", "aggregate events and their incoming returns"),
    "O5": ("when to stop", "the final decision; despawn; the last aggregate"),
}

# The paper pool (§8): columns in published order, and the controlled values of its tag fields.
PAPER_COLUMNS = ("key", "title", "first_author", "affiliation", "year", "arxiv_id", "venue", "url", "category",
                 "is_rl", "reward_type", "credit_granularity", "orchestration_form", "scenario", "is_core",
                 "one_liner", "verified", "notes")
PAPER_FIELDS = {
    "category": ("rl_method", "survey", "benchmark", "framework", "industry", "classical_marl"),
    "is_rl": ("yes", "no", "partial"),
    "reward_type": ("shared", "individual", "role", "process", "tool", "debate", "verifier", "orchestration",
                    "hybrid", "NA"),
    "credit_granularity": ("token", "turn", "message", "tool", "agent", "role", "orchestrator", "team", "NA"),
    "orchestration_form": ("centralized", "planner_executor_critic", "debate", "swarm", "hierarchical", "harness",
                           "NA"),
    "scenario": ("coding", "web", "research", "math", "tool_use", "debate", "general", "NA"),
    "is_core": ("core", "supporting", "case"),
    "verified": ("yes", "partial", "no"),
}
EXCLUSION_COLUMNS = ("record_id", "source", "query_family", "screening_label", "identifier", "url",
                     "date_screened", "stage", "exclusion_reason")

# Event labels (annotations): the vocabularies of their fields (declared in app.domain.label_fields), and the
# credit range.
# Had this event not happened (or said something else), would the outcome differ?
COUNTERFACTUAL_ANSWERS = ("no", "partly", "yes", "cannot tell")
# Was stopping here (or not stopping) right? Asked of the events that decide to stop or go on.
STOP_ANSWERS = ("stop_too_early", "right", "stop_too_late", "cannot tell")
STOP_EVENT_TYPES = ("orchestrator_decision", "despawn")
# The event types that carry each sub-decision's evidence (the table above), for picking events to label.
SUBDECISION_EVENT_TYPES = {"O1": ("orchestrator_decision",), "O2": ("spawn", "message"), "O3": ("message",),
                           "O4": ("aggregate", "return"), "O5": ("orchestrator_decision", "despawn", "aggregate")}
# The answers as numbers for a graph overlay ("cannot tell" has none): how much the event mattered, and how
# early (-1) or late (+1) the stop came.
COUNTERFACTUAL_SCORES = {"no": 0.0, "partly": 0.5, "yes": 1.0}
STOP_SCORES = {"stop_too_early": -1.0, "right": 0.0, "stop_too_late": 1.0}
CREDIT_RANGE = (-1.0, 1.0)
