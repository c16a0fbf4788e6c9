"""Computed credit: a trace-level reward channel assigned to events by a rule, and any per-event
credit rolled up to the eight credit units (TAXONOMY.md §3). Pure functions over a trace."""

from collections import defaultdict

from app.metrics import TraceGraph, analyse_graph, critical_path, event_tokens, is_number
from app.taxonomy import CREDIT_UNITS

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


def rollup(trace: dict, values: list[float | None], g: TraceGraph | None = None) -> dict[str, list[dict]]:
    """Per-event credit summed to each credit unit: {unit: [{"key", "credit", "events"}]}.

    tool call: a call with the results it feeds (tool_dependency); message: each message; turn: runs of
    one agent; agent; role; orchestrator: orchestrator_decision and spawn events of the lead; team: all;
    token: credit per token for events that carry token counts. Events without a value count as 0.
    """
    g = g or analyse_graph(trace)
    events = g.events
    v = [x if is_number(x) else 0.0 for x in values]
    units: dict[str, dict[str, list]] = {unit: defaultdict(lambda: [0.0, 0]) for unit in CREDIT_UNITS}

    def add(unit: str, key: str, i: int) -> None:
        cell = units[unit][key]
        cell[0] += v[i]
        cell[1] += 1

    result_of = {}
    for edge in g.edges:
        if edge["type"] == "tool_dependency":
            src, dst = g.index.get(edge["src"]), g.index.get(edge["dst"])
            if src is not None and dst is not None and events[src]["type"] == "tool_call":
                result_of.setdefault(dst, src)
    lead = lead_agent(g)
    roles = {}
    for e in events:
        if e["type"] not in ("tool_result", "spawn") and "role" in e:
            roles.setdefault(e["agent"], e["role"])
    for i, e in enumerate(events):
        if e["type"] == "tool_call":
            add("tool call", e["id"], i)
        elif e["type"] == "tool_result" and i in result_of:
            add("tool call", events[result_of[i]]["id"], i)
        if e["type"] == "message":
            add("message", e["id"], i)
        if e["type"] != "tool_result":
            add("agent", e["agent"], i)
            add("role", e.get("role") if e["type"] != "spawn" and "role" in e else roles.get(e["agent"], "(no role)"), i)
        if e["agent"] == lead and e["type"] in ("orchestrator_decision", "spawn"):
            add("orchestrator", e["id"], i)
        add("team", "team", i)
        tokens = event_tokens(e)
        if tokens:
            cell = units["token"][e["id"]]
            cell[0] += v[i] / tokens
            cell[1] += 1
    for number, run in enumerate(turns(events, g.order), start=1):
        key = f"turn {number}: {events[run[0]]['agent']}"
        for i in run:
            add("turn", key, i)
    return {unit: sorted(({"key": k, "credit": c, "events": n} for k, (c, n) in cells.items()),
                         key=lambda row: -abs(row["credit"]))
            for unit, cells in units.items()}


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
