import httpx
def test_probe(live_server, page, ingest):
    assert httpx.get(live_server + "/api/health").json()["status"] == "ok"
    assert httpx.get(live_server + "/static/app.css").status_code == 200
    page.goto(live_server + "/static/app.css")
    assert ingest({"trace_id":"p1","task_id":"t","events":[{"id":"a","t":0,"type":"spawn","agent":"x"}],"edges":[],"rewards":{},"costs":{"tokens":1,"wall_clock_s":1}}) == ["p1"]
    page.goto(live_server + "/")
    assert page.locator('tr[data-trace-id="p1"]').count() == 1

def test_probe_err(page, live_server):
    page.goto(live_server + "/api/health")
    page.evaluate("console.error('boom')")
