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
BACK_STEPS = 16      # numpy steps untrusted_flow's pass back over a large graph's chains takes before its loop
ACROSS_SHARE = 0.25  # of a large graph's flow edges, the most between chains for untrusted_flow to go by chains

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
    if g.all_linked and g.kind_codes is not None:  # a large stored trace's arrays: the few feeding edges' ends
        feeding = np.flatnonzero(np.logical_or.reduce([g.kind_codes.equal(kind) for kind in FEEDS]))
        fed = named.intersection(map(g.ids.__getitem__, g.ends[1][feeding].tolist()))
    elif g.all_linked and g.ends is not None:  # a large trace's arrays
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
    so the work grows with the trace, not with the trace times its actions. A large graph's passes go over
    the edges between chains only (see _reach_by_chains)."""
    sources = list(compress(range(len(g.ids)), map(is_, g.column("trusted"), repeat(False))))
    if not sources:
        return []
    if not g.in_order:  # in order, positions are places already
        sources.sort(key=g.rank.__getitem__)
    hits, actions, agent_names, groups = (_reach_by_chains if g.ends is not None else _reach_by_edges)(g, sources)
    if not hits:
        return []
    listed = hits[:MAX_FINDINGS_PER_RULE]  # audit() lists no more: the rest are counted, not described
    # Per listed source, its groups in the order of their first place: they are disjoint, so its actions in time are
    # their places merged, and its first REACH_EVENTS come from its first REACH_EVENTS groups.
    reached = [[] for _ in listed]
    for group in groups:
        bits = group[0]
        while bits:
            low = bits & -bits
            reached[low.bit_length() - 1].append(group)
            bits ^= low
    out = []
    for i, parts in zip(listed, reached):
        # each group's places are in time already: merged, the first REACH_EVENTS are all a message shows
        in_time = list(islice(merge(*(places for _, places, *_ in parts[:REACH_EVENTS])), REACH_EVENTS))
        total = sum(size for _, _, size, _, _ in parts)
        counts = " and ".join(_plural(n, kind) for kind, n in zip(REACHABLE_ACTIONS, map(sum, zip(
            *(per_kind for *_, per_kind, _ in parts)))) if n)
        agents = 0
        for *_, members in parts:
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


Reach = tuple[list[int], list[int], list[str], list[tuple[int, list[int], int, tuple[int, ...], int]]]


def _reach_by_edges(g: TraceGraph, sources: list[int]) -> Reach:
    """untrusted_flow's reach over every edge, by loops (a small graph): the sources (positions, in time) that reach
    an action, the actions' positions in time, the acting agents by number, and the groups of actions reached by the
    same listed sources (bit k: the k-th hit), in the order of their first place, each as (bits, places, count,
    count of each REACHABLE_ACTIONS kind, agents as bits by number)."""
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
    if g.type_codes is not None:  # a large graph's chains too short (see _reach_by_chains)
        is_action = np.logical_or.reduce([g.type_codes.equal(kind) for kind in REACHABLE_ACTIONS]).tolist()
    else:
        is_action = list(map(frozenset(REACHABLE_ACTIONS).__contains__, types))
    reaches = [False] * len(g.ids)  # reaches an action by one edge or more
    for src, dst in zip(reversed(flow_src), reversed(flow_dst)):  # latest source first: dst is settled
        if is_action[dst] or reaches[dst]:
            reaches[src] = True
    hits = [i for i in sources if reaches[i]]
    if not hits:
        return [], [], [], []
    carried = {v: 1 << k for k, v in enumerate(hits[:MAX_FINDINGS_PER_RULE])}
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
    made = []
    for bits, places in groups.items():
        members = 0
        for k in set(map(action_agent.__getitem__, places)):
            members |= 1 << k
        made.append((bits, places, len(places), tuple(sum(map(kind.__getitem__, places)) for kind in is_kind),
                     members))
    return hits, actions, agent_names, made


def _reach_by_chains(g: TraceGraph, sources: list[int]) -> Reach:
    """_reach_by_edges on a large graph's arrays, by chains: each event's flow edge to its earliest successor, when
    that successor's latest predecessor is the event, links the two, and the links make chains (an agent's timeline,
    its tool calls' results woven in). What flows into a chain at one event flows on to every later event of it, so
    what reaches an action is a chain's events before a place, and what a source reaches is each chain's events from
    a place on: only the edges between chains (a few per agent) go through loops of Python, the rest is numpy.
    All in places (an event's rank in time), mapped back to positions at the end."""
    n = len(g.ids)
    src, dst = g.ends
    codes = g.type_codes.codes
    names = g.type_codes.names
    order = None if g.in_order else np.asarray(g.order, np.int64)
    if order is not None:
        place = np.asarray(g.rank, np.int64)
        src, dst, codes = place[src], place[dst], codes[order]
    is_action = np.isin(codes, [names.index(kind) for kind in REACHABLE_ACTIONS if kind in names])
    flow = src < dst
    if "safety_event" in names:  # it stops the flow: no edge into one
        flow &= codes[dst] != names.index("safety_event")
    flow_src, flow_dst = src[flow], dst[flow]
    agents = None if g.agent_codes is None else g.agent_codes.codes if order is None else g.agent_codes.codes[order]
    link = _links(n, flow_src, flow_dst, agents)
    # An edge no link may take is between chains (or, rarely, within one that crosses agents): when they are too many
    # the chains would save the loops less than their making costs, so that is decided before making them.
    if len(link) - np.count_nonzero(link) > ACROSS_SHARE * len(flow_src):
        return _reach_by_edges(g, sources)
    chain, chains = _chains(n, flow_src[link], flow_dst[link])
    across = chain[flow_src] != chain[flow_dst]  # an edge within a chain leads where the chain goes anyway
    cross_src, cross_dst = flow_src[across], flow_dst[across]
    if len(cross_src) > ACROSS_SHARE * len(flow_src):  # chains too short to save the loops their making
        return _reach_by_edges(g, sources)
    by_src = np.argsort(cross_src, kind="stable")
    cross_src, cross_dst = cross_src[by_src], cross_dst[by_src]
    # Pass back in time: a chain's places below reach_below[chain] reach an action (its last action, or one past an
    # edge out of it into an event that is or reaches one). By numpy steps over the edges between chains while they
    # still find more (a few, as a run's flows go), then by the loop from there.
    reach_below = np.full(chains, -1)
    action_places = np.flatnonzero(is_action)
    np.maximum.at(reach_below, chain[action_places], action_places)
    chain_src, chain_dst, into_action = chain[cross_src], chain[cross_dst], is_action[cross_dst]
    for _ in range(BACK_STEPS):
        grown = reach_below.copy()
        into = into_action | (cross_dst < reach_below[chain_dst])
        np.maximum.at(grown, chain_src[into], cross_src[into] + 1)
        if np.array_equal(grown, reach_below):
            break
        reach_below = grown
    else:
        reach_below = reach_below.tolist()
        for u, v, chain_u, chain_v, act in zip(cross_src[::-1].tolist(), cross_dst[::-1].tolist(),
                                               chain_src[::-1].tolist(), chain_dst[::-1].tolist(),
                                               into_action[::-1].tolist()):
            if u >= reach_below[chain_u] and (act or v < reach_below[chain_v]):
                reach_below[chain_u] = u + 1
        reach_below = np.asarray(reach_below)
    source_places = np.asarray(sources if order is None else [g.rank[i] for i in sources], np.int64)
    hit_places = source_places[source_places < reach_below[chain[source_places]]]
    hits = hit_places.tolist() if order is None else order[hit_places].tolist()
    if not hits:
        return [], [], [], []
    listed = hit_places[:MAX_FINDINGS_PER_RULE].tolist()
    # Pass forward over the edges from the first listed source on into events that are or reach an action, in
    # places: each chain's bits as they grow (a change at a place), every edge out carrying its chain's bits so far.
    useful = (cross_src >= listed[0]) & (is_action[cross_dst] | (cross_dst < reach_below[chain[cross_dst]]))
    cross_src, cross_dst = cross_src[useful], cross_dst[useful]
    stops = _distinct(np.concatenate([cross_src, cross_dst, hit_places[:MAX_FINDINGS_PER_RULE]]))
    incoming = {place: 1 << k for k, place in enumerate(listed)}
    bits_of = [0] * chains
    changes, changed_bits = [], []
    edge_dst = cross_dst.tolist()
    for p, c, lo, hi in zip(stops.tolist(), chain[stops].tolist(), np.searchsorted(cross_src, stops).tolist(),
                            np.searchsorted(cross_src, stops, "right").tolist()):
        add, bits = incoming.pop(p, 0), bits_of[c]
        if add | bits != bits:
            bits_of[c] = bits = bits | add
            changes.append(p)
            changed_bits.append(bits)
        if bits:
            for v in edge_dst[lo:hi]:
                incoming[v] = incoming.get(v, 0) | bits
    # Each action's bits are its chain's last change at or before it.
    changes = np.asarray(changes, np.int64)
    keys = chain[changes] * n + changes
    by_key = np.argsort(keys, kind="stable")
    keys = keys[by_key]
    action_keys = chain[action_places] * n + action_places
    last = np.searchsorted(keys, action_keys, "right") - 1
    valid = last >= 0
    valid[valid] = keys[last[valid]] // n == chain[action_places[valid]]
    number: dict[int, int] = {}
    group_of_change = np.fromiter((number.setdefault(changed_bits[j], len(number)) for j in by_key.tolist()),
                                  np.int64, len(by_key))
    group = np.where(valid, group_of_change[np.maximum(last, 0)], -1)
    for k, p in enumerate(listed):  # a source does not reach itself
        if is_action[p]:
            at = int(np.searchsorted(action_places, p))
            bits = (changed_bits[by_key[last[at]]] ^ 1 << k) if valid[at] else 0
            group[at] = number.setdefault(bits, len(number)) if bits else -1
    action_positions = action_places if order is None else order[action_places]
    agent_names, made = _made_groups(g, codes[action_places], action_positions, group, list(number))
    return hits, action_positions.tolist(), agent_names, made


def _made_groups(g: TraceGraph, action_codes: np.ndarray, action_positions: np.ndarray, group: np.ndarray,
                 all_bits: list[int]) -> tuple[list[str], list]:
    """_reach_by_chains' groups as _reach_by_edges makes them, from each action's group number (-1: none; in time)
    and each group number's bits: the acting agents by number (in order of their first action), and the groups."""
    names = g.type_codes.names
    actions_in = np.flatnonzero(group >= 0)
    group_in = group[actions_in]
    by_group = np.argsort(group_in, kind="stable")
    grouped = actions_in[by_group]
    bounds = np.searchsorted(group_in[by_group], np.arange(len(all_bits) + 1))
    sizes = np.diff(bounds)
    kept = np.flatnonzero(sizes)  # a change may reach no action
    kept = kept[np.argsort(grouped[bounds[kept]], kind="stable")]  # by first action
    kind_counts = [np.bincount(group_in[action_codes[actions_in] == names.index(kind)],
                               minlength=len(all_bits)).tolist() if kind in names else [0] * len(all_bits)
                   for kind in REACHABLE_ACTIONS]
    if g.agent_codes is not None:
        agent_codes, agent_code_names = g.agent_codes.codes[action_positions], g.agent_codes.names
    else:
        agent_code_names = list(dict.fromkeys(map(g.agents.__getitem__, action_positions.tolist())))
        code = {agent: k for k, agent in enumerate(agent_code_names)}
        agent_codes = np.fromiter(map(code.__getitem__, map(g.agents.__getitem__, action_positions.tolist())),
                                  np.int64, len(action_positions))
    first_seen = np.full(len(agent_code_names), len(agent_codes))
    np.minimum.at(first_seen, agent_codes, np.arange(len(agent_codes)))
    by_first = np.argsort(first_seen)[:np.count_nonzero(first_seen < len(agent_codes))]
    renumber = np.zeros(len(agent_code_names), np.int64)
    renumber[by_first] = np.arange(len(by_first))
    pairs = _distinct(group_in * len(by_first) + renumber[agent_codes][actions_in])
    members = [0] * len(all_bits)
    for group_k, agent_k in zip((pairs // len(by_first)).tolist(), (pairs % len(by_first)).tolist()):
        members[group_k] |= 1 << agent_k
    sizes = sizes.tolist()
    made = []
    for j in kept.tolist():
        places = grouped[bounds[j]:min(bounds[j + 1], bounds[j] + REACH_EVENTS)].tolist()
        made.append((all_bits[j], places, sizes[j], tuple(kind[j] for kind in kind_counts), members[j]))
    return [agent_code_names[c] for c in by_first.tolist()], made


def _links(n: int, flow_src: np.ndarray, flow_dst: np.ndarray, agents: np.ndarray | None) -> np.ndarray:
    """Which flow edges may link two events of a chain: those that keep to one agent or pass an event with one edge
    in or out (a tool's result between its call and the caller's next step), so that an agent's timeline makes one
    chain and a message between agents is an edge between chains."""
    outgoing, incoming = np.bincount(flow_src, minlength=n), np.bincount(flow_dst, minlength=n)
    link = (outgoing[flow_src] == 1) | (incoming[flow_dst] == 1)
    if agents is not None:
        link |= agents[flow_src] == agents[flow_dst]
    return link


def _chains(n: int, link_src: np.ndarray, link_dst: np.ndarray) -> tuple[np.ndarray, int]:
    """Each place's chain (numbered by their first place) and how many there are: an event is linked to its earliest
    successor when the event is that successor's latest predecessor, over the edges that may link (see _links)."""
    successor = np.full(n, n)
    np.minimum.at(successor, link_src, link_dst)
    predecessor = np.full(n, -1)
    np.maximum.at(predecessor, link_dst, link_src)
    linked = np.flatnonzero(successor < n)
    linked = linked[predecessor[successor[linked]] == linked]
    head = np.arange(n)
    head[successor[linked]] = linked
    is_head = head == np.arange(n)
    while True:  # pointer jumping: each step doubles how far up its chain a place points
        up = head[head]
        if np.array_equal(up, head):
            break
        head = up
    return (np.cumsum(is_head) - 1)[head], int(np.count_nonzero(is_head))


def _distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted: np.unique by sorting, which its hashing way (numpy 2.3 on) outruns ten times
    on a few hundred thousand integers."""
    values = np.sort(values)
    return values[np.concatenate(([True], values[1:] != values[:-1]))] if len(values) else values


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
    if g.ends is not None:  # a large trace's arrays
        src, dst = g.ends
        joined = np.zeros(n, bool)
        joined[dst[src < dst]] = True
        if np.count_nonzero(joined) == n - 1:
            return []
        joined[src[src > dst]] = True
        if np.count_nonzero(joined) == n - 1:
            return []
    else:
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
