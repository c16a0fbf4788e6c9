"""A trace's metrics and audit findings as ingest stores them: equal to compute_metrics and audit (metrics.py,
audit.py stay the reference, written for reading) but made in fewer, fused passes over flat columns.

Why a twin: ingest analyses every trace it stores, 1,000 rollouts a request or one trace of a million events,
and there each of the reference's separate passes pays Python's per-step cost again. Rules that cannot find
anything in a trace are ruled out by a count taken once (no untrusted event, no spawn, no aggregate...).
tests/test_bulk_analysis.py holds the two equal on the samples, generated and recorded traces and on
property-generated broken ones.
"""

from collections import Counter

from app.domain import audit as reference
from app.domain.audit import MAX_FINDINGS_PER_RULE, RULES, SEVERITIES
from app.domain.metrics import (
    BACK_IN_TIME,
    CLOSES_CYCLE,
    COORDINATION_TYPES,
    NOT_TEAM_TYPES,
    PERSON,
    SELF_LOOP,
    TraceGraph,
    critical_path,
    is_number,
    max_concurrency,
    spawn_depth,
    spawn_times,
)


def analyse(trace: dict, g: TraceGraph | None = None) -> dict:
    """{"metrics", "findings", "counts"} of one trace (`g` its graph, when at hand), as the reference makes them."""
    g = g or graph(trace)
    counts = Counter(g.types)
    findings = audit(trace, g, counts)
    by_severity = dict.fromkeys(SEVERITIES, 0)
    for f in findings:
        by_severity[f["severity"]] += 1
    return {"metrics": metrics(g, counts), "findings": findings, "counts": by_severity}


def graph(trace: dict) -> TraceGraph:
    """metrics.analyse_graph, the same indexes."""
    events, edges = trace["events"], trace["edges"]
    n = len(events)
    ids = [e["id"] for e in events]
    t = [e["t"] for e in events]
    types = [e["type"] for e in events]
    agents = [e["agent"] for e in events]
    index = dict(zip(ids, range(n)))
    order = sorted(range(n), key=t.__getitem__)
    rank = [0] * n
    for place, i in enumerate(order):
        rank[i] = place
    get = index.get
    src = [get(e["src"]) for e in edges]
    dst = [get(e["dst"]) for e in edges]
    linked = edges
    if None in src or None in dst:
        kept = [k for k, (s, d) in enumerate(zip(src, dst)) if s is not None and d is not None]
        linked, src, dst = [edges[k] for k in kept], [src[k] for k in kept], [dst[k] for k in kept]
    kinds = [e["type"] for e in linked]
    path_src, path_dst, path_rank, ignored = [], [], [], []
    for edge, kind, s, d in zip(linked, kinds, src, dst):
        if kind == "temporal":
            continue
        rd = rank[d]
        if rd > rank[s]:  # a later place in (t, position) order: forward, the common case first
            path_src.append(s)
            path_dst.append(d)
            path_rank.append(rd)
        elif s == d:
            ignored.append((edge, s, d, SELF_LOOP))
        elif t[d] < t[s]:
            ignored.append((edge, s, d, BACK_IN_TIME))
        else:
            ignored.append((edge, s, d, CLOSES_CYCLE))
    by_dst = sorted(range(len(path_rank)), key=path_rank.__getitem__)
    spawner, spawn_t, despawn_t = spawn_times(
        [e for e, kind in zip(events, types) if kind == "spawn" or kind == "despawn"]
        if "spawn" in types or "despawn" in types else [])
    return TraceGraph(events, edges, index, ids, t, types, agents, order, rank,
                      [path_src[k] for k in by_dst], [path_dst[k] for k in by_dst], linked, kinds, src, dst, ignored,
                      spawner, spawn_t, despawn_t)


def metrics(g: TraceGraph, types: Counter) -> dict:
    """metrics.compute_metrics, with the type counts taken once."""
    events = g.events
    spans = _lifetimes(g)
    path = critical_path(g)
    span_s = max(g.t) - min(g.t) if events else 0
    work_s = sum(hi - lo for lo, hi in spans.values())
    by_agent, by_role = _tokens(g)
    fanout = Counter(agent for agent, kind in zip(g.agents, g.types) if kind == "spawn") if types["spawn"] else {}
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
        "critical_path": [g.ids[i] for i in path],
        "span_s": span_s,
        "work_s": work_s,
        "parallelism_speedup": work_s / span_s if span_s else None,
        "protocol_overhead": sum(types[t] for t in COORDINATION_TYPES) / len(events) if events else 0,
        "tool_calls": types["tool_call"],
        "messages": types["message"],
        "tokens": sum(by_agent.values()) if by_agent else None,
        "tokens_by_agent": dict(sorted(by_agent.items(), key=lambda kv: -kv[1])),
        "tokens_by_role": dict(sorted(by_role.items(), key=lambda kv: -kv[1])),
        "ignored_edges": [{"src": edge["src"], "dst": edge["dst"], "type": edge["type"], "reason": reason}
                          for edge, _, _, reason in g.ignored],
    }


def _lifetimes(g: TraceGraph) -> dict[str, tuple[float, float]]:
    """metrics.lifetimes: per team member, its first and last time and its last return, in one pass."""
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    last_return: dict[str, float] = {}
    for t, kind, agent in zip(g.t, g.types, g.agents):
        if kind in NOT_TEAM_TYPES or agent == PERSON:
            continue
        lo = first.get(agent)
        if lo is None:
            first[agent] = last[agent] = t
        elif t < lo:
            first[agent] = t
        elif t > last[agent]:
            last[agent] = t
        if kind == "return" and (agent not in last_return or t > last_return[agent]):
            last_return[agent] = t
    spawn_t, despawn_t = g.spawn_t, g.despawn_t
    spans = {}
    for agent, lo in first.items():
        start = min(spawn_t.get(agent, lo), lo)
        end = despawn_t.get(agent, last_return.get(agent, last[agent]))
        spans[agent] = (start, max(end, start))
    return spans


def _tokens(g: TraceGraph) -> tuple[dict, dict]:
    """Tokens by agent and by role (metrics.event_tokens of each event, summed in event order)."""
    by_agent: dict[str, float] = {}
    by_role: dict[str, float] = {}
    roles = None
    for e, agent in zip(g.events, g.agents):
        tokens = e.get("tokens")
        if tokens is None or not is_number(tokens):
            tokens_in, tokens_out = e.get("tokens_in"), e.get("tokens_out")
            if type(tokens_in) is int and type(tokens_out) is int:  # the common case: their sum, exactly
                tokens = tokens_in + tokens_out
            elif "tokens_in" not in e and "tokens_out" not in e:
                continue
            else:
                parts = [x for x in (tokens_in, tokens_out) if is_number(x)]
                if not parts:
                    continue
                tokens = sum(parts)
        by_agent[agent] = by_agent.get(agent, 0.0) + tokens
        role = e.get("role")
        if not role:
            if roles is None:
                roles = g.roles
            role = roles.get(agent, "(no role)")
        by_role[role] = by_role.get(role, 0.0) + tokens
    return by_agent, by_role


def audit(trace: dict, g: TraceGraph, types: Counter) -> list[dict]:
    """audit.audit: the rules in the same order; those that cannot find anything here are not run."""
    findings = []
    for name, check in _CHECKS:
        found = check(trace, g, types)
        if not found:
            continue
        severity = RULES[name]
        findings += [{"rule": name, "severity": severity, "message": message, "events": events}
                     for message, events in found[:MAX_FINDINGS_PER_RULE]]
        if len(found) > MAX_FINDINGS_PER_RULE:
            findings.append({"rule": name, "severity": severity,
                             "message": f"{len(found) - MAX_FINDINGS_PER_RULE} more {name} findings not listed",
                             "events": []})
    return findings


def _time_order(trace, g, types):
    return reference.time_order(trace, g) if g.ignored else []


def _act_before_spawn(trace, g, types):
    spawn_t = g.spawn_t
    if not spawn_t:
        return []
    return [(f"{agent} acts at t {t} before its spawn at t {spawn_t[agent]}", [id_])
            for id_, t, agent in zip(g.ids, g.t, g.agents) if agent in spawn_t and t < spawn_t[agent]]


def _act_after_despawn(trace, g, types):
    despawn_t = g.despawn_t
    if not despawn_t:
        return []
    return [(f"{agent} acts at t {t} after its despawn at t {despawn_t[agent]}", [id_])
            for id_, t, agent, kind in zip(g.ids, g.t, g.agents, g.types)
            if agent in despawn_t and t > despawn_t[agent] and kind != "despawn"]


def _leaked_agent(trace, g, types):
    return reference.leaked_agent(trace, g) if g.spawner else []


def _orphan_return(trace, g, types):
    return reference.orphan_return(trace, g) if types["return"] else []


def _empty_aggregate(trace, g, types):
    return reference.empty_aggregate(trace, g) if types["aggregate"] else []


def _untrusted_flow(trace, g, types):
    if not (types["tool_call"] or types["spawn"]) or not any(e.get("trusted") is False for e in g.events):
        return []
    return reference.untrusted_flow(trace, g)


def _cost_mismatch(trace, g, types):
    costs = trace.get("costs", {})
    out = []
    tool_calls = types["tool_call"]
    if is_number(costs.get("tool_calls")) and costs["tool_calls"] != tool_calls:
        out.append((f"costs.tool_calls is {costs['tool_calls']} but the trace has {tool_calls} tool_call events",
                    []))
    wall = costs.get("wall_clock_s")
    if is_number(wall) and g.events and max(g.t) > wall:
        late = [id_ for id_, t in zip(g.ids, g.t) if t > wall]
        out.append((f"{len(late)} event(s) later than costs.wall_clock_s = {wall}", late))
    return out


def _no_stop(trace, g, types):
    return reference.no_stop(trace, g)


def _disconnected(trace, g, types):
    return reference.disconnected(trace, g)


def _duplicate_edge(trace, g, types):
    edges = g.edges
    keys = [(e["src"], e["dst"], e["type"]) for e in edges]
    if len(set(keys)) == len(keys):
        return []
    return [(f"{t} edge {s} → {d} appears {n} times", [s, d]) for (s, d, t), n in Counter(keys).items() if n > 1]


def _self_loop(trace, g, types):
    return reference.self_loop(trace, g)


def _cycle(trace, g, types):
    return reference.cycle(trace, g)


_CHECKS = (  # audit.AUDIT_RULES, in its order
    ("time_order", _time_order),
    ("act_before_spawn", _act_before_spawn),
    ("act_after_despawn", _act_after_despawn),
    ("leaked_agent", _leaked_agent),
    ("orphan_return", _orphan_return),
    ("empty_aggregate", _empty_aggregate),
    ("untrusted_flow", _untrusted_flow),
    ("cost_mismatch", _cost_mismatch),
    ("no_stop", _no_stop),
    ("disconnected", _disconnected),
    ("duplicate_edge", _duplicate_edge),
    ("self_loop", _self_loop),
    ("cycle", _cycle),
)
assert [name for name, _ in _CHECKS] == [rule.name for rule in reference.AUDIT_RULES], "a rule without its twin"
