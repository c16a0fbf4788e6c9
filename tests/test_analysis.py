"""Metrics, computed credit and audit rules on small hand-built traces with known answers."""

import copy
import dataclasses
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from anchors import anchor
from conftest import post_json

from app.domain.analysis import ANALYSIS_VERSION, METRICS_VERSION, analysis_version
from app.domain.audit import (
    AUDIT_RULES,
    MAX_FINDINGS_PER_RULE,
    REACH_EVENTS,
    RULES,
    SEVERITIES,
    SUMMARIES,
    Rule,
    audit,
    finding,
    group_by_rule,
)
from app.domain.credit import assign, correlation, rollup
from app.domain.metrics import compute_metrics, team_members
from app.store import traces as trace_store
from app.store.sql import traced_statements

REPO = Path(__file__).resolve().parent.parent
SAMPLES = sorted((REPO / "sample_traces").glob("*.json"))
MIGRATION_0010 = next((REPO / "migrations").glob("0010_*.sql"))


def ev(id, t, type, agent, **extra):
    return {"id": id, "t": t, "type": type, "agent": agent, **extra}


def edge(src, dst, type="causal"):
    return {"src": src, "dst": dst, "type": type}


def trace_of(events, edges, **top):
    return {"trace_id": "h", "task_id": "t", "events": events, "edges": edges, "rewards": {"team": 1.0},
            "costs": {"tokens": 0, "wall_clock_s": 100, "tool_calls": sum(e["type"] == "tool_call" for e in events),
                      "messages": sum(e["type"] == "message" for e in events)}, **top}


# A lead spawns a manager, which spawns two workers; one worker calls a tool; both return; the lead aggregates.
TREE = trace_of(
    [ev("d", 0, "orchestrator_decision", "lead", role="lead"),
     ev("s1", 1, "spawn", "lead", to="mgr"),
     ev("s2", 2, "spawn", "mgr", to="w1"),
     ev("s3", 2, "spawn", "mgr", to="w2"),
     ev("c", 3, "tool_call", "w1", tool="search", tokens_in=100, tokens_out=50),
     ev("r", 4, "tool_result", "search", tool="search", trusted=False),
     ev("m", 5, "message", "w2", to="w1", tokens=30),
     ev("ret1", 6, "return", "w1", to="mgr"),
     ev("ret2", 7, "return", "w2", to="mgr"),
     ev("agg1", 8, "aggregate", "mgr"),
     ev("ret3", 9, "return", "mgr", to="lead"),
     ev("agg", 10, "aggregate", "lead")],
    [edge("d", "s1"), edge("s1", "s2", "spawn"), edge("s1", "s3", "spawn"), edge("s2", "c", "spawn"),
     edge("c", "r", "tool_dependency"), edge("r", "ret1"), edge("s3", "m", "spawn"), edge("m", "ret1", "message"),
     edge("ret1", "agg1", "return"), edge("ret2", "agg1", "return"), edge("agg1", "ret3"),
     edge("ret3", "agg", "return"), edge("c", "ret1", "temporal")])


def test_metrics_of_a_known_tree():
    m = compute_metrics(TREE)
    assert (m["events"], m["edges"], m["agents"], m["spawns"]) == (12, 13, 4, 3)
    assert m["max_fanout"] == 2 and m["spawn_depth"] == 2
    # lead 0-10, mgr 1-9 (its last return), w1 2-6, w2 2-7: all four alive from t 2 to 6
    assert m["max_concurrency"] == 4
    assert m["work_s"] == 10 + 8 + 4 + 5 and m["span_s"] == 10
    assert m["parallelism_speedup"] == pytest.approx(2.7)
    assert m["critical_path"] == ["d", "s1", "s2", "c", "r", "ret1", "agg1", "ret3", "agg"]
    assert m["critical_path_steps"] == 9 and m["critical_path_s"] == 10
    assert m["protocol_overhead"] == pytest.approx(10 / 12)
    assert (m["tool_calls"], m["messages"]) == (1, 1)
    assert m["tokens_by_agent"] == {"w1": 150, "w2": 30} and m["tokens"] == 180


def test_back_in_time_and_cyclic_edges_do_not_break_the_path():
    t = copy.deepcopy(TREE)
    t["edges"] += [edge("agg", "d"), edge("s2", "s3"), edge("s3", "s2")]
    m = compute_metrics(t)
    assert m["critical_path_steps"] == 9
    reasons = sorted(x["reason"] for x in m["ignored_edges"])
    assert reasons == ["closes a cycle among simultaneous events", "points back in time"]


@pytest.mark.parametrize("rule", ["uniform", "causal", "critical_path"])
def test_credit_rules_sum_to_the_channel(rule):
    shares = assign(TREE, rule, 0.9)
    assert sum(shares) == pytest.approx(0.9)
    assert len(shares) == 12


def test_causal_and_critical_path_credit_choose_the_right_events():
    causal = assign(TREE, "causal", 1.0)
    # every event has a path to the final aggregate except none: all 12 share
    assert sum(1 for s in causal if s) == 12
    t = copy.deepcopy(TREE)
    t["events"].append(ev("stray", 11, "message", "w2"))
    t["costs"]["messages"] += 1
    causal = assign(t, "causal", 1.0)
    assert causal[-1] == 0 and causal[0] == pytest.approx(1 / 12)
    path = assign(TREE, "critical_path", 1.0)
    ids = [e["id"] for e, s in zip(TREE["events"], path) if s]
    assert ids == ["d", "s1", "s2", "c", "r", "ret1", "agg1", "ret3", "agg"]


def test_rollup_to_the_eight_units():
    values = [1.0] * 12
    units = rollup(TREE, values)
    assert set(units) == {"token", "tool call", "message", "turn", "agent", "role", "orchestrator", "team"}
    assert units["team"] == [{"key": "team", "credit": 12.0, "events": 12}]
    assert {r["key"]: r["credit"] for r in units["tool call"]} == {"c": 2.0}  # the call and its result
    assert {r["key"]: r["credit"] for r in units["agent"]}["mgr"] == 4.0
    assert {r["key"] for r in units["orchestrator"]} == {"d", "s1"}
    assert {r["key"]: r["events"] for r in units["message"]} == {"m": 1}
    assert {r["key"]: r["credit"] for r in units["token"]} == {"c": pytest.approx(1 / 150), "m": pytest.approx(1 / 30)}
    assert sum(r["events"] for r in units["turn"]) == 12


def test_correlation():
    assert correlation([1, 2, 3, None], [2, 4, 6, 1])["pearson"] == pytest.approx(1.0)
    assert correlation([1, None], [1, 2]) == {"n": 1, "pearson": None}


def rules_of(trace) -> set[str]:
    return {f["rule"] for f in audit(trace)}


def test_the_known_tree_has_only_the_untrusted_flow_it_was_built_with():
    t = copy.deepcopy(TREE)
    t["edges"].append(edge("r", "c2", "causal"))
    t["events"].append(ev("c2", 4.5, "tool_call", "w1", tool="write"))
    t["costs"]["tool_calls"] += 1
    findings = audit(t)
    assert {f["rule"] for f in findings} == {"untrusted_flow"}
    assert findings[0]["events"] == ["r", "c2"] and findings[0]["severity"] == "warning"
    assert findings[0]["message"] == ("untrusted r (search) reaches 1 tool_call by 1 agent (w1), "
                                      "no safety_event on the way: c2")
    guarded = copy.deepcopy(t)
    guarded["events"].append(ev("g", 4.2, "safety_event", "guard"))
    guarded["edges"] = [e for e in guarded["edges"] if e != edge("r", "c2")] + [edge("r", "g", "safety_flow"),
                                                                            edge("g", "c2", "safety_flow")]
    assert "untrusted_flow" not in rules_of(guarded)


def test_untrusted_flow_is_one_finding_per_source_with_its_reach():
    """Two untrusted results; the first reaches three actions by two agents over several paths (a path per
    action, and two paths to one of them), the second only one: two findings, not one per path."""
    t = copy.deepcopy(TREE)
    t["events"] += [ev("c2", 4.5, "tool_call", "w1", tool="write"), ev("c3", 5.5, "tool_call", "w2", tool="write"),
                    ev("s4", 5.6, "spawn", "w2", to="w3"), ev("r2", 5.7, "tool_result", "write", trusted=False),
                    ev("c4", 5.8, "tool_call", "w2", tool="write"), ev("g", 5.9, "safety_event", "guard"),
                    ev("c5", 6.5, "tool_call", "w1", tool="write")]
    t["costs"]["tool_calls"] += 4
    t["edges"] += [edge("r", "c2"), edge("r", "m"), edge("m", "c3", "message"), edge("c2", "c3"), edge("c3", "s4"),
                   edge("r2", "c4"), edge("c4", "g", "safety_flow"), edge("g", "c5", "safety_flow")]
    flows = [f for f in audit(t) if f["rule"] == "untrusted_flow"]
    assert [f["events"] for f in flows] == [["r", "c2", "c3", "s4"], ["r2", "c4"]]
    assert flows[0]["message"] == ("untrusted r (search) reaches 2 tool_calls and 1 spawn by 2 agents (w1, w2), "
                                   "no safety_event on the way: c2, c3, s4")
    assert "c5" not in flows[1]["events"]  # the safety_event stops the flow


def test_untrusted_flow_names_the_first_actions_and_counts_them_all():
    events = [ev("u", 0, "tool_result", "web", tool="web", trusted=False)]
    events += [ev(f"c{k}", k + 1, "tool_call", f"a{k % 7}", tool="x") for k in range(60)]
    edges = [edge("u", "c0")] + [edge(f"c{k}", f"c{k + 1}") for k in range(59)]
    (flow,) = [f for f in audit(trace_of(events, edges)) if f["rule"] == "untrusted_flow"]
    assert flow["message"].startswith("untrusted u (web) reaches 60 tool_calls by 7 agents (a0, a1, a2, a3, a4, …)")
    assert flow["message"].endswith(": c0, c1, c2, c3, c4, …")
    assert flow["events"] == ["u"] + [f"c{k}" for k in range(REACH_EVENTS)]


def test_findings_group_by_rule_errors_first_then_the_noisiest():
    findings = [finding("no_stop", "x", []), *[finding("untrusted_flow", str(k), []) for k in range(3)],
                finding("time_order", "t", []), finding("self_loop", "s", [])]
    groups = group_by_rule(findings)
    assert [(g["rule"], len(g["findings"])) for g in groups] == [
        ("time_order", 1), ("untrusted_flow", 3), ("self_loop", 1), ("no_stop", 1)]
    assert groups[1]["summary"] and groups[1]["severity"] == "warning"


def test_agents_are_team_members_not_tools_nor_people():
    t = copy.deepcopy(TREE)
    t["events"][:0] = [ev("ask", 0, "message", "user", to="lead"),
                       ev("hi", 0, "human_intervention", "maintainer", role="human", to="lead")]
    t["events"].append(ev("final", 10, "return", "lead", to="user"))
    assert team_members(t["events"]) == ["lead", "mgr", "w1", "w2"]  # not `search` (a tool), `user`, `maintainer`
    m = compute_metrics(t)
    assert m["agents"] == 4 and m["max_concurrency"] == 4  # the user's presence is no agent's lifetime


def test_the_sql_and_python_agent_rules_agree(client, db):
    """Stored n_agents and the trace page's facet (SQL) count what the metrics count (Python)."""
    traces = [json.loads(path.read_text()) for path in SAMPLES]
    people = copy.deepcopy(TREE)
    people["events"][:0] = [ev("ask", 0, "message", "user", to="lead"),
                            ev("hi", 0, "human_intervention", "maintainer", role="human", to="lead")]
    traces.append(people)
    assert post_json(client, traces).status_code == 201
    for trace in traces:
        expected = len(team_members(trace["events"]))
        assert trace_store.read_trace_summary(db, trace["trace_id"])["agents"] == expected, trace["trace_id"]
        assert compute_metrics(trace)["agents"] == expected
        facets = trace_store.event_facets(db, trace["trace_id"])["agent"]
        assert sum(row["kind"] == "agent" for row in facets) == expected
    kinds = {row["value"]: row["kind"] for row in trace_store.event_facets(db, "h")["agent"]}
    assert (kinds["user"], kinds["maintainer"], kinds["search"], kinds["lead"]) == ("person", "person", "tool", "agent")


def test_the_trace_pages_facets_count_what_a_hand_count_says_most_first_in_one_read(client, db):
    traces = [json.loads(path.read_text()) for path in SAMPLES]
    assert post_json(client, traces).status_code == 201
    for trace in traces:
        with traced_statements() as ran:
            facets = trace_store.event_facets(db, trace["trace_id"])
        assert len([sql for sql, *_ in ran if "FROM events" in sql]) == 1  # a lake pays each read's round trips
        for facet in ("type", "agent", "role"):
            counts = Counter(event.get(facet) for event in trace["events"])
            expected = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0] is None, kv[0] or ""))
            assert [(row["value"], row["n"]) for row in facets[facet]] == expected, (trace["trace_id"], facet)


def test_stored_agent_counts_are_made_again_by_the_rule(client, db):
    """migrations/0010 recounts n_agents stored by the old rule (which counted `user` and people)."""
    harness = json.loads((SAMPLES[0].parent / "harness.json").read_text())
    assert post_json(client, harness).status_code == 201
    db.execute("UPDATE traces SET n_agents = 7")  # what the old rule stored: `user` counted
    db.execute(MIGRATION_0010.read_text())
    assert trace_store.read_trace_summary(db, harness["trace_id"])["agents"] == 6 == compute_metrics(harness)["agents"]


def test_a_run_ends_with_the_root_answering_the_user_or_with_a_handoff():
    t = copy.deepcopy(TREE)
    t["events"][:0] = [ev("ask", 0, "message", "user", to="lead")]
    t["events"].append(ev("final", 10, "return", "lead", to="user"))
    assert "orphan_return" not in rules_of(t)
    t["events"][8]["to"] = "user"  # w2 answers the user, bypassing mgr...
    assert "orphan_return" in rules_of(t)
    t["events"].append(ev("handoff", 7, "despawn", "mgr", to="w2"))  # ...which is right once mgr handed off
    assert "orphan_return" not in rules_of(t)


def broken(**changes):
    t = copy.deepcopy(TREE)
    for key, value in changes.items():
        value(t)
    return t


@pytest.mark.parametrize("rule, mutate", [
    ("time_order", lambda t: t["edges"].append(edge("agg", "d", "causal"))),
    ("act_before_spawn", lambda t: t["events"].append(ev("early", 0.5, "message", "w1"))),
    ("act_after_despawn", lambda t: t["events"].extend([ev("bye", 8.5, "despawn", "lead", to="w2"),
                                                        ev("late", 9.5, "message", "w2")])),
    ("leaked_agent", lambda t: t["events"].remove(next(e for e in t["events"] if e["id"] == "ret2"))
     or t["edges"].remove(edge("ret2", "agg1", "return"))),
    ("orphan_return", lambda t: t["events"][8].update(to="lead")),
    ("orphan_return", lambda t: t["events"].append(ev("ghost", 6.5, "return", "w9", to="lead"))),
    ("empty_aggregate", lambda t: t["edges"].remove(edge("ret3", "agg", "return"))),
    ("cost_mismatch", lambda t: t["costs"].update(tool_calls=5)),
    ("no_stop", lambda t: t["events"].append(ev("last", 20, "message", "lead"))),
    ("disconnected", lambda t: t["events"].append(ev("alone", 5, "human_intervention", "user"))),
    ("duplicate_edge", lambda t: t["edges"].append(edge("d", "s1"))),
    ("self_loop", lambda t: t["edges"].append(edge("m", "m"))),
    ("cycle", lambda t: t["edges"].extend([edge("s2", "s3"), edge("s3", "s2")])),
])
def test_each_rule_fires_on_a_trace_built_to_trigger_it(rule, mutate):
    t = copy.deepcopy(TREE)
    mutate(t)
    findings = [f for f in audit(t) if f["rule"] == rule]
    assert findings, rule
    assert all(f["severity"] == RULES[rule] for f in findings)


def test_published_example_has_no_error_finding():
    example = json.loads(anchor("example_trace.json").read_text())
    assert [f for f in audit(example) if f["severity"] == "error"] == []


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_samples_have_no_structural_errors(path):
    trace = json.loads(path.read_text())
    assert [f for f in audit(trace) if f["severity"] == "error"] == []
    m = compute_metrics(trace)
    assert m["agents"] >= 3 and m["critical_path_steps"] >= 5


def test_metrics_audit_and_credit_api(client):
    trace = copy.deepcopy(TREE)
    assert post_json(client, trace).status_code == 201
    metrics = client.get("/api/traces/h/metrics").json()
    assert metrics["critical_path_steps"] == 9 and metrics["max_concurrency"] == 4
    findings = client.get("/api/traces/h/audit").json()["findings"]
    assert {f["rule"] for f in findings} <= set(RULES)
    credit = client.get("/api/traces/h/credit", params={"rule": "critical_path", "channel": "team"}).json()
    assert credit["total"] == pytest.approx(1.0) and len(credit["events"]) == 12
    assert credit["rollup"]["team"][0]["credit"] == pytest.approx(1.0)
    assert client.get("/api/traces/h/credit", params={"channel": "nope"}).status_code == 422
    assert client.get("/api/traces/h/credit", params={"channel": "team", "rule": "magic"}).status_code == 422
    assert client.get("/api/traces/nope/metrics").status_code == 404
    overlay = client.get("/api/traces/h/overlay", params={"channel": "computed credit: uniform × team"}).json()
    assert overlay["values"] == [pytest.approx(1 / 12)] * 12
    client.post("/api/annotations", json={"trace_id": "h", "event_id": "d", "reviewer": "ada", "credit": 0.5})
    client.post("/api/annotations", json={"trace_id": "h", "event_id": "agg", "reviewer": "ada", "credit": 1.0})
    human = client.get("/api/traces/h/credit", params={"rule": "critical_path", "channel": "team"}).json()
    assert human["human_correlation"]["n"] == 2


def test_every_audit_rule_is_one_record_and_the_rule_lists_are_read_from_them():
    assert AUDIT_RULES and all(isinstance(rule, Rule) for rule in AUDIT_RULES)
    names = [rule.name for rule in AUDIT_RULES]
    assert len(set(names)) == len(names)
    for rule in AUDIT_RULES:
        assert re.fullmatch(r"[a-z_]+", rule.name) and rule.severity in SEVERITIES and rule.summary
        assert callable(rule.check) and isinstance(rule.version, int) and rule.version >= 1
    assert RULES == {rule.name: rule.severity for rule in AUDIT_RULES}
    assert [SEVERITIES.index(severity) for severity in RULES.values()] == sorted(SEVERITIES.index(s)
                                                                                 for s in RULES.values())
    assert SUMMARIES == {rule.name: rule.summary for rule in AUDIT_RULES}


def test_findings_come_in_the_order_of_the_rules():
    t = copy.deepcopy(TREE)
    t["edges"] += [edge("m", "m"), edge("s2", "s3"), edge("s3", "s2"), edge("d", "s1")]
    t["events"][0]["t"] = 11  # the decision now comes last: no_stop is quiet, d → s1 goes back in time
    rules = list(dict.fromkeys(f["rule"] for f in audit(t)))
    assert len(rules) > 3 and rules == [rule.name for rule in AUDIT_RULES if rule.name in rules]


def test_the_analysis_version_is_made_from_the_rules_and_the_metrics_version():
    assert ANALYSIS_VERSION == analysis_version() and 0 < ANALYSIS_VERSION < 2**31
    changed = [dataclasses.replace(rule, version=rule.version + 1) if rule.name == "cycle" else rule
               for rule in AUDIT_RULES]
    new_rule = Rule("lonely_event", "info", "an event without edges", lambda trace, g: [])
    others = {analysis_version(tuple(changed)), analysis_version((*AUDIT_RULES, new_rule)),
              analysis_version(AUDIT_RULES[:-1]), analysis_version(AUDIT_RULES[::-1]),
              analysis_version(metrics_version=METRICS_VERSION + 1)}
    assert len(others) == 5 and ANALYSIS_VERSION not in others
    assert analysis_version(tuple(dataclasses.replace(rule) for rule in AUDIT_RULES)) == ANALYSIS_VERSION


def test_the_api_doc_gives_every_rule_with_its_severity_in_audit_order():
    doc = (REPO / "docs" / "api.md").read_text()
    table = doc.split("| rule | severity |", 1)[1].split("\n\n", 1)[0]
    assert re.findall(r"^\| `(\w+)` \| (\w+) \|", table, re.MULTILINE) == [
        (rule.name, rule.severity) for rule in AUDIT_RULES]


def test_stored_findings_read_back_as_they_were_found(client):
    trace = copy.deepcopy(TREE)
    trace["edges"] += [edge("m", "m")] * (MAX_FINDINGS_PER_RULE + 5) + [edge("s2", "s3"), edge("s3", "s2")]
    assert post_json(client, trace).status_code == 201
    found = client.get("/api/traces/h/audit").json()["findings"]  # computed and stored
    assert found == audit(trace) and any(f["message"] == "5 more self_loop findings not listed" for f in found)
    assert client.get("/api/traces/h/audit").json()["findings"] == found  # read back
