"""Structural and safety audit of one trace: pure rules with stable ids, each finding naming its events.

Rules (README lists them with examples): time_order, act_before_spawn, act_after_despawn,
leaked_agent, orphan_return, empty_aggregate, untrusted_flow, cost_mismatch, no_stop,
disconnected, duplicate_edge, self_loop, cycle.
"""

from collections import Counter

from app.domain.metrics import TraceGraph, analyse_graph, is_number

RULES = {  # id -> severity
    "time_order": "error",
    "act_before_spawn": "error",
    "act_after_despawn": "error",
    "leaked_agent": "warning",
    "orphan_return": "warning",
    "empty_aggregate": "warning",
    "untrusted_flow": "warning",
    "cost_mismatch": "warning",
    "disconnected": "warning",
    "duplicate_edge": "warning",
    "self_loop": "warning",
    "cycle": "warning",
    "no_stop": "info",
}
SEVERITIES = ("error", "warning", "info")
SUMMARIES = {  # id -> what a finding of it means, in a line (pages show it beside the rule's count)
    "time_order": "an ordered edge goes back in time",
    "act_before_spawn": "an agent acts before it is spawned",
    "act_after_despawn": "an agent acts after it is despawned",
    "leaked_agent": "a spawned agent never returns and is never despawned",
    "orphan_return": "a return goes to someone other than the spawner",
    "empty_aggregate": "an aggregate has nothing flowing into it",
    "untrusted_flow": "untrusted content reaches tool calls or spawns with no safety_event on the way",
    "cost_mismatch": "the costs the trace reports disagree with its events",
    "disconnected": "events are cut off from the rest of the trace",
    "duplicate_edge": "the same edge appears more than once",
    "self_loop": "an edge runs from an event to itself",
    "cycle": "events depend on each other in a loop",
    "no_stop": "the trace does not end with a final aggregate or stop decision",
}
ORDERED_EDGE_TYPES = ("causal", "spawn", "message", "tool_dependency", "return", "aggregate")
MAX_FINDINGS_PER_RULE = 200
REACHABLE_ACTIONS = ("tool_call", "spawn")  # what untrusted content must not steer unchecked
REACH_NAMED = 5      # actions and agents an untrusted_flow message names; it counts them all
REACH_EVENTS = 50    # actions an untrusted_flow finding marks on the graph (the first in time)
BIT_WINDOW = 256
BIT_WINDOW_MASK = (1 << BIT_WINDOW) - 1


def finding(rule: str, message: str, events: list[str]) -> dict:
    return {"rule": rule, "severity": RULES[rule], "message": message, "events": events}


def audit(trace: dict, g: TraceGraph | None = None) -> list[dict]:
    """Every finding of every rule; a rule with very many findings is cut, with a count of the rest."""
    g = g or analyse_graph(trace)
    findings = []
    for rule, check in CHECKS.items():
        found = check(trace, g)
        findings += found[:MAX_FINDINGS_PER_RULE]
        if len(found) > MAX_FINDINGS_PER_RULE:
            findings.append(finding(rule, f"{len(found) - MAX_FINDINGS_PER_RULE} more {rule} findings not listed",
                                    []))
    return findings


def group_by_rule(findings: list[dict]) -> list[dict]:
    """Findings grouped by rule, errors first, then the rules with most findings: one noisy rule is one line."""
    groups: dict[str, dict] = {}
    for f in findings:
        group = groups.setdefault(f["rule"], {"rule": f["rule"], "severity": f["severity"],
                                              "summary": SUMMARIES.get(f["rule"], ""), "findings": []})
        group["findings"].append(f)
    return sorted(groups.values(), key=lambda g: (SEVERITIES.index(g["severity"]), -len(g["findings"]), g["rule"]))


def time_order(trace, g):
    out = []
    for edge, src, dst in g.resolved:
        if edge["type"] in ORDERED_EDGE_TYPES and g.events[dst]["t"] < g.events[src]["t"]:
            out.append(finding("time_order", f"{edge['type']} edge {edge['src']} → {edge['dst']} goes back in time "
                               f"(t {g.events[src]['t']} → {g.events[dst]['t']})", [edge["src"], edge["dst"]]))
    return out


def act_before_spawn(trace, g):
    return [finding("act_before_spawn", f"{e['agent']} acts at t {e['t']} before its spawn at t {g.spawn_t[e['agent']]}",
                    [e["id"]])
            for e in g.events if e["agent"] in g.spawn_t and e["t"] < g.spawn_t[e["agent"]]]


def act_after_despawn(trace, g):
    return [finding("act_after_despawn",
                    f"{e['agent']} acts at t {e['t']} after its despawn at t {g.despawn_t[e['agent']]}", [e["id"]])
            for e in g.events if e["agent"] in g.despawn_t and e["t"] > g.despawn_t[e["agent"]]
            and e["type"] != "despawn"]


def leaked_agent(trace, g):
    returned = {e["agent"] for e in g.events if e["type"] == "return"}
    out = []
    for agent in g.spawner:
        if agent not in returned and agent not in g.despawn_t:
            spawn = next(e["id"] for e in g.events if e["type"] == "spawn" and e.get("to") == agent)
            out.append(finding("leaked_agent", f"{agent} was spawned by {g.spawner[agent]} but never returns "
                               "and is never despawned", [spawn]))
    return out


def orphan_return(trace, g):
    """A return hands its result to its spawner. An agent nobody spawned returning to an agent that spawns
    others lacks its spawn. The root answering `user` (or no one) and an agent answering in place of a
    spawner that handed off to it (and despawned) are the normal ends of a run."""
    spawners = set(g.spawner.values())
    handed_off = {e["agent"] for e in g.events if e["type"] == "despawn"}
    out = []
    for e in g.events:
        if e["type"] != "return":
            continue
        spawner = g.spawner.get(e["agent"])
        target = e.get("to")
        if spawner is None and isinstance(target, str) and target in spawners and target != e["agent"]:
            out.append(finding("orphan_return", f"return from {e['agent']} to {target}, but {e['agent']} was "
                               "never spawned", [e["id"]]))
        elif spawner is not None and isinstance(target, str) and target != spawner and spawner not in handed_off:
            out.append(finding("orphan_return", f"{e['agent']} returns to {target}, not to its spawner {spawner}",
                               [e["id"]]))
    return out


def empty_aggregate(trace, g):
    fed = {edge["dst"] for edge in g.edges if edge["type"] in ("return", "message", "aggregate")}
    return [finding("empty_aggregate", f"aggregate {e['id']} has no incoming return, message or aggregate edge",
                    [e["id"]]) for e in g.events if e["type"] == "aggregate" and e["id"] not in fed]


def untrusted_flow(trace, g):
    """Per event with `trusted: false`, the tool_calls and spawns it reaches by paths that pass no
    safety_event (temporal edges count: what an agent read stays in its context): one finding per untrusted
    source naming its reach (actions and the agents taking them), not one per path, so a source read by
    many later steps is one line. Its events are the source, then the actions reached in time order."""
    sources = [i for i in g.order if g.events[i].get("trusted") is False]
    if not sources:
        return []
    n = len(g.events)
    adjacency = [[] for _ in range(n)]  # forward in time, never into a safety_event (it stops the flow)
    pending = [0] * n                    # edges into a node whose reach has not been read yet
    for _, src, dst in g.resolved:
        if src != dst and g.rank[dst] > g.rank[src] and g.events[dst]["type"] != "safety_event":
            adjacency[src].append(dst)
            pending[dst] += 1
    # Reach sets are bit sets: bit k of acts is the k-th action in time order, of agents the k-th agent.
    actions = [i for i in g.order if g.events[i]["type"] in REACHABLE_ACTIONS]
    agent_names = list(dict.fromkeys(g.events[i]["agent"] for i in actions))
    agent_bit = {agent: 1 << k for k, agent in enumerate(agent_names)}
    own = {i: (1 << k, agent_bit[g.events[i]["agent"]]) for k, i in enumerate(actions)}
    below: dict[int, tuple[int, int]] = {}  # node -> (acts, agents) reached from it, itself included
    reach: dict[int, tuple[int, int]] = {}  # untrusted source -> (acts, agents) reached after it
    is_source = set(sources)
    for v in reversed(g.order):  # every edge runs forward in this order: successors are done first
        a = b = 0
        for w in adjacency[v]:
            wa, wb = below[w]
            a |= wa
            b |= wb
            pending[w] -= 1
            if not pending[w]:  # no other node reads it: free it (reach sets of long traces are large)
                del below[w]
        if a and v in is_source:
            reach[v] = (a, b)
        if pending[v]:
            mine = own.get(v)
            below[v] = (a | mine[0], b | mine[1]) if mine else (a, b)
    of_type = {kind: _mask([g.events[i]["type"] == kind for i in actions]) for kind in REACHABLE_ACTIONS}
    out = []
    for i in sources:
        if i not in reach:
            continue
        if len(out) >= MAX_FINDINGS_PER_RULE:  # audit() lists no more: count the rest, describe none
            out.append(finding("untrusted_flow", "", [g.events[i]["id"]]))
            continue
        a, b = reach[i]
        source = g.events[i]
        reached = [actions[k] for k in _bits(a, REACH_EVENTS)]
        counts = " and ".join(_plural(n, kind) for kind, mask in of_type.items() if (n := (a & mask).bit_count()))
        who = [agent_names[k] for k in _bits(b, REACH_NAMED)]
        who += ["…"] if b.bit_count() > len(who) else []
        first = [g.events[j]["id"] for j in reached[:REACH_NAMED]] + (["…"] if a.bit_count() > REACH_NAMED else [])
        out.append(finding("untrusted_flow",
                           f"untrusted {source['id']} ({source.get('tool') or source['agent']}) reaches {counts} "
                           f"by {_plural(b.bit_count(), 'agent')} ({', '.join(who)}), no safety_event on the way: "
                           f"{', '.join(first)}",
                           [source["id"]] + [g.events[j]["id"] for j in reached]))
    return out


def _mask(flags: list[bool]) -> int:
    """The bit set with bit k set where flags[k] is true (built in one pass, not bit by bit)."""
    return int("".join("1" if flag else "0" for flag in reversed(flags)) or "0", 2)


def _bits(value: int, limit: int) -> list[int]:
    """Positions of the lowest `limit` set bits of `value`, lowest first. Each step on a big int costs its
    size: skip to the lowest set bit once, then pick bits from a small window at a time."""
    if not value:
        return []
    start = (value & -value).bit_length() - 1
    value >>= start
    out = []
    while value and len(out) < limit:
        window = value & BIT_WINDOW_MASK
        while window and len(out) < limit:
            low = window & -window
            out.append(start + low.bit_length() - 1)
            window ^= low
        value >>= BIT_WINDOW
        start += BIT_WINDOW
    return out


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def cost_mismatch(trace, g):
    """costs.messages is not checked: imported traces count LLM calls there (IMPORTERS.md), and a call
    may become a decision or a tool_call while user input is a message too, so no event count matches it."""
    costs = trace.get("costs", {})
    out = []
    tool_calls = sum(e["type"] == "tool_call" for e in g.events)
    if is_number(costs.get("tool_calls")) and costs["tool_calls"] != tool_calls:
        out.append(finding("cost_mismatch", f"costs.tool_calls is {costs['tool_calls']} but the trace has "
                           f"{tool_calls} tool_call events", []))
    wall = costs.get("wall_clock_s")
    if is_number(wall):
        late = [e["id"] for e in g.events if e["t"] > wall]
        if late:
            out.append(finding("cost_mismatch", f"{len(late)} event(s) later than costs.wall_clock_s = {wall}", late))
    return out


def no_stop(trace, g):
    if not g.events:
        return []
    last = g.events[g.order[-1]]
    if last["type"] in ("aggregate", "orchestrator_decision"):
        return []
    return [finding("no_stop", f"the trace ends with {last['type']} {last['id']}, not a final aggregate or stop "
                    "decision (O5: when to stop)", [last["id"]])]


def disconnected(trace, g):
    """Events in weakly connected components apart from the largest one."""
    if not g.edges:
        return []
    parent = list(range(len(g.events)))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for _, src, dst in g.resolved:
        parent[root(src)] = root(dst)
    groups: dict[int, list[int]] = {}
    for i in range(len(g.events)):
        groups.setdefault(root(i), []).append(i)
    if len(groups) <= 1:
        return []
    biggest = max(groups.values(), key=len)
    return [finding("disconnected", f"{len(members)} event(s) not connected to the rest of the trace",
                    [g.events[i]["id"] for i in members]) for members in groups.values() if members is not biggest]


def duplicate_edge(trace, g):
    counts = Counter((e["src"], e["dst"], e["type"]) for e in g.edges)
    return [finding("duplicate_edge", f"{t} edge {s} → {d} appears {n} times", [s, d])
            for (s, d, t), n in counts.items() if n > 1]


def self_loop(trace, g):
    return [finding("self_loop", f"{e['type']} edge from {e['src']} to itself", [e["src"]])
            for e in g.edges if e["src"] == e["dst"]]


def cycle(trace, g):
    """Strongly connected groups of events over the non-temporal edges (iterative Tarjan)."""
    if not any(x["reason"] != "self loop" for x in g.ignored):
        return []  # every non-temporal edge runs forward in (t, position) order: no cycle is possible
    n = len(g.events)
    adjacency = [[] for _ in range(n)]
    for edge, src, dst in g.resolved:
        if edge["type"] != "temporal" and src != dst:
            adjacency[src].append(dst)
    index, low, on_stack, stack, counter, out = [-1] * n, [0] * n, [False] * n, [], 0, []
    for start in range(n):
        if index[start] != -1:
            continue
        work = [(start, 0)]
        while work:
            v, k = work.pop()
            if k == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack[v] = True
            if k < len(adjacency[v]):
                work.append((v, k + 1))
                w = adjacency[v][k]
                if index[w] == -1:
                    work.append((w, 0))
                elif on_stack[w]:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                members = []
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    members.append(w)
                    if w == v:
                        break
                if len(members) > 1:
                    ids = [g.events[i]["id"] for i in sorted(members)]
                    out.append(finding("cycle", f"{len(ids)} events form a cycle: " + " → ".join(ids), ids))
            if work:
                parent_v = work[-1][0]
                low[parent_v] = min(low[parent_v], low[v])
    return out


CHECKS = {
    "time_order": time_order, "act_before_spawn": act_before_spawn, "act_after_despawn": act_after_despawn,
    "leaked_agent": leaked_agent, "orphan_return": orphan_return, "empty_aggregate": empty_aggregate,
    "untrusted_flow": untrusted_flow, "cost_mismatch": cost_mismatch, "no_stop": no_stop,
    "disconnected": disconnected, "duplicate_edge": duplicate_edge, "self_loop": self_loop, "cycle": cycle,
}
