"""Labelled traces in the shapes RL trainers read: rLLM episodes, TRL stepwise supervision, and a flat credit table.

Each exported step's reward is an admin's adjudicated credit on its event when a review queue settled it,
else the reviewers' mean credit when the event is labelled (`disputed` rather than `human` while their credits
disagree and no admin settled it: never a plain human label), else the computed credit (a reward channel spread
over the events by a rule, app.domain.credit); `reward_source` says which. A trace holds no token ids, so rLLM's token fields are present and empty.

rLLM (rllm.agents.agent): an `Episode` per trace (`id` is "task_id:trace_id", as rLLM's "task_id:rollout"),
a `Trajectory` per team member (agents that act: app.domain.metrics.is_team_act), a `Step` per event of that
agent in time order. A step's `mc_return` is the undiscounted sum of its reward and every later one in its
trajectory (rLLM's G_t with gamma 1), and its `advantage` that return less the trajectory's mean return.
TRL (trl's stepwise supervision): per trajectory, `prompt`, the `completions` (each step's text) and `labels`
(True where the step's reward is positive).
"""

from collections import defaultdict

from app.domain.metrics import is_team_act

# rLLM's TerminationReason values for a run that finished and for one whose ending the trace does not tell.
ENV_DONE, UNKNOWN = "env_done", "unknown"
ACTION_KEYS = ("type", "to", "from", "tool", "decision", "child_role")


def step_rewards(n_events: int, human: dict[int, float], computed: list[float] | None,
                 adjudicated: dict[int, float] | None = None, disputed: frozenset = frozenset()) -> tuple[list, list]:
    """Per event: the reward (adjudicated credit, else human mean credit, else computed credit, else 0) and
    where it came from (`disputed` for a human mean of reviewers who disagree)."""
    rewards, sources = [], []
    adjudicated = adjudicated or {}
    for seq in range(n_events):
        if seq in adjudicated:
            rewards.append(adjudicated[seq]), sources.append("adjudicated")
        elif seq in human:
            rewards.append(human[seq]), sources.append("disputed" if seq in disputed else "human")
        elif computed is not None:
            rewards.append(computed[seq]), sources.append("computed")
        else:
            rewards.append(0.0), sources.append("none")
    return rewards, sources


def _trajectories(trace: dict, rewards: list[float]) -> dict[str, list[int]]:
    """Event positions of each team member, in time order (document order among equal times)."""
    by_agent: dict[str, list[int]] = defaultdict(list)
    order = sorted(range(len(trace["events"])), key=lambda seq: (trace["events"][seq]["t"], seq))
    for seq in order:
        event = trace["events"][seq]
        if is_team_act(event):
            by_agent[event["agent"]].append(seq)
    return by_agent


def _observation(trace: dict, seq: int, incoming: dict[str, list[str]], by_id: dict[str, dict]) -> str:
    """What the event answers: the summaries (or types) of the events with an edge into it."""
    parts = []
    for source in incoming.get(trace["events"][seq]["id"], []):
        event = by_id[source]
        parts.append(f"[{event['agent']} {event['type']}] {event.get('summary') or ''}".rstrip())
    return "\n".join(parts)


def rllm_episode(trace: dict, rewards: list[float], sources: list[str]) -> dict:
    """One rLLM Episode (as its to_dict writes it) for a trace."""
    events = trace["events"]
    by_id = {event["id"]: event for event in events}
    incoming: dict[str, list[str]] = defaultdict(list)
    for edge in trace["edges"]:
        incoming[edge["dst"]].append(edge["src"])
    task = {"task_id": trace["task_id"], "trace_id": trace["trace_id"], "system": trace.get("system"),
            "topology": trace.get("topology")}
    trajectories = []
    for agent, positions in _trajectories(trace, rewards).items():
        returns, total = [], 0.0
        for seq in reversed(positions):
            total += rewards[seq]
            returns.append(total)
        returns.reverse()
        baseline = sum(returns) / len(returns)
        steps = [{
            "prompt_ids": [], "response_ids": [], "logprobs": [], "chat_completions": [],
            "observation": _observation(trace, seq, incoming, by_id), "thought": "",
            "action": {key: events[seq][key] for key in ACTION_KEYS if key in events[seq]},
            "model_response": events[seq].get("summary") or "", "model_output": None,
            "info": {"event": events[seq], "reward_source": sources[seq]},
            "reward": rewards[seq], "done": i == len(positions) - 1, "mc_return": returns[i],
            "advantage": returns[i] - baseline, "weight_version": None,
        } for i, seq in enumerate(positions)]
        role = next((events[seq].get("role") for seq in positions if events[seq].get("role")), None)
        trajectories.append({"uid": f"{trace['trace_id']}:{agent}", "name": agent, "task": task, "steps": steps,
                             "reward": sum(rewards[seq] for seq in positions),
                             "info": {"role": role, "trace_id": trace["trace_id"]}})
    metrics = trace.get("metrics", {})
    success = metrics.get("task_success")
    return {
        "id": f"{trace['task_id']}:{trace['trace_id']}", "task": task,
        "termination_reason": ENV_DONE if success is not None else UNKNOWN,
        "is_correct": bool(success) if success is not None else trace["rewards"].get("team", 0) > 0,
        "trajectories": trajectories,
        "metrics": {**metrics, **{f"reward_{name}": value for name, value in trace["rewards"].items()}},
        "info": {"trace_id": trace["trace_id"], "costs": trace["costs"], "rewards": trace["rewards"]},
    }


def trl_stepwise_rows(trace: dict, rewards: list[float]) -> list[dict]:
    """TRL stepwise-supervision rows, one per team member's trajectory."""
    events, rows = trace["events"], []
    for agent, positions in _trajectories(trace, rewards).items():
        role = next((events[seq].get("role") for seq in positions if events[seq].get("role")), None)
        prompt = (f"Task {trace['task_id']} ({trace.get('topology') or 'multi-agent'} system "
                  f"{trace.get('system') or ''}). You are {agent}{f' ({role})' if role else ''}.")
        rows.append({"prompt": prompt,
                     "completions": [f"{events[seq]['type']}: {events[seq].get('summary') or ''}".rstrip()
                                     for seq in positions],
                     "labels": [rewards[seq] > 0 for seq in positions],
                     "trace_id": trace["trace_id"], "agent": agent})
    return rows


def credit_rows(trace: dict, labels_by_event: dict[str, list[dict]], computed: list[float] | None,
                adjudicated: dict[str, dict] | None = None, disputed: frozenset = frozenset()) -> list[dict]:
    """One row per labelled event: its labels' credit (mean and per reviewer), computed credit, answers, the
    final label an admin set in a review queue (null when none), and `reward_source`: `adjudicated`, else
    `disputed` when the reviewers' credits disagree, else `human`."""
    rows, adjudicated = [], adjudicated or {}
    for seq, event in enumerate(trace["events"]):
        labels = labels_by_event.get(event["id"])
        if not labels:
            continue
        credits = {label["reviewer"]: label["credit"] for label in labels if label["credit"] is not None}
        rows.append({
            "trace_id": trace["trace_id"], "event_id": event["id"], "event_type": event["type"],
            "agent": event["agent"], "role": event.get("role"),
            "unit": _agreed(labels, "credit_unit"),
            "credit_mean": sum(credits.values()) / len(credits) if credits else None,
            "credit_by_reviewer": credits,
            "computed_credit": computed[seq] if computed is not None else None,
            "counterfactual": {label["reviewer"]: label["counterfactual"] for label in labels
                               if label["counterfactual"] is not None},
            "stop": {label["reviewer"]: label["stop"] for label in labels if label["stop"] is not None},
            "adjudicated": adjudicated.get(event["id"]),
            "reward_source": "adjudicated" if event["id"] in adjudicated else
            "disputed" if event["id"] in disputed else "human",
        })
    return rows


def _agreed(labels: list[dict], field: str):
    """The field's value when every reviewer who gave one gave the same, else the values by reviewer."""
    given = {label["reviewer"]: label[field] for label in labels if label[field] is not None}
    values = set(given.values())
    return values.pop() if len(values) == 1 else (given or None)
