"""Synthetic swarm traces at industrial scale (TAXONOMY.md §7), so size limits are tested on realistic data.

The trace is valid by construction: ids follow time order, every edge points forward in
time between existing events, costs are counted from the events they summarise.
"""

import hashlib
import random
from bisect import bisect_right
from typing import NamedTuple

LEAD = "lead"
AGENTS_PER_MANAGER = 50
MIN_AGENTS = 3  # a lead, one manager and one worker
# Skeleton events: the lead's plan, aggregate and stop; per manager its spawn, plan, aggregate
# and return; per worker its spawn and return.
LEAD_SKELETON_EVENTS = 3
MANAGER_SKELETON_EVENTS = 4
WORKER_SKELETON_EVENTS = 2
TOOL_ROUND_EVENTS = 2  # a tool_call and its tool_result

WORKER_ROLES = ("executor", "researcher", "coder", "critic", "verifier")
WORKER_ROLE_WEIGHTS = (40, 30, 20, 5, 5)


class ToolSpec(NamedTuple):
    """How a tool behaves: whether its output can be trusted, how slow and how flaky it is."""

    trusted: bool
    latency_s: tuple[float, float]
    error_rate: float


TOOLS = {
    "web.search": ToolSpec(trusted=False, latency_s=(0.8, 3.5), error_rate=0.03),
    "browser.open": ToolSpec(trusted=False, latency_s=(1.5, 8.0), error_rate=0.08),
    "code.run": ToolSpec(trusted=True, latency_s=(0.5, 20.0), error_rate=0.12),
    "file.read": ToolSpec(trusted=True, latency_s=(0.02, 0.3), error_rate=0.01),
}
ROLE_TOOLS = {
    "executor": ("web.search", "browser.open", "code.run", "file.read"),
    "researcher": ("web.search", "web.search", "browser.open", "file.read"),
    "coder": ("code.run", "code.run", "file.read"),
    "critic": ("file.read", "code.run", "web.search"),
    "verifier": ("code.run", "file.read"),
}

# Share of a worker's optional activities that are messages rather than tool rounds.
MESSAGE_SHARE = 0.25
# Share of workers whose manager despawns them once their return arrives.
WORKER_DESPAWN_SHARE = 0.3
# Spread of how much work each worker takes on (log-normal sigma): swarms have stragglers.
WORKLOAD_SIGMA = 0.3
# Share of messages whose receiver labels them, for the message-credit overlay.
MESSAGE_LABEL_SHARE = 0.5
# A peer message goes to the manager instead when the peer has nothing left to do.
PEER_MESSAGE_SHARE = 0.7

# Latencies in seconds, each far above the time resolution (10**-TIME_DECIMALS), so times stay
# strictly increasing along edges after rounding.
TIME_DECIMALS = 3
DECISION_S = (1.0, 4.0)
SPAWN_GAP_S = (0.05, 0.3)
STARTUP_S = (0.2, 2.0)
THINK_S = (1.0, 6.0)
DESPAWN_GAP_S = (0.05, 0.5)
AGGREGATE_S = (1.0, 4.0)

# Token envelopes: (tokens_in low, high, tokens_out low, high).
DECISION_TOKENS = (2000, 8000, 150, 800)
TOOL_CALL_TOKENS = (1500, 6000, 40, 300)
MESSAGE_TOKENS = (800, 3000, 80, 600)
RETURN_TOKENS = (3000, 12000, 300, 1500)
AGGREGATE_TOKENS = (5000, 30000, 500, 2500)
CONTEXT_GROWTH_TOKENS = 350  # a worker's prompt grows by about this much per step

TOOL_OK_REWARD = 0.1
TOOL_ERROR_REWARD = -0.2
MESSAGE_REWARD = (-0.05, 0.15)
DECISION_REWARD = (0.2, 0.9)
SUCCESS_THRESHOLD = 0.5  # team reward at or above which the task counts as solved
COORDINATION_TYPES = ("orchestrator_decision", "spawn", "despawn", "message", "return", "aggregate")

TOOL = "tool"
MESSAGE = "message"


class _Builder:
    """Collects events and edges in creation order; ids are given later in time order."""

    def __init__(self, rng: random.Random, seed: int):
        self.rng = rng
        self.seed = seed
        self.events: list[dict] = []
        self.edges: list[tuple[int, int, str]] = []

    def add(self, t: float, type_: str, agent: str, props: dict) -> int:
        """Record an event and return its creation index."""
        index = len(self.events)
        digest = hashlib.sha256(f"{self.seed}/{index}".encode()).hexdigest()[:16]
        self.events.append(
            {"t": round(t, TIME_DECIMALS), "type": type_, "agent": agent, **props, "content_ref": f"sha256:{digest}"}
        )
        return index

    def link(self, src: int, dst: int, type_: str) -> None:
        """Record an edge between two creation indices."""
        self.edges.append((src, dst, type_))

    def tokens(self, envelope: tuple[int, int, int, int], grown: int = 0) -> dict:
        """Token counts of one LLM call, its prompt grown by earlier steps."""
        low_in, high_in, low_out, high_out = envelope
        return {
            "tokens_in": self.rng.randint(low_in, high_in) + grown,
            "tokens_out": self.rng.randint(low_out, high_out),
        }

    def wait(self, span: tuple[float, float]) -> float:
        """A latency drawn from a span."""
        return self.rng.uniform(*span)


class _Worker(NamedTuple):
    """What the manager and the message router need to know about a finished worker."""

    name: str
    own: list[tuple[float, int]]  # (t, index) of the worker's own events, in time order
    messages: list[int]
    return_index: int
    first_t: float
    quality: float
    tool_errors: int
    degraded: bool


def generate_swarm(agents: int = 1000, events: int = 20000, seed: int = 1) -> dict:
    """A deterministic lead → managers → workers swarm trace of exactly `agents` agents and `events` events."""
    if agents < MIN_AGENTS:
        raise ValueError(
            f"agents={agents}: a swarm needs at least {MIN_AGENTS} agents (a lead, a manager and a worker)"
        )
    managers = max(1, round(agents / AGENTS_PER_MANAGER))
    workers = agents - 1 - managers
    minimum = LEAD_SKELETON_EVENTS + MANAGER_SKELETON_EVENTS * managers + WORKER_SKELETON_EVENTS * workers
    if events < minimum:
        raise ValueError(
            f"events={events} is too few for agents={agents}: every agent needs its spawn, work and return, "
            f"so at least {minimum} events are required"
        )
    rng = random.Random(seed)
    build = _Builder(rng, seed)
    roles = rng.choices(WORKER_ROLES, weights=WORKER_ROLE_WEIGHTS, k=workers)
    plans, despawn_workers, despawn_managers = _plan_activities(rng, workers, managers, events - minimum)
    groups = _split(workers, managers)

    plan = build.add(0.0, "orchestrator_decision", LEAD, _decision(build, "lead", "delegate", managers))
    t = build.events[plan]["t"] + build.wait(DECISION_S)
    manager_returns = []
    finished: list[_Worker] = []
    for number, group in enumerate(groups):
        t += build.wait(SPAWN_GAP_S)
        name = f"manager-{number + 1:0{len(str(managers))}d}"
        spawn = build.add(t, "spawn", LEAD, {"role": "lead", "to": name, "child_role": "manager"})
        build.link(plan, spawn, "causal")
        manager_return, group_workers = _run_group(build, name, spawn, group, roles, plans, despawn_workers)
        manager_returns.append(manager_return)
        finished.extend(group_workers)

    last_return_t = 0.0
    for manager_return in manager_returns:
        return_t = build.events[manager_return]["t"]
        last_return_t = max(last_return_t, return_t)
        if despawn_managers:
            despawn_managers -= 1
            despawn = build.add(
                return_t + build.wait(DESPAWN_GAP_S),
                "despawn",
                LEAD,
                {"role": "lead", "to": build.events[manager_return]["agent"]},
            )
            build.link(manager_return, despawn, "causal")
    team = round(sum(w.quality for w in finished) / workers, 3)
    aggregate = build.add(
        last_return_t + build.wait(AGGREGATE_S),
        "aggregate",
        LEAD,
        {"role": "lead", "inputs": managers, **build.tokens(AGGREGATE_TOKENS), "reward": team},
    )
    for manager_return in manager_returns:
        build.link(manager_return, aggregate, "return")
    stop_t = build.events[aggregate]["t"] + build.wait(DECISION_S)
    stop = build.add(stop_t, "orchestrator_decision", LEAD, _decision(build, "lead", "stop"))
    build.link(aggregate, stop, "aggregate")
    return _finish(build, f"swarm-a{agents}-e{events}-s{seed}", team, finished)


def generate_messaging(events: int) -> dict:
    """Two agents messaging at every event (each event follows its agent's last and answers the other's; every 7th a
    tool call, every 11th untrusted): a shape whose timelines are all crossings, for untrusted_flow's chains."""
    trace = {"trace_id": f"messaging-{events}", "events": [], "edges": []}
    for k in range(events):
        event = {"id": f"e{k}", "t": float(k), "type": "tool_call" if k % 7 == 3 else "message", "agent": "ab"[k % 2]}
        if k % 11 == 1:
            event["trusted"] = False
        trace["events"].append(event)
        if k >= 2:
            trace["edges"].append({"src": f"e{k - 2}", "dst": f"e{k}", "type": "temporal"})
        if k >= 1:
            trace["edges"].append({"src": f"e{k - 1}", "dst": f"e{k}", "type": "message"})
    return trace


def _plan_activities(
    rng: random.Random, workers: int, managers: int, extra: int
) -> tuple[list[list[str]], set[int], int]:
    """Spend the events beyond the skeleton: a first tool round each, some despawns, then random work."""
    plans: list[list[str]] = [[] for _ in range(workers)]
    # Tool work first, so even a tight budget shows every worker using a tool.
    for plan in plans[: extra // TOOL_ROUND_EVENTS]:
        plan.append(TOOL)
        extra -= TOOL_ROUND_EVENTS
    despawn_managers = min(managers, extra)
    extra -= despawn_managers
    despawn_count = min(round(workers * WORKER_DESPAWN_SHARE), extra)
    despawn_workers = set(rng.sample(range(workers), despawn_count))
    extra -= despawn_count
    workload = [rng.lognormvariate(0.0, WORKLOAD_SIGMA) for _ in range(workers)]
    # Every pick spends at least one event, so `extra` picks always suffice.
    for chosen in rng.choices(range(workers), weights=workload, k=extra):
        if not extra:
            break
        if extra >= TOOL_ROUND_EVENTS and rng.random() >= MESSAGE_SHARE:
            plans[chosen].append(TOOL)
            extra -= TOOL_ROUND_EVENTS
        else:
            plans[chosen].append(MESSAGE)
            extra -= 1
    for plan in plans:
        rest = plan[1:]
        rng.shuffle(rest)
        plan[1:] = rest
    return plans, despawn_workers, despawn_managers


def _split(workers: int, managers: int) -> list[range]:
    """Workers divided as evenly as possible among the managers."""
    size, larger = divmod(workers, managers)
    groups, start = [], 0
    for number in range(managers):
        end = start + size + (number < larger)
        groups.append(range(start, end))
        start = end
    return groups


def _decision(build: _Builder, role: str, decision: str, subagents: int | None = None) -> dict:
    """Properties of an orchestrator decision, scored for the orchestrator-credit overlay."""
    reward = round(build.wait(DECISION_REWARD), 3)
    props = {"role": role, "decision": decision, **build.tokens(DECISION_TOKENS), "reward": reward}
    if subagents is not None:
        props["subagents"] = subagents
    props["credit"] = {"orchestrator": reward}
    return props


def _run_group(
    build: _Builder,
    name: str,
    spawn: int,
    group: range,
    roles: list[str],
    plans: list[list[str]],
    despawn_workers: set[int],
) -> tuple[int, list[_Worker]]:
    """One manager's life: plan, spawn its workers, route their messages, aggregate, return to the lead."""
    t = build.events[spawn]["t"] + build.wait(STARTUP_S)
    plan = build.add(t, "orchestrator_decision", name, _decision(build, "manager", "delegate", len(group)))
    build.link(spawn, plan, "spawn")
    own = [(build.events[plan]["t"], plan)]
    t += build.wait(DECISION_S)
    finished = []
    for worker in group:
        t += build.wait(SPAWN_GAP_S)
        role = roles[worker]
        child = f"{role}-{worker + 1:0{len(str(len(roles)))}d}"
        worker_spawn = build.add(t, "spawn", name, {"role": "manager", "to": child, "child_role": role})
        build.link(plan, worker_spawn, "causal")
        own.append((build.events[worker_spawn]["t"], worker_spawn))
        finished.append(_run_worker(build, child, role, worker_spawn, plans[worker], name))
    last_return_t = 0.0
    for worker, done in zip(group, finished):
        return_t = build.events[done.return_index]["t"]
        last_return_t = max(last_return_t, return_t)
        if worker in despawn_workers:
            despawn = build.add(
                return_t + build.wait(DESPAWN_GAP_S), "despawn", name, {"role": "manager", "to": done.name}
            )
            build.link(done.return_index, despawn, "causal")
            own.append((build.events[despawn]["t"], despawn))
    quality = round(sum(w.quality for w in finished) / len(finished), 3)
    aggregate = build.add(
        last_return_t + build.wait(AGGREGATE_S),
        "aggregate",
        name,
        {"role": "manager", "inputs": len(finished), **build.tokens(AGGREGATE_TOKENS), "reward": quality},
    )
    for done in finished:
        build.link(done.return_index, aggregate, "return")
        build.events[done.return_index]["credit"] = {"agent": round(done.quality / len(finished), 3)}
    manager_return = build.add(
        build.events[aggregate]["t"] + build.wait(THINK_S),
        "return",
        name,
        {
            "role": "manager",
            "from": name,
            "to": LEAD,
            "trusted": True,
            **build.tokens(RETURN_TOKENS),
            "reward": quality,
        },
    )
    build.link(aggregate, manager_return, "aggregate")
    own.extend([(build.events[aggregate]["t"], aggregate), (build.events[manager_return]["t"], manager_return)])
    own.sort()
    _route_messages(build, finished, name, own)
    return manager_return, finished


def _run_worker(build: _Builder, name: str, role: str, spawn: int, plan: list[str], manager: str) -> _Worker:
    """One worker's life: tool rounds and messages in its planned order, then a return to its manager."""
    rng = build.rng
    t = build.events[spawn]["t"] + build.wait(STARTUP_S)
    first_t = round(t, TIME_DECIMALS)
    own: list[tuple[float, int]] = []
    messages = []
    ok = errors = 0
    last_failed = False
    consumed = spawn
    for step, activity in enumerate(plan):
        grown = step * CONTEXT_GROWTH_TOKENS
        if activity == TOOL:
            tool = rng.choice(ROLE_TOOLS[role])
            spec = TOOLS[tool]
            failed = rng.random() < spec.error_rate
            reward = TOOL_ERROR_REWARD if failed else TOOL_OK_REWARD
            call = build.add(
                t,
                "tool_call",
                name,
                {
                    "role": role,
                    "tool": tool,
                    "trusted": True,
                    **build.tokens(TOOL_CALL_TOKENS, grown),
                    "reward": reward,
                    "credit": {"tool": reward},
                },
            )
            result = build.add(
                t + build.wait(spec.latency_s),
                "tool_result",
                tool,
                {"tool": tool, "trusted": spec.trusted, "status": "error" if failed else "ok"},
            )
            build.link(call, result, "tool_dependency")
            build.link(consumed, call, "spawn" if consumed == spawn else "causal")
            own.append((build.events[call]["t"], call))
            consumed = result
            t = build.events[result]["t"] + build.wait(THINK_S)
            errors += failed
            ok += not failed
            last_failed = failed
        else:
            props = {"role": role, "from": name, "to": manager, "trusted": True, **build.tokens(MESSAGE_TOKENS, grown)}
            if rng.random() < MESSAGE_LABEL_SHARE:
                reward = round(build.wait(MESSAGE_REWARD), 3)
                props.update(reward=reward, credit={"message": reward})
            message = build.add(t, "message", name, props)
            build.link(consumed, message, "spawn" if consumed == spawn else "causal")
            own.append((build.events[message]["t"], message))
            messages.append(message)
            consumed = message
            t += build.wait(THINK_S)
    rounds = ok + errors
    quality = round((ok / rounds if rounds else 1.0) * rng.uniform(0.7, 1.0), 3)
    returned = build.add(
        t,
        "return",
        name,
        {
            "role": role,
            "from": name,
            "to": manager,
            "trusted": True,
            **build.tokens(RETURN_TOKENS, len(plan) * CONTEXT_GROWTH_TOKENS),
            "reward": quality,
            "status": "degraded" if last_failed else "ok",
        },
    )
    build.link(consumed, returned, "spawn" if consumed == spawn else "causal")
    own.append((build.events[returned]["t"], returned))
    return _Worker(name, own, messages, returned, first_t, quality, errors, last_failed)


def _route_messages(
    build: _Builder, finished: list[_Worker], manager: str, manager_own: list[tuple[float, int]]
) -> None:
    """Address each message to a peer still at work, else the manager, and link it to the event that reads it."""
    rng = build.rng
    for sender in finished:
        for message in sender.messages:
            sent_t = build.events[message]["t"]
            receiver_name, timeline = manager, manager_own
            if len(finished) > 1 and rng.random() < PEER_MESSAGE_SHARE:
                peer = rng.choice(finished)
                if peer is not sender and peer.own[-1][0] > sent_t:
                    receiver_name, timeline = peer.name, peer.own
            position = bisect_right(timeline, (sent_t, len(build.events)))
            build.events[message]["to"] = receiver_name
            build.link(message, timeline[position][1], "message")


def _finish(build: _Builder, trace_id: str, team: float, workers: list[_Worker]) -> dict:
    """Give ids in time order, add temporal edges, and count costs, rewards and metrics from the events."""
    order = sorted(range(len(build.events)), key=lambda index: (build.events[index]["t"], index))
    width = len(str(len(order)))
    position = [0] * len(order)
    ids = [""] * len(order)
    trace_events = []
    tool_agents = set(TOOLS)
    last_of_agent: dict[str, int] = {}
    temporal = []
    for rank, index in enumerate(order):
        event = build.events[index]
        position[index] = rank
        ids[index] = f"e{rank + 1:0{width}d}"
        trace_events.append({"id": ids[index], **event})
        # A tool serves independent calls, so its results form no timeline of their own.
        if event["agent"] not in tool_agents:
            previous = last_of_agent.get(event["agent"])
            if previous is not None:
                temporal.append((previous, index, "temporal"))
            last_of_agent[event["agent"]] = index
    edges = sorted(build.edges + temporal, key=lambda edge: (position[edge[0]], position[edge[1]]))

    longest = [1] * len(order)
    for src, dst, _ in edges:
        longest[dst] = max(longest[dst], longest[src] + 1)

    counts = dict.fromkeys(COORDINATION_TYPES + ("tool_call",), 0)
    tokens = 0
    rewards = []
    for event in trace_events:
        if event["type"] in counts:
            counts[event["type"]] += 1
        tokens += event.get("tokens_in", 0) + event.get("tokens_out", 0)
        if "reward" in event:
            rewards.append(event["reward"])
    tool_rewards = [e["reward"] for e in trace_events if e["type"] == "tool_call"]
    wall_clock_s = trace_events[-1]["t"]
    # Work done across workers divided by the wall clock, the speedup of TAXONOMY.md §6.
    speedup = sum(trace_events[position[w.return_index]]["t"] - w.first_t for w in workers) / wall_clock_s
    efficiency = round(speedup / len(workers), 3)
    tool_errors = sum(w.tool_errors for w in workers)
    degraded = sum(w.degraded for w in workers)
    return {
        "trace_id": trace_id,
        "task_id": "synthetic-swarm-market-research",
        "system": "orchestrace.generate",
        "topology": "swarm",
        "events": trace_events,
        "edges": [{"src": ids[src], "dst": ids[dst], "type": type_} for src, dst, type_ in edges],
        "rewards": {
            "team": team,
            "orchestration": efficiency,
            "tool": round(sum(tool_rewards) / len(tool_rewards), 3) if tool_rewards else 0.0,
            "process": round(sum(rewards) / len(rewards), 3),
        },
        "costs": {
            "tokens": tokens,
            "wall_clock_s": wall_clock_s,
            "tool_calls": counts["tool_call"],
            "messages": counts["message"],
        },
        "metrics": {
            "task_success": int(team >= SUCCESS_THRESHOLD),
            "parallelism_speedup": round(speedup, 3),
            "parallelism_efficiency": efficiency,
            "critical_steps": max(longest),
            "protocol_overhead": round(sum(counts[t] for t in COORDINATION_TYPES) / len(order), 3),
            "error_amplification": round(degraded / tool_errors, 3) if tool_errors else 0.0,
        },
    }
