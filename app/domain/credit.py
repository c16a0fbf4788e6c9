"""Computed credit: a trace-level reward channel assigned to events by a rule, and any per-event
credit rolled up to the eight credit units (TAXONOMY.md §3). Pure functions over a trace."""

from app.domain.metrics import TraceGraph, analyse_graph, critical_path, event_tokens, is_number

RULES = ("uniform", "causal", "critical_path")


def final_event(g: TraceGraph) -> int:
    """The last aggregate in time, or the last event when the trace has none."""
    aggregates = [i for i in g.order if g.events[i]["type"] == "aggregate"]
    return aggregates[-1] if aggregates else g.order[-1]


def ancestors(g: TraceGraph, target: int) -> set[int]:
    """Events with a path to `target` through the non-temporal edges, `target` included."""
    seen, stack = {target}, [target]
    while stack:
        for j in g.pred[stack.pop()]:
            if j not in seen:
                seen.add(j)
                stack.append(j)
    return seen


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
    for i in chosen:
        shares[i] = value / len(chosen)
    return shares


def turns(events: list[dict], order: list[int]) -> list[list[int]]:
    """Runs of consecutive events (in time order) by one agent between other agents' events."""
    runs: list[list[int]] = []
    for i in order:
        if runs and events[runs[-1][-1]]["agent"] == events[i]["agent"]:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


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
    counts: dict = {}
    for key, value in zip(keys, values):
        if key is not None:
            sums[key] = sums.get(key, 0.0) + value
            counts[key] = counts.get(key, 0) + 1
    rows = [{"key": key, "credit": total, "events": counts[key]} for key, total in sums.items()]
    return sorted(rows, key=lambda row: -abs(row["credit"]))


def rollup(trace: dict, values: list[float | None], g: TraceGraph | None = None) -> dict[str, list[dict]]:
    """Per-event credit summed to each credit unit: {unit: [{"key", "credit", "events"}]}.

    tool call: a call with the results it feeds (tool_dependency); message: each message; turn: runs of
    one agent; agent; role; orchestrator: orchestrator_decision and spawn events of the lead; team: all;
    token: credit per token for events that carry token counts. Events without a value count as 0.
    """
    g = g or analyse_graph(trace)
    events = g.events
    v = [x if is_number(x) else 0.0 for x in values]
    call_of = {}
    for edge in g.edges:
        if edge["type"] == "tool_dependency":
            src, dst = g.index.get(edge["src"]), g.index.get(edge["dst"])
            if src is not None and dst is not None and events[src]["type"] == "tool_call":
                call_of.setdefault(dst, events[src]["id"])
    lead = lead_agent(g)
    roles = {}
    for e in events:
        if e["type"] not in ("tool_result", "spawn") and "role" in e:
            roles.setdefault(e["agent"], e["role"])
    acting = [e["type"] != "tool_result" for e in events]
    turn_key = [None] * len(events)
    for number, run in enumerate(turns(events, g.order), start=1):
        key = f"turn {number}: {events[run[0]]['agent']}"
        for i in run:
            turn_key[i] = key
    tokens = [event_tokens(e) for e in events]
    per_token = [x / n if n else 0.0 for x, n in zip(v, tokens)]
    return {
        "token": _group([e["id"] if n else None for e, n in zip(events, tokens)], per_token),
        "tool call": _group([e["id"] if e["type"] == "tool_call" else call_of.get(i) for i, e in enumerate(events)], v),
        "message": _group([e["id"] if e["type"] == "message" else None for e in events], v),
        "turn": _group(turn_key, v),
        "agent": _group([e["agent"] if a else None for e, a in zip(events, acting)], v),
        "role": _group([(e["role"] if e["type"] != "spawn" and "role" in e else roles.get(e["agent"], "(no role)"))
                        if a else None for e, a in zip(events, acting)], v),
        "orchestrator": _group([e["id"] if e["agent"] == lead and e["type"] in ("orchestrator_decision", "spawn")
                                else None for e in events], v),
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
