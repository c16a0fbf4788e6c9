"""Trace-level orchestration measures, defined exactly here (the README repeats the definitions).

Pure functions over a trace dict; linear in events and edges. `analyse_graph` is shared with the
credit rules and the audit so the critical path and lifetimes have one definition.
"""

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

COORDINATION_TYPES = ("orchestrator_decision", "spawn", "despawn", "message", "return", "aggregate")
NOT_TEAM_TYPES = ("tool_result", "human_intervention")  # a tool answering, a person stepping in
PERSON = "user"  # the agent name every importer gives the person at the keyboard
TOKEN_KEYS = ("tokens", "tokens_in", "tokens_out")
# A computed measure -> where a trace may report its own figure for it (`metrics` or `costs`, and the key).
# The two often differ (a trace counts LLM calls as messages, or steps its own way): pages show both, labelled.
REPORTED_AS = {
    "critical_path_steps": ("metrics", "critical_steps"),
    "parallelism_speedup": ("metrics", "parallelism_speedup"),
    "protocol_overhead": ("metrics", "protocol_overhead"),
    "tool_calls": ("costs", "tool_calls"),
    "messages": ("costs", "messages"),
    "tokens": ("costs", "tokens"),
}
REPORTED_REL_TOLERANCE = 0.005  # a reported figure this close to ours is ours rounded, not a different count
REPORTED_ABS_TOLERANCE = 0.0005


@dataclass
class TraceGraph:
    """Indexes over one trace that every analysis needs."""

    events: list[dict]
    edges: list[dict]
    index: dict[str, int]                         # event id -> position
    order: list[int]                              # positions sorted by (t, position)
    rank: list[int]                               # position -> place in `order`
    succ: list[list[int]] = field(default_factory=list)   # non-temporal, forward in (t, position) order
    pred: list[list[int]] = field(default_factory=list)
    ignored: list[dict] = field(default_factory=list)     # edges left out of the path graph, with why
    resolved: list[tuple[dict, int, int]] = field(default_factory=list)  # every edge with its end positions
    spawner: dict[str, str] = field(default_factory=dict)  # child agent -> agent that spawned it
    spawn_t: dict[str, float] = field(default_factory=dict)
    despawn_t: dict[str, float] = field(default_factory=dict)


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def analyse_graph(trace: dict) -> TraceGraph:
    """Build the indexes; edges pointing back in time or closing a cycle are set aside, not followed."""
    events, edges = trace["events"], trace["edges"]
    index = {e["id"]: i for i, e in enumerate(events)}
    order = sorted(range(len(events)), key=lambda i: (events[i]["t"], i))
    rank = [0] * len(events)
    for place, i in enumerate(order):
        rank[i] = place
    g = TraceGraph(events, edges, index, order, rank, [[] for _ in events], [[] for _ in events])
    for k, edge in enumerate(edges):
        src, dst = index.get(edge["src"]), index.get(edge["dst"])
        if src is None or dst is None:
            continue
        g.resolved.append((edge, src, dst))
        if edge["type"] == "temporal":
            continue
        if src == dst:
            g.ignored.append({"edge": k, "reason": "self loop"})
        elif events[dst]["t"] < events[src]["t"]:
            g.ignored.append({"edge": k, "reason": "points back in time"})
        elif rank[dst] < rank[src]:
            g.ignored.append({"edge": k, "reason": "closes a cycle among simultaneous events"})
        else:
            g.succ[src].append(dst)
            g.pred[dst].append(src)
    g.spawner, g.spawn_t, g.despawn_t = spawn_times(events)
    return g


def spawn_times(events: list[dict]) -> tuple[dict[str, str], dict[str, float], dict[str, float]]:
    """Who spawned each agent, when, and when each agent was despawned (the first such event counts)."""
    spawner: dict[str, str] = {}
    spawn_t: dict[str, float] = {}
    despawn_t: dict[str, float] = {}
    for e in events:
        if e["type"] not in ("spawn", "despawn"):
            continue
        target = e.get("to") if isinstance(e.get("to"), str) else None
        if e["type"] == "spawn" and target and target != e["agent"] and target not in spawner:
            spawner[target] = e["agent"]
            spawn_t[target] = e["t"]
        elif e["type"] == "despawn":
            despawn_t.setdefault(target or e["agent"], e["t"])
    return spawner, spawn_t, despawn_t


def is_team_act(event: dict) -> bool:
    """Whether an event is a team member acting: not a tool answering a call (`tool_result`), not a person
    (a `human_intervention`, or anything said by `user`, the name the importers give the person at the
    keyboard). "Agents" everywhere (the trace list, the trace page, the metrics) are the distinct `agent`s
    of such events. The SQL twin is app/store/queries.py TEAM_MEMBER_EVENT; a test checks they agree."""
    return event["type"] not in NOT_TEAM_TYPES and event["agent"] != PERSON


def team_members(events: list[dict]) -> list[str]:
    """The trace's agents (see is_team_act), in order of first appearance."""
    return list(dict.fromkeys(e["agent"] for e in events if is_team_act(e)))


def agent_spans(events: list[dict]) -> dict[str, tuple[float, float]]:
    """Per team member (see is_team_act): alive from its spawn (or first event) to its despawn, else its
    last return, else its last event."""
    _, spawn_t, despawn_t = spawn_times(events)
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    last_return: dict[str, float] = {}
    for e in events:
        if not is_team_act(e):
            continue
        agent, t = e["agent"], e["t"]
        first[agent] = min(first.get(agent, t), t)
        last[agent] = max(last.get(agent, t), t)
        if e["type"] == "return":
            last_return[agent] = max(last_return.get(agent, t), t)
    spans = {}
    for agent in first:
        start = min(spawn_t.get(agent, first[agent]), first[agent])
        end = despawn_t.get(agent, last_return.get(agent, last[agent]))
        spans[agent] = (start, max(end, start))
    return spans


def critical_path(g: TraceGraph) -> list[int]:
    """Positions of the events on the longest path (in events) through the non-temporal edges."""
    if not g.events:
        return []
    length = [1] * len(g.events)
    back = [-1] * len(g.events)
    for i in g.order:
        for j in g.pred[i]:
            if length[j] + 1 > length[i]:
                length[i], back[i] = length[j] + 1, j
    end = max(g.order, key=lambda i: (length[i], -g.rank[i]))
    path = []
    while end != -1:
        path.append(end)
        end = back[end]
    return path[::-1]


def spawn_depth(g: TraceGraph) -> int:
    """Longest chain spawner -> spawned agent; an agent nobody spawned has depth 0."""
    depth: dict[str, int] = {}
    for agent in g.spawner:
        chain, node = [], agent
        while node in g.spawner and node not in depth and node not in chain:
            chain.append(node)
            node = g.spawner[node]
        base = depth.get(node, 0)
        for k, member in enumerate(reversed(chain), start=1):
            depth[member] = base + k
    return max(depth.values(), default=0)


def max_concurrency(spans: dict[str, tuple[float, float]]) -> int:
    """Most agents alive at one instant (an agent ending at t and one starting at t overlap)."""
    points = sorted([(lo, 0) for lo, _ in spans.values()] + [(hi, 1) for _, hi in spans.values()])
    alive = best = 0
    for _, kind in points:
        alive += 1 if kind == 0 else -1
        best = max(best, alive)
    return best


def event_tokens(event: dict) -> float | None:
    """`tokens` when the event carries it, else tokens_in + tokens_out; None without token counts."""
    if is_number(event.get("tokens")):
        return event["tokens"]
    parts = [event[k] for k in ("tokens_in", "tokens_out") if is_number(event.get(k))]
    return sum(parts) if parts else None


def compute_metrics(trace: dict, g: TraceGraph | None = None) -> dict:
    """Every measure of one trace (see the README for the exact definitions)."""
    g = g or analyse_graph(trace)
    events = g.events
    types = Counter(e["type"] for e in events)
    spans = agent_spans(events)
    path = critical_path(g)
    t_values = [e["t"] for e in events]
    span_s = max(t_values) - min(t_values) if events else 0
    work_s = sum(hi - lo for lo, hi in spans.values())
    roles = {}
    for e in events:
        if e["type"] not in ("tool_result", "spawn") and "role" in e:
            roles.setdefault(e["agent"], e["role"])
    by_agent: dict[str, float] = defaultdict(float)
    by_role: dict[str, float] = defaultdict(float)
    for e in events:
        tokens = event_tokens(e)
        if tokens is not None:
            by_agent[e["agent"]] += tokens
            by_role[e.get("role") or roles.get(e["agent"], "(no role)")] += tokens
    fanout = Counter(e["agent"] for e in events if e["type"] == "spawn")
    return {
        "events": len(events),
        "edges": len(g.edges),
        "agents": len(spans),
        "spawns": types["spawn"],
        "max_fanout": max(fanout.values(), default=0),
        "spawn_depth": spawn_depth(g),
        "max_concurrency": max_concurrency(spans),
        "critical_path_steps": len(path),
        "critical_path_s": (events[path[-1]]["t"] - events[path[0]]["t"]) if path else 0,
        "critical_path": [events[i]["id"] for i in path],
        "span_s": span_s,
        "work_s": work_s,
        "parallelism_speedup": work_s / span_s if span_s else None,
        "protocol_overhead": sum(types[t] for t in COORDINATION_TYPES) / len(events) if events else 0,
        "tool_calls": types["tool_call"],
        "messages": types["message"],
        "tokens": sum(by_agent.values()) if by_agent else None,
        "tokens_by_agent": dict(sorted(by_agent.items(), key=lambda kv: -kv[1])),
        "tokens_by_role": dict(sorted(by_role.items(), key=lambda kv: -kv[1])),
        "ignored_edges": [{"src": g.edges[x["edge"]]["src"], "dst": g.edges[x["edge"]]["dst"],
                           "type": g.edges[x["edge"]]["type"], "reason": x["reason"]} for x in g.ignored],
    }


def reported_differences(trace: dict, metrics: dict) -> dict[str, float]:
    """The trace's own figure for each computed measure it reports (see REPORTED_AS) that differs from ours
    by more than rounding (0.292 reported for 0.2922 computed is the same figure), by the computed name."""
    out = {}
    for measure, (group, key) in REPORTED_AS.items():
        reported, computed = (trace.get(group) or {}).get(key), metrics.get(measure)
        if is_number(reported) and not (is_number(computed) and math.isclose(
                reported, computed, rel_tol=REPORTED_REL_TOLERANCE, abs_tol=REPORTED_ABS_TOLERANCE)):
            out[measure] = reported
    return out
