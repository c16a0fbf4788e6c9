"""Structural and safety audit of one trace: pure rules with stable ids, each finding naming its events.

Every rule is one record of AUDIT_RULES (at the end, after the checks): its name, severity, summary, check and
version. audit(), the rule lists of the pages and the CLI (RULES, SUMMARIES) and the analysis version
(app/services/analysis.py) are read from it; docs/api.md gives each rule an example (a test holds it to the list).
"""

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from heapq import merge
from itertools import compress, islice, repeat
from operator import eq, gt, is_, lt, ne

import numpy as np

from app.domain.metrics import BACK_IN_TIME, SELF_LOOP, TraceGraph, analyse_graph, is_number

SEVERITIES = ("error", "warning", "info")
ORDERED_EDGE_TYPES = ("causal", "spawn", "message", "tool_dependency", "return", "aggregate")
MAX_FINDINGS_PER_RULE = 200
REACHABLE_ACTIONS = ("tool_call", "spawn")  # what untrusted content must not steer unchecked
REACH_NAMED = 5      # actions and agents an untrusted_flow message names; it counts them all
REACH_EVENTS = 50    # actions an untrusted_flow finding marks on the graph (the first in time)
FEEDS = ("return", "message", "aggregate")  # edges that bring an aggregate something

Found = tuple[str, list[str]]  # what a check found: its message and the events it names


@dataclass(frozen=True)
class Rule:
    """An audit rule. Raise `version` whenever what `check` finds changes (which findings, their messages or
    events): the analysis version is made from every rule's name and version, so stored findings are made again."""

    name: str
    severity: str  # one of SEVERITIES
    summary: str   # what a finding of it means, in a line: pages show it beside the rule's count
    check: Callable[[dict, TraceGraph], list[Found]]
    version: int = 1


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


def group_by_rule(findings: list[dict]) -> list[dict]:
    """Findings grouped by rule, errors first, then the rules with most findings: one noisy rule is one line."""
    groups: dict[str, dict] = {}
    for f in findings:
        group = groups.setdefault(f["rule"], {"rule": f["rule"], "severity": f["severity"],
                                              "summary": SUMMARIES.get(f["rule"], ""), "findings": []})
        group["findings"].append(f)
    return sorted(groups.values(), key=lambda g: (SEVERITIES.index(g["severity"]), -len(g["findings"]), g["rule"]))


def time_order(trace, g):
    """The path graph already set aside every non-temporal edge going back in time: read them there."""
    return [(f"{edge['type']} edge {edge['src']} → {edge['dst']} goes back in time (t {g.t[src]} → {g.t[dst]})",
             [edge["src"], edge["dst"]])
            for edge, src, dst, reason in g.ignored if reason == BACK_IN_TIME and edge["type"] in ORDERED_EDGE_TYPES]


def act_before_spawn(trace, g):
    spawn_t = g.spawn_t
    if g.in_order and all(g.t[g.first_at[agent]] >= spawn_t[agent] for agent in spawn_t if agent in g.first_at):
        return []  # each agent's first event is its earliest: none acts before its spawn
    return [(f"{agent} acts at t {t} before its spawn at t {spawn_t[agent]}", [id_])
            for id_, t, agent in zip(g.ids, g.t, g.agents) if agent in spawn_t and t < spawn_t[agent]]


def act_after_despawn(trace, g):
    despawn_t = g.despawn_t
    if g.in_order and all(g.t[g.last_at[agent]] <= despawn_t[agent] for agent in despawn_t if agent in g.last_at):
        return []  # each agent's last event is its latest: none acts after its despawn
    return [(f"{agent} acts at t {t} after its despawn at t {despawn_t[agent]}", [id_])
            for id_, t, agent, kind in zip(g.ids, g.t, g.agents, g.types)
            if agent in despawn_t and t > despawn_t[agent] and kind != "despawn"]


def leaked_agent(trace, g):
    returned = set(map(g.agents.__getitem__, g.positions("return")))
    leaked = [agent for agent in g.spawner if agent not in returned and agent not in g.despawn_t]
    if not leaked:
        return []
    first_spawn: dict = {}  # spawned agent -> its first spawn event
    for i in g.positions("spawn"):
        to = g.value(i, "to")
        if isinstance(to, str):
            first_spawn.setdefault(to, g.ids[i])
    return [(f"{agent} was spawned by {g.spawner[agent]} but never returns and is never despawned",
             [first_spawn[agent]]) for agent in leaked]


def orphan_return(trace, g):
    """A return hands its result to its spawner. An agent nobody spawned returning to an agent that spawns
    others lacks its spawn. The root answering `user` (or no one) and an agent answering in place of a
    spawner that handed off to it (and despawned) are the normal ends of a run."""
    spawners = set(g.spawner.values())
    handed_off = set(map(g.agents.__getitem__, g.positions("despawn")))
    out = []
    for i in g.positions("return"):
        agent, id_ = g.agents[i], g.ids[i]
        spawner = g.spawner.get(agent)
        target = g.value(i, "to")
        if spawner is None and isinstance(target, str) and target in spawners and target != agent:
            out.append((f"return from {agent} to {target}, but {agent} was never spawned", [id_]))
        elif spawner is not None and isinstance(target, str) and target != spawner and spawner not in handed_off:
            out.append((f"{agent} returns to {target}, not to its spawner {spawner}", [id_]))
    return out


def empty_aggregate(trace, g):
    aggregates = [g.ids[i] for i in g.positions("aggregate")]
    if not aggregates:
        return []
    named = set(aggregates)
    if g.all_linked and g.ends is not None:  # a large trace's arrays
        is_named = np.fromiter(map(named.__contains__, g.ids), bool, len(g.ids))
        into = np.flatnonzero(is_named[g.ends[1]])
        fed = {g.ids[dst] for k, dst in zip(into.tolist(), g.ends[1][into].tolist()) if g.edge_type(k) in FEEDS}
    elif g.all_linked:  # every edge ends at an event: its dst id is that event's
        is_named = list(map(named.__contains__, g.ids))
        into = list(compress(range(len(g.dst)), map(is_named.__getitem__, g.dst)))  # few edges
        fed = {g.ids[g.dst[k]] for k in into if g.edge_types[k] in FEEDS}
    else:
        into = list(compress(range(len(g.edge_dst)), map(named.__contains__, g.edge_dst)))
        fed = {g.edge_dst[k] for k in into if g.edge_types[k] in FEEDS}
    return [(f"aggregate {id_} has no incoming return, message or aggregate edge", [id_])
            for id_ in aggregates if id_ not in fed]


def untrusted_flow(trace, g):
    """Per event with `trusted: false`, the tool_calls and spawns it reaches by paths that pass no
    safety_event (temporal edges count: what an agent read stays in its context): one finding per untrusted
    source naming its reach (actions and the agents taking them), not one per path, so a source read by
    many later steps is one line. Its events are the source, then the actions reached in time order.

    Only the sources audit() lists need their reach spelled out: one pass back in time finds which sources
    reach any action, one pass forward carries those listed as bits (a few hundred at most) to the actions,
    so the work grows with the trace, not with the trace times its actions."""
    sources = list(compress(range(len(g.ids)), map(is_, g.column("trusted"), repeat(False))))
    if not sources:
        return []
    if not g.in_order:  # in order, positions are places already
        sources.sort(key=g.rank.__getitem__)
    types, rank = g.types, g.rank
    # The flow graph as two lists in an order where every edge into an event comes before every edge out of it
    # (by the place of their src or, as the graph has them, of their dst): forward in time, never into a
    # safety_event (it stops the flow).
    if g.forward_src is not None and "safety_event" not in types:  # nothing stops the flow
        flow_src, flow_dst = g.forward_src, g.forward_dst
    elif g.forward_src is not None:
        flows = list(map(ne, map(types.__getitem__, g.forward_dst), repeat("safety_event")))
        flow_src, flow_dst = list(compress(g.forward_src, flows)), list(compress(g.forward_dst, flows))
    else:
        flows = [rank[dst] > rank[src] and types[dst] != "safety_event" for src, dst in zip(g.src, g.dst)]
        flow_src, flow_dst = list(compress(g.src, flows)), list(compress(g.dst, flows))
        by_src = sorted(range(len(flow_src)), key=[rank[src] for src in flow_src].__getitem__)
        flow_src, flow_dst = [flow_src[k] for k in by_src], [flow_dst[k] for k in by_src]
    if g.type_codes is not None:
        is_action = np.logical_or.reduce([g.type_codes.equal(kind) for kind in REACHABLE_ACTIONS]).tolist()
    else:
        is_action = list(map(frozenset(REACHABLE_ACTIONS).__contains__, types))
    reaches = [False] * len(g.ids)  # reaches an action by one edge or more
    for src, dst in zip(reversed(flow_src), reversed(flow_dst)):  # latest source first: dst is settled
        if is_action[dst] or reaches[dst]:
            reaches[src] = True
    hits = [i for i in sources if reaches[i]]
    if not hits:
        return []
    listed = hits[:MAX_FINDINGS_PER_RULE]  # audit() lists no more: the rest are counted, not described
    carried = {v: 1 << k for k, v in enumerate(listed)}
    came = [0] * len(g.ids)  # bit k: listed[k] reaches the node, or is it
    for v, bit in carried.items():
        came[v] = bit
    for src, dst in zip(flow_src, flow_dst):  # earliest source first: src is settled
        if came[src]:
            came[dst] |= came[src]
    for v, bit in carried.items():
        came[v] ^= bit  # a source does not reach itself
    actions = list(compress(g.order, is_action)) if g.in_order else [i for i in g.order if is_action[i]]
    acting = list(map(g.agents.__getitem__, actions))
    agent_names = list(dict.fromkeys(acting))
    agent_number = {agent: k for k, agent in enumerate(agent_names)}
    action_kind = list(map(types.__getitem__, actions))
    is_kind = [list(map(eq, action_kind, repeat(kind))) for kind in REACHABLE_ACTIONS]
    action_agent = list(map(agent_number.__getitem__, acting))
    groups: dict[int, list[int]] = {}  # the listed sources reaching an action -> all such actions (in time)
    for place, bits in enumerate(map(came.__getitem__, actions)):
        if bits:
            groups.setdefault(bits, []).append(place)
    # Per listed source: (places, count of each REACHABLE_ACTIONS kind, agents as bits by number) of its groups, in
    # the order of their first place (as made); the groups are disjoint, so a source's actions in time are their
    # places merged, and its first REACH_EVENTS come from its first REACH_EVENTS groups.
    made = []
    for places in groups.values():
        members = 0
        for k in set(map(action_agent.__getitem__, places)):
            members |= 1 << k
        made.append((places, tuple(sum(map(kind.__getitem__, places)) for kind in is_kind), members))
    reached = [[group for bits, group in zip(groups, made) if bits >> k & 1] for k in range(len(listed))]
    out = []
    for i, parts in zip(listed, reached):
        # each group's places are in time already: merged, the first REACH_EVENTS are all a message shows
        in_time = list(islice(merge(*(places for places, _, _ in parts[:REACH_EVENTS])), REACH_EVENTS))
        total = sum(len(places) for places, _, _ in parts)
        counts = " and ".join(_plural(n, kind) for kind, n in zip(REACHABLE_ACTIONS, map(sum, zip(
            *(per_kind for _, per_kind, _ in parts)))) if n)
        agents = 0
        for _, _, members in parts:
            agents |= members
        named = []  # the agents of the lowest numbers, as many as a message names
        while agents and len(named) < REACH_NAMED:
            low = agents & -agents
            named.append(low.bit_length() - 1)
            agents ^= low
        agent_count = len(named) + agents.bit_count()
        who = [agent_names[k] for k in named] + (["…"] if agent_count > REACH_NAMED else [])
        ids = [g.ids[actions[p]] for p in in_time]
        first = ids[:REACH_NAMED] + (["…"] if total > REACH_NAMED else [])
        message = (f"untrusted {g.ids[i]} ({g.value(i, 'tool') or g.agents[i]}) reaches {counts} "
                   f"by {_plural(agent_count, 'agent')} ({', '.join(who)}), no safety_event on the way: "
                   f"{', '.join(first)}")
        out.append((message, [g.ids[i]] + ids))
    return out + [("", [])] * (len(hits) - len(listed))  # audit() only counts these


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def cost_mismatch(trace, g):
    """costs.messages is not checked: imported traces count LLM calls there (IMPORTERS.md), and a call
    may become a decision or a tool_call while user input is a message too, so no event count matches it."""
    costs = trace.get("costs", {})
    out = []
    tool_calls = g.type_counts["tool_call"]
    if is_number(costs.get("tool_calls")) and costs["tool_calls"] != tool_calls:
        out.append((f"costs.tool_calls is {costs['tool_calls']} but the trace has {tool_calls} tool_call events",
                    []))
    wall = costs.get("wall_clock_s")
    if is_number(wall) and not (g.in_order and g.t and g.t[-1] <= wall):  # in order, the last event is the latest
        late = [id_ for id_, t in zip(g.ids, g.t) if t > wall]
        if late:
            out.append((f"{len(late)} event(s) later than costs.wall_clock_s = {wall}", late))
    return out


def no_stop(trace, g):
    if not g.ids:
        return []
    last = g.order[-1]
    kind, id_ = g.types[last], g.ids[last]
    if kind in ("aggregate", "orchestrator_decision"):
        return []
    return [((f"the trace ends with {kind} {id_}, not a final aggregate or stop decision "
              "(O5: when to stop)"), [id_])]


def disconnected(trace, g):
    """Events in weakly connected components apart from the largest one."""
    if not g.edge_count:
        return []
    n = len(g.ids)
    # Every event but the first joined by an edge to an earlier one: all joined to the first, one group. The
    # events with an edge from an earlier one are usually all of them, the rest (an edge to an earlier one) not
    # needed then.
    later = set(g.forward_dst) if g.in_order else set(compress(g.dst, map(lt, g.src, g.dst)))
    if len(later) == n - 1 or len(later.union(compress(g.src, map(gt, g.src, g.dst)))) == n - 1:
        return []
    parent = list(range(n))  # union-find, path halving written out: a call per step costs most
    for src, dst in zip(g.src, g.dst):
        while parent[src] != src:
            parent[src] = src = parent[parent[src]]
        while parent[dst] != dst:
            parent[dst] = dst = parent[parent[dst]]
        parent[src] = dst
    roots = []
    for i in range(len(g.ids)):
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
    return [(f"{len(members)} event(s) not connected to the rest of the trace", [g.ids[i] for i in members])
            for members in groups.values() if members is not biggest]


def duplicate_edge(trace, g):
    if g.all_linked and g.ends is not None:  # every edge joins events, a large trace's arrays:
        if not _repeated_ends(g):  # no two edges join the same two events, or none of those have one type
            return []
    elif g.all_linked:  # every edge joins events: rule out repeats on positions, cheaply
        code = {kind: k for k, kind in enumerate(dict.fromkeys(g.kinds))}
        n = len(g.ids)
        keys = [(src * n + dst) * len(code) + code[kind] for src, dst, kind in zip(g.src, g.dst, g.kinds)]
        if len(set(keys)) == len(keys):
            return []
    counts = Counter(zip(g.edge_src, g.edge_dst, g.edge_types))
    return [(f"{t} edge {s} → {d} appears {n} times", [s, d])
            for (s, d, t), n in counts.items() if n > 1]


def _repeated_ends(g: TraceGraph) -> bool:
    """Whether two edges join the same two events with the same type: their pairs of positions sorted as numbers, the
    types (as numbers) compared only among the edges whose pair repeats (a temporal edge beside a causal one)."""
    src, dst = g.ends
    pairs = src * len(g.ids) + dst
    by_pair = np.argsort(pairs, kind="stable")
    ordered = pairs[by_pair]
    same = ordered[1:] == ordered[:-1]
    repeats = np.zeros(len(ordered), bool)
    repeats[1:] |= same
    repeats[:-1] |= same
    edges = by_pair[repeats]
    if g.kind_codes is not None:
        codes = g.kind_codes.codes[edges]
    else:
        code = {}
        codes = np.fromiter((code.setdefault(kind, len(code)) for kind in map(g.kinds.__getitem__, edges.tolist())),
                            np.int64, len(edges))
    pairs = ordered[repeats]
    by_key = np.lexsort((codes, pairs))
    pairs, codes = pairs[by_key], codes[by_key]
    return bool(((pairs[1:] == pairs[:-1]) & (codes[1:] == codes[:-1])).any())


def self_loop(trace, g):
    # Every edge joining events, its ends' positions are equal exactly when their ids are (an id given twice is at
    # its last position): the ids are then read only for the loops found.
    if g.all_linked and g.ends is not None:  # a large trace's arrays
        loops = np.flatnonzero(g.ends[0] == g.ends[1]).tolist()
    else:
        loops = compress(range(g.edge_count), map(eq, g.src, g.dst) if g.all_linked
                         else map(eq, g.edge_src, g.edge_dst))
    return [(f"{g.edge_type(k)} edge from {g.edge_src[k]} to itself", [g.edge_src[k]]) for k in loops]


def cycle(trace, g):
    """Strongly connected groups of events over the non-temporal edges (iterative Tarjan)."""
    if all(reason == SELF_LOOP for *_, reason in g.ignored):
        return []  # every non-temporal edge runs forward in (t, position) order: no cycle is possible
    n = len(g.ids)
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
                    ids = [g.ids[i] for i in sorted(members)]
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
# name -> severity, as pages and the CLI list rules: errors, then warnings, then infos, each in audit order
RULES = {rule.name: rule.severity for rule in sorted(AUDIT_RULES, key=lambda rule: SEVERITIES.index(rule.severity))}
SUMMARIES = {rule.name: rule.summary for rule in AUDIT_RULES}
