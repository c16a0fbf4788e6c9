"""Analysis rules rewritten for speed at ingest (issue 30) find exactly what their plainer earlier definitions
found: each is kept here as it was, and both run over generated rollouts changed at random (untrusted sources,
safety events, edges back in time, repeated, to themselves or to no event, actions and spawns moved about)."""

import copy
import random
from collections import Counter
from heapq import merge
from itertools import compress, islice

import pytest

from app.domain import audit
from app.domain.audit import MAX_FINDINGS_PER_RULE, REACH_EVENTS, REACH_NAMED, REACHABLE_ACTIONS, _plural
from app.domain.generate import generate_swarm
from app.domain.metrics import analyse_graph

EVENT_TYPES = ("tool_call", "spawn", "safety_event", "message", "tool_result", "return", "aggregate")
EDGE_TYPES = ("causal", "temporal", "message", "spawn", "tool_dependency", "return")


def mutated(trace: dict, rng: random.Random) -> dict:
    """The trace with some events made untrusted, retyped or moved in time, and some edges added or dropped."""
    trace = copy.deepcopy(trace)
    events, edges = trace["events"], trace["edges"]
    ids = [e["id"] for e in events]
    for e in events:
        roll = rng.random()
        if roll < 0.15:
            e["trusted"] = False
        elif roll < 0.2:
            e["trusted"] = rng.choice([True, None, 0])
        if rng.random() < 0.15:
            e["type"] = rng.choice(EVENT_TYPES)
        if rng.random() < 0.05:
            e["t"] = rng.choice([0, e["t"], events[0]["t"], rng.uniform(0, 100)])
    for _ in range(rng.randrange(0, 12)):
        edges.append({"src": rng.choice(ids + ["missing"]), "dst": rng.choice(ids), "type": rng.choice(EDGE_TYPES)})
    if edges and rng.random() < 0.3:
        edges.append(dict(rng.choice(edges)))
    if rng.random() < 0.2:
        del edges[rng.randrange(len(edges)):]
    return trace


def cases() -> list[dict]:
    rng = random.Random(30)
    out = []
    for seed in range(150):
        agents, events = rng.choice([(3, 12), (6, 20), (6, 37), (12, 90)])
        trace = generate_swarm(agents, events, seed=seed)
        out += [trace, mutated(trace, rng), mutated(trace, rng)]
    many = mutated(generate_swarm(40, 2000, seed=7), rng)
    for e in many["events"]:
        e["trusted"] = False  # more sources than audit() lists
    return out + [many]


CASES = cases()


def untrusted_flow_as_it_was(trace, g):
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
    reached: list[list[tuple]] = [[] for _ in listed]  # per listed source: (places, kinds, agents) of its groups
    for bits, places in groups.items():
        group = (places, Counter(map(action_kind.__getitem__, places)), set(map(action_agent.__getitem__, places)))
        while bits:
            low = bits & -bits
            reached[low.bit_length() - 1].append(group)
            bits ^= low
    out = []
    for i, parts in zip(listed, reached):
        source = g.events[i]
        total = sum(len(places) for places, _, _ in parts)
        counts = " and ".join(_plural(n, kind) for kind in REACHABLE_ACTIONS
                              if (n := sum(kinds[kind] for _, kinds, _ in parts)))
        agents = sorted(set().union(*(members for _, _, members in parts)))
        who = [agent_names[k] for k in agents[:REACH_NAMED]] + (["…"] if len(agents) > REACH_NAMED else [])
        ids = [g.ids[actions[p]] for p in islice(merge(*(places for places, _, _ in parts)), REACH_EVENTS)]
        first = ids[:REACH_NAMED] + (["…"] if total > REACH_NAMED else [])
        message = (f"untrusted {source['id']} ({source.get('tool') or source['agent']}) reaches {counts} "
                   f"by {_plural(len(agents), 'agent')} ({', '.join(who)}), no safety_event on the way: "
                   f"{', '.join(first)}")
        out.append((message, [source["id"]] + ids))
    return out + [("", [])] * (len(hits) - len(listed))  # audit() only counts these


@pytest.mark.parametrize("rule, as_it_was", [(audit.untrusted_flow, untrusted_flow_as_it_was)])
def test_a_faster_rule_finds_what_it_found_before(rule, as_it_was):
    for trace in CASES:
        g = analyse_graph(trace)
        assert rule(trace, g) == as_it_was(trace, g), trace["trace_id"]
    assert sum(bool(untrusted_flow_as_it_was(trace, analyse_graph(trace))) for trace in CASES) > len(CASES) / 2
