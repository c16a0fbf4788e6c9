"""Structural diff of two traces (GET /api/diff, the /diff page): which agents are the same agent in both runs,
each matched agent's steps aligned, and where the runs first part ways. Pure; app/services/diff.py reads the traces.

Agents match by name, else by their place in the spawn tree (the roles on the path from the root, and the order
among siblings of the same role), so runs whose frameworks generate agent ids still match. A step is an agent's
event (a tool's answer is not a step: its call is); steps compare by type, tool and target agent (the target seen
through the agent matching). A lane's alignment keeps the longest common subsequence of steps as `same`; between
them, steps of the same type on both sides are `changed` (their tool or target differ), the rest are `only_a` or
`only_b`. The first divergence is the earliest step, by time since its run's start, that is not `same`.
"""

from collections import defaultdict
from difflib import SequenceMatcher

from app.domain.figure import spawn_tree

OPS = ("same", "changed", "only_a", "only_b")
EXACT_CELLS = 250_000  # lanes whose steps multiply to more are aligned by difflib's matching blocks, not exact LCS
SIDES = ("a", "b")


class _Run:
    """One trace's agents (spawn-tree order, parents, roles) and each agent's steps in time order."""

    def __init__(self, trace: dict):
        events = trace["events"]
        self.trace_id = trace["trace_id"]
        self.order, self.parents, self.roles = spawn_tree(events)
        self.t0 = min((e["t"] for e in events), default=0)
        placed = sorted(range(len(events)), key=lambda i: events[i]["t"])
        self.steps: dict[str, list[dict]] = defaultdict(list)
        for i in placed:
            e = events[i]
            if e["type"] != "tool_result" and e["agent"] in self.parents:
                self.steps[e["agent"]].append(e)

    def tree_keys(self) -> dict[str, tuple]:
        """Each agent's place in the spawn tree: per level, its role and its number among siblings of that role."""
        keys: dict[str, tuple] = {}
        taken: dict[tuple, int] = defaultdict(int)  # (parent's key, role) -> siblings of that role so far
        for agent in self.order:  # parents come before their children
            parent = self.parents.get(agent)
            above = keys.get(parent, ()) if parent is not None else ()
            role = self.roles.get(agent, "")
            keys[agent] = above + ((role, taken[(above, role)]),)
            taken[(above, role)] += 1
        return keys


def match_agents(a: _Run, b: _Run) -> list[dict]:
    """Pairs {"a", "b", "by"} of the agents that are the same agent in both runs, in a's spawn-tree order."""
    in_b = set(b.order)
    by_name = {agent for agent in a.order if agent in in_b}
    keys_a, keys_b = a.tree_keys(), b.tree_keys()
    free_b = {keys_b[agent]: agent for agent in reversed(b.order) if agent not in by_name}
    pairs = []
    for agent in a.order:
        if agent in by_name:
            pairs.append({"a": agent, "b": agent, "by": "name"})
        elif (other := free_b.pop(keys_a[agent], None)) is not None:
            pairs.append({"a": agent, "b": other, "by": "tree"})
    return pairs


def align(left: list[tuple], right: list[tuple]) -> list[tuple[str, int | None, int | None]]:
    """(op, index in left, index in right) of two step sequences: the longest common subsequence is `same`; between
    its steps, those of the same type (the first item) pair up in order as `changed`."""
    blocks = _common(left, right)
    ops: list[tuple[str, int | None, int | None]] = []
    i = j = 0
    for bi, bj in blocks + [(len(left), len(right))]:
        ops += _gap(left, right, range(i, bi), range(j, bj))
        if bi < len(left):
            ops.append(("same", bi, bj))
        i, j = bi + 1, bj + 1
    return ops


def _common(left: list[tuple], right: list[tuple]) -> list[tuple[int, int]]:
    """Index pairs of a longest common subsequence (exact up to EXACT_CELLS, else difflib's matching blocks)."""
    n, m = len(left), len(right)
    if not n or not m:
        return []
    if n * m > EXACT_CELLS:
        matcher = SequenceMatcher(None, left, right, autojunk=False)
        return [(i + k, j + k) for i, j, size in matcher.get_matching_blocks() for k in range(size)]
    length = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        row, below = length[i], length[i + 1]
        for j in range(m - 1, -1, -1):
            row[j] = below[j + 1] + 1 if left[i] == right[j] else max(below[j], row[j + 1])
    pairs, i, j = [], 0, 0
    while i < n and j < m:
        if left[i] == right[j]:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif length[i + 1][j] >= length[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def _gap(left, right, rows_a: range, rows_b: range) -> list[tuple[str, int | None, int | None]]:
    """The steps between two common ones: same-type steps paired in order as changed, the others alone."""
    out: list[tuple[str, int | None, int | None]] = []
    rest_b = list(rows_b)
    for i in rows_a:
        k = next((k for k, j in enumerate(rest_b) if right[j][0] == left[i][0]), None)
        if k is None:
            out.append(("only_a", i, None))
            continue
        out += [("only_b", None, j) for j in rest_b[:k]]
        out.append(("changed", i, rest_b[k]))
        rest_b = rest_b[k + 1:]
    return out + [("only_b", None, j) for j in rest_b]


def _lane_order(a: _Run, b: _Run, pairs: list[dict]) -> list[tuple[str | None, str | None]]:
    """(agent in a, agent in b) per lane: a's spawn-tree order, each agent only in b placed after the lane of the
    agent before it in b's order."""
    b_of = {pair["a"]: pair["b"] for pair in pairs}
    lanes: list[tuple[str | None, str | None]] = [(agent, b_of.get(agent)) for agent in a.order]
    matched_b = set(b_of.values())
    previous = None
    for agent in b.order:
        if agent not in matched_b:
            at = 0 if previous is None else next(k for k, lane in enumerate(lanes) if lane[1] == previous) + 1
            lanes.insert(at, (None, agent))
        previous = agent
    return lanes


def diff_traces(a_trace: dict, b_trace: dict) -> dict:
    """The structural diff of trace a against trace b (see the module's docstring)."""
    a, b = _Run(a_trace), _Run(b_trace)
    pairs = match_agents(a, b)
    by = {p["a"]: p["by"] for p in pairs}
    number = {("a", p["a"]): k for k, p in enumerate(pairs)} | {("b", p["b"]): k for k, p in enumerate(pairs)}

    def step(side: str, e: dict) -> tuple:
        target = e.get("to") if isinstance(e.get("to"), str) else None
        known = number.get((side, target))
        return e["type"], e.get("tool"), (("agent", known) if known is not None else target)

    lanes, first, counts = [], None, dict.fromkeys(OPS, 0)
    for agent_a, agent_b in _lane_order(a, b, pairs):
        steps_a, steps_b = a.steps.get(agent_a, []), b.steps.get(agent_b, [])
        ops = []
        for op, i, j in align([step("a", e) for e in steps_a], [step("b", e) for e in steps_b]):
            ea = steps_a[i] if i is not None else None
            eb = steps_b[j] if j is not None else None
            ops.append({"op": op, "a": ea["id"] if ea else None, "b": eb["id"] if eb else None})
            counts[op] += 1
            if op != "same":
                when = min(x["t"] - run.t0 for x, run in ((ea, a), (eb, b)) if x is not None)
                if first is None or when < first[0]:
                    first = (when, ops[-1]["a"], ops[-1]["b"])
        match = by[agent_a] if agent_a is not None and agent_b is not None else (
            "only_a" if agent_b is None else "only_b")
        lanes.append({"agent": agent_a if agent_a is not None else agent_b, "agent_a": agent_a, "agent_b": agent_b,
                      "match": match, "ops": ops})
    matched_b = {p["b"] for p in pairs}
    only_a = [agent for agent in a.order if agent not in by]
    only_b = [agent for agent in b.order if agent not in matched_b]
    steps = max(sum(len(s) for s in a.steps.values()), sum(len(s) for s in b.steps.values()))
    return {
        "a": a.trace_id,
        "b": b.trace_id,
        "agents": {"only_a": only_a, "only_b": only_b, "both": pairs},
        "lanes": lanes,
        "first_divergence": {"a": first[1], "b": first[2]} if first else {"a": None, "b": None},
        "summary": {
            "agents_a": len(a.order), "agents_b": len(b.order),
            "matched_by_name": sum(p["by"] == "name" for p in pairs),
            "matched_by_tree": sum(p["by"] == "tree" for p in pairs),
            "only_a": len(only_a), "only_b": len(only_b),
            "steps": counts,
            "similarity": counts["same"] / steps if steps else 1.0,
            "identical": not only_a and not only_b and counts["same"] == sum(counts.values()),
        },
    }
