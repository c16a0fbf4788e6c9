"""Computed credit: a trace-level reward channel assigned to events by a rule, and any per-event
credit rolled up to the eight credit units (TAXONOMY.md §3). Pure functions over a trace."""

from collections import Counter
from itertools import compress

from app.domain.metrics import TraceGraph, analyse_graph, critical_path, is_number

RULES = ("uniform", "causal", "critical_path")


def final_event(g: TraceGraph) -> int:
    """The last aggregate in time, or the last event when the trace has none."""
    return next((i for i in reversed(g.order) if g.types[i] == "aggregate"), g.order[-1])


def ancestors(g: TraceGraph, target: int) -> set[int]:
    """Events with a path to `target` through the non-temporal edges, `target` included."""
    seen = [False] * len(g.events)
    seen[target] = True
    for j, i in zip(reversed(g.path_src), reversed(g.path_dst)):  # latest i first: i is settled by now
        if seen[i]:
            seen[j] = True
    return set(compress(range(len(seen)), seen))


def assign(trace: dict, rule: str, value: float, g: TraceGraph | None = None) -> list[float]:
    """Per-event shares of `value`, in event order; they sum to `value`.

    uniform: every event alike; causal: the events with a path to the final aggregate (or last event);
    critical_path: the events on the critical path.
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}")
    g = g or analyse_graph(trace)
    n = len(g.events)
    if rule == "uniform":
        chosen = range(n)
    elif rule == "causal":
        chosen = ancestors(g, final_event(g))
    else:
        chosen = critical_path(g)
    chosen = list(chosen)
    shares = [0.0] * n
    share = value / len(chosen) if chosen else 0.0
    for i in chosen:
        shares[i] = share
    return shares


def turn_keys(agents: list[str], order: list[int]) -> list[str]:
    """Each event's turn, "turn <n>: <agent>": turns are runs of consecutive events (in time order) by one
    agent between other agents' events."""
    keys = [""] * len(agents)
    number, key, previous = 0, "", None
    for i in order:
        if number == 0 or agents[i] != previous:
            number += 1
            previous = agents[i]
            key = f"turn {number}: {previous}"
        keys[i] = key
    return keys


def lead_agent(g: TraceGraph) -> str | None:
    """The root of the spawn tree: the first acting agent nobody spawned."""
    for i in g.order:
        e = g.events[i]
        if e["type"] != "tool_result" and e["agent"] not in g.spawner:
            return e["agent"]
    return None


def _group(keys: list, values: list[float]) -> list[dict]:
    """Sum `values` by key (None keys skipped), largest |credit| first."""
    sums: dict = {}
    for key, value in zip(keys, values):
        if key is None:
            continue
        if key in sums:
            sums[key] += value
        else:
            sums[key] = 0.0 + value  # as a sum from 0.0: an int credit becomes a float
    counts = Counter(keys)
    rows = [{"key": key, "credit": total, "events": counts[key]} for key, total in sums.items()]
    return sorted(rows, key=lambda row: -abs(row["credit"]))


def rollup(trace: dict, values: list[float | None], g: TraceGraph | None = None) -> dict[str, list[dict]]:
    """Per-event credit summed to each credit unit: {unit: [{"key", "credit", "events"}]}.

    tool call: a call with the results it feeds (tool_dependency); message: each message; turn: runs of
    one agent; agent; role; orchestrator: orchestrator_decision and spawn events of the lead; team: all;
    token: credit per token for events that carry token counts. Events without a value count as 0.
    """
    g = g or analyse_graph(trace)
    events, types = g.events, g.types
    v = [x if is_number(x) else 0.0 for x in values]
    call_of = {}
    for kind, src, dst in zip(g.kinds, g.src, g.dst):
        if kind == "tool_dependency" and types[src] == "tool_call":
            call_of.setdefault(dst, g.ids[src])
    lead = lead_agent(g)
    roles = g.roles
    ids, agents, tokens = g.ids, g.agents, g.tokens
    per_token = [x / n if n else 0.0 for x, n in zip(v, tokens)]
    return {
        "token": _group([i if n else None for i, n in zip(ids, tokens)], per_token),
        "tool call": _group([i if kind == "tool_call" else call_of.get(k)
                             for k, (i, kind) in enumerate(zip(ids, types))], v),
        "message": _group([i if kind == "message" else None for i, kind in zip(ids, types)], v),
        "turn": _group(turn_keys(agents, g.order), v),
        "agent": _group([a if kind != "tool_result" else None for a, kind in zip(agents, types)], v),
        "role": _group([(e["role"] if kind != "spawn" and "role" in e else roles.get(e["agent"], "(no role)"))
                        if kind != "tool_result" else None for e, kind in zip(events, types)], v),
        "orchestrator": _group([i if a == lead and kind in ("orchestrator_decision", "spawn") else None
                                for i, a, kind in zip(ids, agents, types)], v),
        "team": _group(["team"] * len(events), v),
    }


def correlation(xs: list[float | None], ys: list[float | None]) -> dict:
    """Pearson correlation over the events that have both values."""
    pairs = [(x, y) for x, y in zip(xs, ys) if is_number(x) and is_number(y)]
    n = len(pairs)
    if n < 2:
        return {"n": n, "pearson": None}
    mx = sum(x for x, _ in pairs) / n
    my = sum(y for _, y in pairs) / n
    sxy = sum((x - mx) * (y - my) for x, y in pairs)
    sxx = sum((x - mx) ** 2 for x, _ in pairs)
    syy = sum((y - my) ** 2 for _, y in pairs)
    return {"n": n, "pearson": sxy / (sxx * syy) ** 0.5 if sxx and syy else None}
