"""Exports for RL trainers: rLLM episodes, TRL stepwise-supervision rows and the credit table, parsed back and
checked field by field against the labels and the trace they come from."""

import json

import pytest
from conftest import make_trace, post_json

from app.domain.metrics import is_team_act
from app.services import exports
from app.store.sql import traced_statements

# The keys rLLM's Step, Trajectory and Episode write in their to_dict (rllm.agents.agent).
RLLM_STEP = {"prompt_ids", "response_ids", "logprobs", "chat_completions", "observation", "thought", "action",
             "model_response", "model_output", "info", "reward", "done", "mc_return", "advantage", "weight_version"}
RLLM_TRAJECTORY = {"uid", "name", "task", "steps", "reward", "info"}
RLLM_EPISODE = {"id", "task", "termination_reason", "is_correct", "trajectories", "metrics", "info"}
RLLM_TERMINATION = {"max_prompt_length_exceeded", "max_response_length_exceeded", "env_done", "max_turns_exceeded",
                    "timeout", "unknown", "error"}


@pytest.fixture
def labelled(client):
    trace = make_trace("rl", events=[
        {"id": "e1", "t": 0, "type": "orchestrator_decision", "agent": "lead", "role": "lead", "summary": "split"},
        {"id": "e2", "t": 1, "type": "spawn", "agent": "lead", "role": "lead", "to": "w", "summary": "go"},
        {"id": "e3", "t": 2, "type": "tool_call", "agent": "w", "role": "worker", "tool": "search", "summary": "q"},
        {"id": "e4", "t": 3, "type": "tool_result", "agent": "search", "tool": "search", "summary": "hits"},
        {"id": "e5", "t": 4, "type": "return", "agent": "w", "role": "worker", "to": "lead", "summary": "found"},
        {"id": "e6", "t": 5, "type": "aggregate", "agent": "lead", "role": "lead", "summary": "done"},
    ], edges=[{"src": "e1", "dst": "e2", "type": "causal"}, {"src": "e2", "dst": "e3", "type": "spawn"},
              {"src": "e3", "dst": "e4", "type": "tool_dependency"}, {"src": "e5", "dst": "e6", "type": "return"}])
    assert post_json(client, trace).status_code == 201
    for reviewer, event, fields in [("ada", "e1", {"credit": 0.8, "stop": "right"}),
                                    ("bo", "e1", {"credit": 0.4, "counterfactual": "yes"}),
                                    ("ada", "e5", {"credit": -0.5, "credit_unit": "message"}),
                                    ("ada", "e3", {"note": "no credit given"})]:
        body = {"trace_id": "rl", "event_id": event, "reviewer": reviewer} | fields
        assert client.post("/api/annotations", json=body).status_code == 201
    return trace


def export(client, fmt: str, **params) -> list[dict]:
    response = client.get("/api/annotations/export", params={"format": fmt} | params)
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/jsonl")
    assert ".jsonl" in response.headers["content-disposition"]
    return [json.loads(line) for line in response.text.splitlines()]


def computed(client, trace_id="rl") -> list[float]:
    body = client.get(f"/api/traces/{trace_id}/credit", params={"channel": "team", "rule": "causal"}).json()
    return [event["credit"] for event in body["events"]]


def test_rllm_episode_has_rllm_fields_and_rewards_from_labels_else_computed_credit(client, labelled):
    (episode,) = export(client, "rllm", trace_id="rl")
    assert set(episode) == RLLM_EPISODE
    assert episode["id"] == "task-1:rl" and episode["termination_reason"] in RLLM_TERMINATION
    assert episode["is_correct"] is True and episode["metrics"]["reward_team"] == 1
    members = list(dict.fromkeys(e["agent"] for e in labelled["events"] if is_team_act(e)))
    assert [t["name"] for t in episode["trajectories"]] == members == ["lead", "w"]  # the tool is no trajectory
    machine = computed(client)
    lead, worker = episode["trajectories"]
    assert set(lead) == RLLM_TRAJECTORY and lead["uid"] == "rl:lead" and lead["info"]["role"] == "lead"
    for step in lead["steps"] + worker["steps"]:
        assert set(step) == RLLM_STEP
        assert step["prompt_ids"] == step["response_ids"] == step["logprobs"] == [] and step["model_output"] is None
    assert [s["info"]["event"]["id"] for s in lead["steps"]] == ["e1", "e2", "e6"]
    assert [s["info"]["event"]["id"] for s in worker["steps"]] == ["e3", "e5"]
    assert lead["steps"][0]["reward"] == pytest.approx(0.6)  # mean of 0.8 and 0.4
    assert lead["steps"][0]["info"]["reward_source"] == "human"
    assert lead["steps"][1]["reward"] == pytest.approx(machine[1])  # e2 unlabelled: computed credit
    assert lead["steps"][1]["info"]["reward_source"] == "computed"
    assert worker["steps"][0]["info"]["reward_source"] == "computed"  # a note but no credit
    assert worker["steps"][1]["reward"] == -0.5
    for trajectory in (lead, worker):
        rewards = [s["reward"] for s in trajectory["steps"]]
        assert trajectory["reward"] == pytest.approx(sum(rewards))
        assert [s["mc_return"] for s in trajectory["steps"]] == pytest.approx(
            [sum(rewards[i:]) for i in range(len(rewards))])
        assert sum(s["advantage"] for s in trajectory["steps"]) == pytest.approx(0)
        assert [s["done"] for s in trajectory["steps"]] == [False] * (len(rewards) - 1) + [True]
    assert worker["steps"][0]["action"] == {"type": "tool_call", "tool": "search"}
    assert worker["steps"][0]["model_response"] == "q" and lead["steps"][1]["observation"] == "[lead orchestrator_decision] split"


def test_trl_stepwise_rows_label_each_step_by_its_reward_sign(client, labelled):
    rows = export(client, "trl_stepwise", trace_id="rl")
    assert [row["agent"] for row in rows] == ["lead", "w"]
    (episode,) = export(client, "rllm", trace_id="rl")
    for row, trajectory in zip(rows, episode["trajectories"]):
        assert isinstance(row["prompt"], str) and row["agent"] in row["prompt"]
        assert len(row["completions"]) == len(row["labels"]) == len(trajectory["steps"])
        assert row["labels"] == [step["reward"] > 0 for step in trajectory["steps"]]
        assert all(isinstance(text, str) and text for text in row["completions"])
    assert rows[1]["labels"][1] is False  # e5 labelled -0.5


def test_trl_rows_load_with_the_datasets_library(client, labelled, tmp_path):
    datasets = pytest.importorskip("datasets", reason="the `datasets` library is not installed")
    path = tmp_path / "trl.jsonl"
    path.write_bytes(client.get("/api/annotations/export", params={"format": "trl_stepwise"}).content)
    loaded = datasets.load_dataset("json", data_files=str(path), split="train")
    assert set(loaded.column_names) >= {"prompt", "completions", "labels"} and len(loaded) == 2


def test_credit_table_has_one_row_per_labelled_event(client, labelled):
    rows = {row["event_id"]: row for row in export(client, "credit_jsonl")}
    assert sorted(rows) == ["e1", "e3", "e5"]
    machine = computed(client)
    first = rows["e1"]
    assert (first["trace_id"], first["event_type"], first["agent"], first["role"]) == ("rl", "orchestrator_decision",
                                                                                     "lead", "lead")
    assert first["credit_mean"] == pytest.approx(0.6) and first["credit_by_reviewer"] == {"ada": 0.8, "bo": 0.4}
    assert first["computed_credit"] == pytest.approx(machine[0])
    assert first["counterfactual"] == {"bo": "yes"} and first["stop"] == {"ada": "right"}
    assert rows["e5"]["unit"] == "message" and rows["e3"]["credit_mean"] is None


def test_every_trace_is_exported_without_a_trace_id_and_an_unknown_one_is_404(client, labelled):
    assert post_json(client, make_trace("other")).status_code == 201
    assert [episode["task"]["trace_id"] for episode in export(client, "rllm")] == ["other", "rl"]
    assert {row["trace_id"] for row in export(client, "credit_jsonl")} == {"rl"}  # only labelled traces
    assert client.get("/api/annotations/export", params={"format": "rllm", "trace_id": "nope"}).status_code == 404


def test_a_channel_a_trace_lacks_leaves_unlabelled_steps_without_reward(client, labelled):
    (episode,) = export(client, "rllm", trace_id="rl", channel="no-such-channel")
    steps = [step for trajectory in episode["trajectories"] for step in trajectory["steps"]]
    assert {s["info"]["reward_source"] for s in steps} == {"human", "none"}
    assert all(s["reward"] == 0 for s in steps if s["info"]["reward_source"] == "none")


def test_a_queue_scoped_export_uses_its_labels_and_an_adjudicated_credit_wins(client, labelled):
    body = {"name": "decisions", "filter": {"trace_ids": ["rl"], "event_types": ["orchestrator_decision"]},
            "fields": ["credit"], "reviewers": ["ada", "bo"], "overlap": 2}
    queue = client.post("/api/queues", json=body).json()
    for reviewer, credit in (("ada", 1.0), ("bo", -1.0)):
        label = {"trace_id": "rl", "event_id": "e1", "reviewer": reviewer, "credit": credit, "queue_id": queue["id"]}
        assert client.post("/api/annotations", json=label).status_code == 201
    (episode,) = export(client, "rllm", queue_id=queue["id"])
    first = episode["trajectories"][0]["steps"][0]
    assert (first["reward"], first["info"]["reward_source"]) == (0.0, "disputed")  # two labels, 1 and -1, unsettled
    worker_return = episode["trajectories"][1]["steps"][1]
    assert worker_return["info"]["reward_source"] == "computed"  # ada's -0.5 on e5 was not saved in the queue
    settle = {"label": {"credit": 0.25}, "note": "half"}
    assert client.post(f"/api/queues/{queue['id']}/items/1/adjudicate", json=settle).status_code == 201
    for scope in ({"queue_id": queue["id"]}, {"trace_id": "rl"}):
        (episode,) = export(client, "rllm", **scope)
        first = episode["trajectories"][0]["steps"][0]
        assert (first["reward"], first["info"]["reward_source"]) == (0.25, "adjudicated")
    rows = {row["event_id"]: row for row in export(client, "credit_jsonl", queue_id=queue["id"])}
    assert list(rows) == ["e1"] and rows["e1"]["adjudicated"] == {"credit": 0.25}
    assert rows["e1"]["credit_by_reviewer"] == {"ada": 1.0, "bo": -1.0}
    csv_rows = client.get("/api/annotations/export", params={"format": "json", "queue_id": queue["id"]}).json()
    assert {(row["reviewer"], row["queue_id"]) for row in csv_rows} == {("ada", queue["id"]), ("bo", queue["id"])}
    assert client.get("/api/annotations/export", params={"format": "rllm", "queue_id": "q-none"}).status_code == 404


@pytest.mark.parametrize("traces, events", [(1000, 200_000), (5, 200_000), (1000, 13)])
def test_an_export_of_many_traces_reads_them_by_chunk_and_gives_each_the_line_it_gives_alone(
        client, labelled, monkeypatch, traces, events):
    """A training run's rollouts are exported a chunk at a time (at most `traces` traces, or `events` events: a
    trace larger than that alone), each chunk's traces and labels in one read each, not a few reads a trace."""
    monkeypatch.setattr(exports, "EXPORT_CHUNK_TRACES", traces)
    monkeypatch.setattr(exports, "EXPORT_CHUNK_EVENTS", events)
    counts = []
    for batch in range(2):
        for i in range(6):
            assert post_json(client, make_trace(f"more-{batch}-{i}")).status_code == 201
            body = {"trace_id": f"more-{batch}-{i}", "event_id": "e1", "reviewer": "ada", "credit": i / 10}
            assert client.post("/api/annotations", json=body).status_code == 201
        with traced_statements() as ran:
            whole = export(client, "rllm")
        counts.append(sum(not sql.startswith("SELECT * FROM postgres_query") for sql, *_ in ran))  # a lake's looks
    ids = ["more-0-0", "more-0-1", "more-0-2", "more-0-3", "more-0-4", "more-0-5", "more-1-0", "more-1-1",
           "more-1-2", "more-1-3", "more-1-4", "more-1-5", "rl"]
    assert [episode["id"].split(":")[1] for episode in whole] == ids
    assert whole == [export(client, "rllm", trace_id=trace_id)[0] for trace_id in ids]
    if traces == 1000 and events == 200_000:  # one chunk of 7, then of 13 traces (a lake may keep some reads)
        assert counts[1] <= counts[0]
    else:  # 2 and 3 chunks of 5 traces; 7 and 13 chunks of one trace
        assert counts[1] > counts[0]
