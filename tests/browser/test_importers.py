"""A Claude Code session imported through the browser: each sub-agent on its own lane, spawned by main."""

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "claude_code"


def test_claude_code_session_shows_sub_agent_lanes(page, live_server):
    page.goto(live_server + "/")
    files = [str(FIXTURES / "parallel.jsonl")] + [str(p) for p in sorted((FIXTURES / "parallel" / "subagents").iterdir())]
    page.set_input_files("#upload-file", files)
    page.click("#upload-submit")
    page.wait_for_selector("#upload-result .upload-ok a")
    page.click("#upload-result .upload-ok a")
    page.wait_for_selector('#graph[data-drawn="true"]')
    lanes = page.evaluate("() => document.getElementById('graph')._fullLayout.yaxis.ticktext")
    spawns = page.evaluate("""() => {
        const gd = document.getElementById("graph");
        const spawnTrace = gd.data.find((t) => t.meta && t.meta.kind === "events" && t.meta.event_type === "spawn");
        const edges = gd.data.find((t) => t.meta && t.meta.kind === "edge" && t.meta.edge_type === "spawn");
        return {events: spawnTrace ? spawnTrace.customdata.length : 0, edges: edges ? edges.x.length / 3 : 0};
    }""")
    assert lanes[0] == "main" or "main" in lanes[:2]
    assert len(lanes) >= 3  # main and the two parallel sub-agents, each on its own lane
    assert spawns["events"] == 2 and spawns["edges"] == 2
