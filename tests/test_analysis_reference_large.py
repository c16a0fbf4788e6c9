"""The analysis of one trace (app/domain/analysis.py analyse) as it was before it was made faster for large traces
(issue 30 part 4): metrics.analyse_graph, compute_metrics and every audit rule, copied unchanged. The faster code must
give exactly what this gives (the same JSON text, so an int is not turned into a float) over generated swarms, the
sample traces and traces broken at random: missing fields, cycles, self loops, repeated edges, edges to no event,
times out of order or equal, values of the wrong type."""

import copy
import json
import random
from collections import Counter, defaultdict
from dataclasses import dataclass
from functools import cached_property
from itertools import chain, compress
from operator import itemgetter
from pathlib import Path

from app.domain import metrics
from app.domain.analysis import analyse
from app.domain.audit import (
    MAX_FINDINGS_PER_RULE,
    ORDERED_EDGE_TYPES,
    REACH_EVENTS,
    REACH_NAMED,
    REACHABLE_ACTIONS,
    RULES,
    SEVERITIES,
    Rule,
    _plural,
)
from app.domain.generate import generate_swarm
from app.domain.metrics import BACK_IN_TIME, CLOSES_CYCLE, COORDINATION_TYPES, NOT_TEAM_TYPES, PERSON, SELF_LOOP

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


@dataclass
class TraceGraph:
    """Indexes over one trace that every analysis needs. Flat lists by position, not per-event containers:
    reading a long trace's event dicts costs more than the work, and many small lists make the garbage
    collector walk everything alive again and again."""

    events: list[dict]
    edges: list[dict]
    index: dict[str, int]                         # event id -> position
    ids: list[str]                                # position -> event id, time, type and agent
    t: list[float]
    types: list[str]
    agents: list[str]
    order: list[int]                              # positions sorted by (t, position)
    rank: list[int]                               # position -> place in `order`
    path_src: list[int]                           # the path graph: non-temporal edges, forward in (t, position)
    path_dst: list[int]                           # order, sorted by the place of their dst (stable)
    linked: list[dict]                            # the edges whose two ends are events, in edge order...
    kinds: list[str]                              # ...their types...
    src: list[int]                                # ...and the positions of their ends
    dst: list[int]
    ignored: list[tuple[dict, int, int, str]]     # (edge, src, dst, why) of edges left out of the path graph
    spawner: dict[str, str]                       # child agent -> agent that spawned it
    spawn_t: dict[str, float]
    despawn_t: dict[str, float]

    @cached_property
    def tokens(self) -> list[float | None]:
        """Each event's token count (see event_tokens); the metrics and the credit roll-up share it."""
        return [event_tokens(e) for e in self.events]

    @cached_property
    def roles(self) -> dict[str, str]:
        """Each agent's role: the first `role` on its events, spawns and tool results aside."""
        roles: dict[str, str] = {}
        for e, kind in zip(self.events, self.types):
            if kind != "tool_result" and kind != "spawn" and "role" in e:
                roles.setdefault(e["agent"], e["role"])
        return roles


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value

def analyse_graph(trace: dict) -> TraceGraph:
    """Build the indexes; edges pointing back in time or closing a cycle are set aside, not followed."""
    events, edges = trace["events"], trace["edges"]
    ids = [e["id"] for e in events]
    t = [e["t"] for e in events]
    types = [e["type"] for e in events]
    agents = [e["agent"] for e in events]
    index = dict(zip(ids, range(len(ids))))
    order = sorted(range(len(events)), key=t.__getitem__)  # stable: equal times keep position order
    rank = [0] * len(events)
    for place, i in enumerate(order):
        rank[i] = place
    src = [index.get(e["src"]) for e in edges]
    dst = [index.get(e["dst"]) for e in edges]
    linked = edges
    if None in src or None in dst:
        kept = [k for k, (s, d) in enumerate(zip(src, dst)) if s is not None and d is not None]
        linked, src, dst = [edges[k] for k in kept], [src[k] for k in kept], [dst[k] for k in kept]
    kinds = [e["type"] for e in linked]
    path_src, path_dst, ignored = [], [], []
    for edge, kind, s, d in zip(linked, kinds, src, dst):
        if kind == "temporal":
            continue
        if s == d:
            ignored.append((edge, s, d, SELF_LOOP))
        elif t[d] < t[s]:
            ignored.append((edge, s, d, BACK_IN_TIME))
        elif rank[d] < rank[s]:
            ignored.append((edge, s, d, CLOSES_CYCLE))
        else:
            path_src.append(s)
            path_dst.append(d)
    by_dst = sorted(range(len(path_dst)), key=[rank[d] for d in path_dst].__getitem__)
    spawner, spawn_t, despawn_t = spawn_times(
        [e for e, kind in zip(events, types) if kind == "spawn" or kind == "despawn"])
    return TraceGraph(events, edges, index, ids, t, types, agents, order, rank,
                      [path_src[k] for k in by_dst], [path_dst[k] for k in by_dst], linked, kinds, src, dst, ignored,
                      spawner, spawn_t, despawn_t)


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


def is_team(kind: str, agent: str) -> bool:
    """is_team_act of an event's type and agent."""
    return kind not in NOT_TEAM_TYPES and agent != PERSON


def lifetimes(times: list[float], types: list[str], agents: list[str], spawn_t: dict[str, float],
              despawn_t: dict[str, float]) -> dict[str, tuple[float, float]]:
    """agent_spans of events given as columns, with their spawn and despawn times (a TraceGraph has all)."""
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    last_return: dict[str, float] = {}
    for t, kind, agent in zip(times, types, agents):
        if not is_team(kind, agent):
            continue
        if agent not in first:  # the comparisons keep the earlier of equal times, as min and max would
            first[agent] = last[agent] = t
        elif t < first[agent]:
            first[agent] = t
        elif t > last[agent]:
            last[agent] = t
        if kind == "return" and (agent not in last_return or t > last_return[agent]):
            last_return[agent] = t
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
    for j, i in zip(g.path_src, g.path_dst):  # by the place of i, so j's length is final by now
        if length[j] + 1 > length[i]:
            length[i], back[i] = length[j] + 1, j
    longest = max(length)
    end = next(i for i in g.order if length[i] == longest)  # the first in time of the longest
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
    tokens = event.get("tokens")
    if tokens is not None and is_number(tokens):
        return tokens
    if "tokens_in" not in event and "tokens_out" not in event:  # most events: skip the checks below
        return None
    parts = [event[k] for k in ("tokens_in", "tokens_out") if is_number(event.get(k))]
    return sum(parts) if parts else None


def compute_metrics(trace: dict, g: TraceGraph | None = None) -> dict:
    """Every measure of one trace (see the README for the exact definitions)."""
    g = g or analyse_graph(trace)
    events = g.events
    types = Counter(g.types)
    spans = lifetimes(g.t, g.types, g.agents, g.spawn_t, g.despawn_t)
    path = critical_path(g)
    span_s = max(g.t) - min(g.t) if events else 0
    work_s = sum(hi - lo for lo, hi in spans.values())
    roles = g.roles
    by_agent: dict[str, float] = defaultdict(float)
    by_role: dict[str, float] = defaultdict(float)
    for e, agent, tokens in zip(events, g.agents, g.tokens):
        if tokens is not None:
            by_agent[agent] += tokens
            by_role[e.get("role") or roles.get(agent, "(no role)")] += tokens
    fanout = Counter(agent for agent, kind in zip(g.agents, g.types) if kind == "spawn")
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
        "ignored_edges": [{"src": edge["src"], "dst": edge["dst"], "type": edge["type"], "reason": reason}
                          for edge, _, _, reason in g.ignored],
    }



def finding(rule: str, message: str, events: list[str]) -> dict:
    return {"rule": rule, "severity": RULES[rule], "message": message, "events": events}


def audit(trace: dict, g: TraceGraph | None = None) -> list[dict]:
    """Every finding of every rule; a rule with very many findings is cut, with a count of the rest."""
    g = g or analyse_graph(trace)
    findings = []
    for rule in AUDIT_RULES:
        found = rule.check(trace, g)
        findings += [finding(rule.name, message, events) for message, events in found[:MAX_FINDINGS_PER_RULE]]
        if len(found) > MAX_FINDINGS_PER_RULE:
            findings.append(finding(rule.name, f"{len(found) - MAX_FINDINGS_PER_RULE} more {rule.name} findings "
                                    "not listed", []))
    return findings



def time_order(trace, g):
    """The path graph already set aside every non-temporal edge going back in time: read them there."""
    return [(f"{edge['type']} edge {edge['src']} → {edge['dst']} goes back in time (t {g.t[src]} → {g.t[dst]})",
             [edge["src"], edge["dst"]])
            for edge, src, dst, reason in g.ignored if reason == BACK_IN_TIME and edge["type"] in ORDERED_EDGE_TYPES]


def act_before_spawn(trace, g):
    spawn_t = g.spawn_t
    return [(f"{agent} acts at t {t} before its spawn at t {spawn_t[agent]}", [id_])
            for id_, t, agent in zip(g.ids, g.t, g.agents) if agent in spawn_t and t < spawn_t[agent]]


def act_after_despawn(trace, g):
    despawn_t = g.despawn_t
    return [(f"{agent} acts at t {t} after its despawn at t {despawn_t[agent]}", [id_])
            for id_, t, agent, kind in zip(g.ids, g.t, g.agents, g.types)
            if agent in despawn_t and t > despawn_t[agent] and kind != "despawn"]


def leaked_agent(trace, g):
    returned = {agent for agent, kind in zip(g.agents, g.types) if kind == "return"}
    leaked = [agent for agent in g.spawner if agent not in returned and agent not in g.despawn_t]
    if not leaked:
        return []
    first_spawn: dict = {}  # spawned agent -> its first spawn event
    for e, kind in zip(g.events, g.types):
        if kind == "spawn" and isinstance(e.get("to"), str):
            first_spawn.setdefault(e["to"], e["id"])
    return [(f"{agent} was spawned by {g.spawner[agent]} but never returns and is never despawned",
             [first_spawn[agent]]) for agent in leaked]


def orphan_return(trace, g):
    """A return hands its result to its spawner. An agent nobody spawned returning to an agent that spawns
    others lacks its spawn. The root answering `user` (or no one) and an agent answering in place of a
    spawner that handed off to it (and despawned) are the normal ends of a run."""
    spawners = set(g.spawner.values())
    handed_off = {agent for agent, kind in zip(g.agents, g.types) if kind == "despawn"}
    out = []
    for e, kind in zip(g.events, g.types):
        if kind != "return":
            continue
        spawner = g.spawner.get(e["agent"])
        target = e.get("to")
        if spawner is None and isinstance(target, str) and target in spawners and target != e["agent"]:
            out.append((f"return from {e['agent']} to {target}, but {e['agent']} was never spawned", [e["id"]]))
        elif spawner is not None and isinstance(target, str) and target != spawner and spawner not in handed_off:
            out.append((f"{e['agent']} returns to {target}, not to its spawner {spawner}", [e["id"]]))
    return out


def empty_aggregate(trace, g):
    aggregates = [e for e, kind in zip(g.events, g.types) if kind == "aggregate"]
    if not aggregates:
        return []
    fed = {edge["dst"] for edge in g.edges if edge["type"] in ("return", "message", "aggregate")}
    return [(f"aggregate {e['id']} has no incoming return, message or aggregate edge", [e["id"]])
            for e in aggregates if e["id"] not in fed]


def untrusted_flow(trace, g):
    """Per event with `trusted: false`, the tool_calls and spawns it reaches by paths that pass no
    safety_event (temporal edges count: what an agent read stays in its context): one finding per untrusted
    source naming its reach (actions and the agents taking them), not one per path, so a source read by
    many later steps is one line. Its events are the source, then the actions reached in time order.

    Only the sources audit() lists need their reach spelled out: one pass back in time finds which sources
    reach any action, one pass forward carries those listed as bits (a few hundred at most) to the actions,
    so the work grows with the trace, not with the trace times its actions."""
    sources = sorted((i for i, e in enumerate(g.events) if e.get("trusted") is False), key=g.rank.__getitem__)
    if not sources:
        return []
    types, rank = g.types, g.rank
    # The flow graph as two lists sorted by the place of the source: forward in time, never into a
    # safety_event (it stops the flow).
    flows = [rank[dst] > rank[src] and types[dst] != "safety_event" for src, dst in zip(g.src, g.dst)]
    flow_src, flow_dst = list(compress(g.src, flows)), list(compress(g.dst, flows))
    by_src = sorted(range(len(flow_src)), key=[rank[src] for src in flow_src].__getitem__)
    flow_src, flow_dst = [flow_src[k] for k in by_src], [flow_dst[k] for k in by_src]
    is_action = [kind in REACHABLE_ACTIONS for kind in types]
    reaches = [False] * len(g.events)  # reaches an action by one edge or more
    for src, dst in zip(reversed(flow_src), reversed(flow_dst)):  # latest source first: dst is settled
        if is_action[dst] or reaches[dst]:
            reaches[src] = True
    hits = [i for i in sources if reaches[i]]
    if not hits:
        return []
    listed = hits[:MAX_FINDINGS_PER_RULE]  # audit() lists no more: the rest are counted, not described
    carried = {v: 1 << k for k, v in enumerate(listed)}
    came = [0] * len(g.events)  # bit k: listed[k] reaches the node, or is it
    for v, bit in carried.items():
        came[v] = bit
    for src, dst in zip(flow_src, flow_dst):  # earliest source first: src is settled
        if came[src]:
            came[dst] |= came[src]
    for v, bit in carried.items():
        came[v] ^= bit  # a source does not reach itself
    actions = [i for i in g.order if is_action[i]]
    agent_names = list(dict.fromkeys(g.agents[i] for i in actions))
    agent_number = {agent: k for k, agent in enumerate(agent_names)}
    action_kind = [types[i] for i in actions]
    action_agent = [agent_number[g.agents[i]] for i in actions]
    groups: dict[int, list[int]] = {}  # the listed sources reaching an action -> all such actions (in time)
    for place, i in enumerate(actions):
        if came[i]:
            groups.setdefault(came[i], []).append(place)
    # Per listed source: (places, count of each REACHABLE_ACTIONS kind, agents) of its groups; the groups are
    # disjoint, so a source's actions in time are their places sorted together.
    reached: list[list[tuple]] = [[] for _ in listed]
    for bits, places in groups.items():
        kinds = [action_kind[p] for p in places]
        group = (places, tuple(map(kinds.count, REACHABLE_ACTIONS)), {action_agent[p] for p in places})
        while bits:
            low = bits & -bits
            reached[low.bit_length() - 1].append(group)
            bits ^= low
    out = []
    for i, parts in zip(listed, reached):
        source = g.events[i]
        in_time = sorted(chain.from_iterable(places for places, _, _ in parts))
        total = len(in_time)
        counts = " and ".join(_plural(n, kind) for kind, n in zip(REACHABLE_ACTIONS, map(sum, zip(
            *(per_kind for _, per_kind, _ in parts)))) if n)
        agents = sorted(set().union(*(members for _, _, members in parts)))
        who = [agent_names[k] for k in agents[:REACH_NAMED]] + (["…"] if len(agents) > REACH_NAMED else [])
        ids = [g.ids[actions[p]] for p in in_time[:REACH_EVENTS]]
        first = ids[:REACH_NAMED] + (["…"] if total > REACH_NAMED else [])
        message = (f"untrusted {source['id']} ({source.get('tool') or source['agent']}) reaches {counts} "
                   f"by {_plural(len(agents), 'agent')} ({', '.join(who)}), no safety_event on the way: "
                   f"{', '.join(first)}")
        out.append((message, [source["id"]] + ids))
    return out + [("", [])] * (len(hits) - len(listed))  # audit() only counts these


def cost_mismatch(trace, g):
    """costs.messages is not checked: imported traces count LLM calls there (IMPORTERS.md), and a call
    may become a decision or a tool_call while user input is a message too, so no event count matches it."""
    costs = trace.get("costs", {})
    out = []
    tool_calls = g.types.count("tool_call")
    if is_number(costs.get("tool_calls")) and costs["tool_calls"] != tool_calls:
        out.append((f"costs.tool_calls is {costs['tool_calls']} but the trace has {tool_calls} tool_call events",
                    []))
    wall = costs.get("wall_clock_s")
    if is_number(wall):
        late = [id_ for id_, t in zip(g.ids, g.t) if t > wall]
        if late:
            out.append((f"{len(late)} event(s) later than costs.wall_clock_s = {wall}", late))
    return out


def no_stop(trace, g):
    if not g.events:
        return []
    last = g.events[g.order[-1]]
    if last["type"] in ("aggregate", "orchestrator_decision"):
        return []
    return [((f"the trace ends with {last['type']} {last['id']}, not a final aggregate or stop decision "
              "(O5: when to stop)"), [last["id"]])]


def disconnected(trace, g):
    """Events in weakly connected components apart from the largest one."""
    if not g.edges:
        return []
    parent = list(range(len(g.events)))  # union-find, path halving written out: a call per step costs most
    for src, dst in zip(g.src, g.dst):
        while parent[src] != src:
            parent[src] = src = parent[parent[src]]
        while parent[dst] != dst:
            parent[dst] = dst = parent[parent[dst]]
        parent[src] = dst
    roots = []
    for i in range(len(g.events)):
        root = i
        while parent[root] != root:
            parent[root] = root = parent[parent[root]]
        roots.append(root)
    if len(set(roots)) <= 1:
        return []
    groups: dict[int, list[int]] = {}
    for i, root in enumerate(roots):
        groups.setdefault(root, []).append(i)
    biggest = max(groups.values(), key=len)
    return [(f"{len(members)} event(s) not connected to the rest of the trace", [g.events[i]["id"] for i in members])
            for members in groups.values() if members is not biggest]


def duplicate_edge(trace, g):
    if len(g.linked) == len(g.edges):  # every edge joins events: rule out repeats on positions, cheaply
        code = {kind: k for k, kind in enumerate(dict.fromkeys(g.kinds))}
        n = len(g.events)
        keys = [(src * n + dst) * len(code) + code[kind] for src, dst, kind in zip(g.src, g.dst, g.kinds)]
        if len(set(keys)) == len(keys):
            return []
    counts = Counter(map(itemgetter("src", "dst", "type"), g.edges))
    return [(f"{t} edge {s} → {d} appears {n} times", [s, d])
            for (s, d, t), n in counts.items() if n > 1]


def self_loop(trace, g):
    return [(f"{e['type']} edge from {e['src']} to itself", [e["src"]])
            for e in g.edges if e["src"] == e["dst"]]


def cycle(trace, g):
    """Strongly connected groups of events over the non-temporal edges (iterative Tarjan)."""
    if all(reason == SELF_LOOP for *_, reason in g.ignored):
        return []  # every non-temporal edge runs forward in (t, position) order: no cycle is possible
    n = len(g.events)
    adjacency = [[] for _ in range(n)]
    for kind, src, dst in zip(g.kinds, g.src, g.dst):
        if kind != "temporal" and src != dst:
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
                    out.append((f"{len(ids)} events form a cycle: " + " → ".join(ids), ids))
            if work:
                parent_v = work[-1][0]
                low[parent_v] = min(low[parent_v], low[v])
    return out


AUDIT_RULES = (  # in the order audit() lists their findings
    Rule("time_order", "error", "an ordered edge goes back in time", time_order),
    Rule("act_before_spawn", "error", "an agent acts before it is spawned", act_before_spawn),
    Rule("act_after_despawn", "error", "an agent acts after it is despawned", act_after_despawn),
    Rule("leaked_agent", "warning", "a spawned agent never returns and is never despawned", leaked_agent),
    # 2: the root answering the user, and an agent answering for a spawner that handed off to it, are spared
    Rule("orphan_return", "warning", "a return goes to someone other than the spawner", orphan_return, version=2),
    Rule("empty_aggregate", "warning", "an aggregate has nothing flowing into it", empty_aggregate),
    # 2: one finding per untrusted source naming its reach, not one per path
    Rule("untrusted_flow", "warning",
         "untrusted content reaches tool calls or spawns with no safety_event on the way", untrusted_flow, version=2),
    # 2: costs.messages is no longer checked
    Rule("cost_mismatch", "warning", "the costs the trace reports disagree with its events", cost_mismatch,
         version=2),
    Rule("no_stop", "info", "the trace does not end with a final aggregate or stop decision", no_stop),
    Rule("disconnected", "warning", "events are cut off from the rest of the trace", disconnected),
    Rule("duplicate_edge", "warning", "the same edge appears more than once", duplicate_edge),
    Rule("self_loop", "warning", "an edge runs from an event to itself", self_loop),
    Rule("cycle", "warning", "events depend on each other in a loop", cycle),
)


def analyse_as_it_was(trace: dict) -> dict:
    g = analyse_graph(trace)
    findings = audit(trace, g)
    counts = dict.fromkeys(SEVERITIES, 0)
    for f in findings:
        counts[f["severity"]] += 1
    return {"metrics": compute_metrics(trace, g), "findings": findings, "counts": counts}


EVENT_TYPES = ("tool_call", "tool_result", "spawn", "despawn", "return", "message", "aggregate", "safety_event",
               "orchestrator_decision", "human_intervention")
EDGE_TYPES = ("causal", "temporal", "message", "spawn", "tool_dependency", "return", "aggregate")
ODD_VALUES = (None, "12", True, False, 0, 3, 2.5, -1, float("nan"), float("inf"), [], {})


def broken(trace: dict, rng: random.Random) -> dict:
    """The trace with events retyped, re-agented, made untrusted, moved or tied in time, given odd values or
    stripped of optional fields, and edges added (cycles, self loops, repeats, to no event), dropped or retyped."""
    trace = copy.deepcopy(trace)
    events, edges = trace["events"], trace["edges"]
    agents = list(dict.fromkeys(e["agent"] for e in events)) + ["user", "nobody"]
    ids = [e["id"] for e in events]
    rate = rng.choice([0.02, 0.1, 0.3])
    for e in events:
        if rng.random() < rate:
            e["type"] = rng.choice(EVENT_TYPES)
        if rng.random() < rate:
            e["agent"] = rng.choice(agents)
        if rng.random() < rate:
            e["trusted"] = rng.choice([False, False, True, None, 0])
        if rng.random() < rate:
            e["t"] = rng.choice([events[0]["t"], e["t"] + 1, e["t"] - 5, int(e["t"]), float(int(e["t"])), -0.0])
        if rng.random() < rate:
            e[rng.choice(["tokens", "tokens_in", "tokens_out", "to", "role"])] = rng.choice(ODD_VALUES + tuple(agents))
        if rng.random() < rate:
            for key in rng.sample(["tokens", "tokens_in", "tokens_out", "to", "role", "tool", "trusted"], 2):
                e.pop(key, None)
    if rng.random() < 0.3:
        rng.shuffle(events)
    for _ in range(rng.randrange(0, 3 + len(events) // 20)):
        src, dst = rng.choice(ids + ["missing"]), rng.choice(ids + ["missing"])
        kind = rng.choice(EDGE_TYPES)
        edges.append({"src": src, "dst": dst, "type": kind})
        roll = rng.random()
        if roll < 0.3:
            edges.append({"src": dst, "dst": src, "type": kind})  # a cycle of two, or a pair back in time
        elif roll < 0.5:
            edges.append({"src": src, "dst": src, "type": kind})
    for _ in range(rng.randrange(0, 4)):
        if edges:
            edges.append(dict(rng.choice(edges)))
    if edges and rng.random() < 0.3:
        del edges[rng.randrange(len(edges)):]
    for edge in edges:
        if rng.random() < rate / 4:
            edge["type"] = rng.choice(EDGE_TYPES)
    costs = trace.setdefault("costs", {})
    for key in ("tool_calls", "wall_clock_s"):
        if rng.random() < 0.3:
            costs[key] = rng.choice(ODD_VALUES + (sum(e["type"] == "tool_call" for e in events), events[-1]["t"]))
    return trace


def cases() -> list[dict]:
    rng = random.Random(304)
    out = [json.loads(path.read_text()) for path in sorted(SAMPLES.glob("*.json"))]
    out += [broken(trace, rng) for trace in out for _ in range(10)]
    for seed in range(60):
        agents, events = rng.choice([(3, 12), (6, 20), (6, 37), (12, 90), (40, 400)])
        trace = generate_swarm(agents, events, seed=seed)
        out += [trace, broken(trace, rng), broken(trace, rng)]
    out += [generate_swarm(1000, 20_000, seed=3), {"trace_id": "empty", "events": [], "edges": []}]
    return out


def outcome(analysis, trace: dict) -> str:
    """What an analysis gives as JSON text (the order of keys and findings, ints apart from floats), or the
    exception it raises."""
    try:
        return json.dumps(analysis(trace))
    except Exception as error:  # a broken trace may fail: it must fail the same way
        return type(error).__name__


SAME_OBJECTS = ("events", "edges", "linked")  # the trace's own dicts: compared as objects


def graph_as_read_by_credit(build, trace: dict) -> str:
    """The indexes of a trace graph that the credit rules read too (app/domain/credit.py), as they were."""
    try:
        g = build(trace)
        names = [name for name in [*TraceGraph.__dataclass_fields__, "tokens", "roles"] if name not in SAME_OBJECTS]
        return repr([getattr(g, name) for name in names] + [list(map(id, g.linked)), g.events is trace["events"],
                                                            g.edges is trace["edges"]])
    except Exception as error:
        return type(error).__name__


def test_the_analysis_gives_exactly_what_it_gave_before_it_was_made_faster():
    failed = 0
    for trace in cases():
        before = outcome(analyse_as_it_was, trace)
        assert outcome(analyse, trace) == before, trace["trace_id"]
        assert graph_as_read_by_credit(metrics.analyse_graph, trace) == graph_as_read_by_credit(analyse_graph, trace)
        failed += before.isidentifier()
    assert failed < 10  # the broken traces mostly analyse: the comparison covers what they find
