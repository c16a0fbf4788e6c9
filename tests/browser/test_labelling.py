"""Keyboard labelling in a real browser: five events labelled with keys only, then found in the export."""

import csv
import io
from pathlib import Path

import httpx

SAMPLE = Path(__file__).resolve().parents[2] / "sample_traces" / "debate.json"
KEYS_AND_CREDITS = [("4", 0.5), ("1", -1.0), ("5", 1.0), ("3", 0.0), ("2", -0.5)]


def test_label_five_events_with_the_keyboard(page, live_server, ingest):
    trace_id = ingest(SAMPLE)[0]
    page.goto(f"{live_server}/reviewer?next=/traces/{trace_id}")
    page.fill("input[name=new_name]", "keyboard-kim")
    page.keyboard.press("Enter")
    page.wait_for_selector('#graph[data-drawn="true"]')
    assert "keyboard-kim" in page.inner_text("#reviewer-name")

    page.keyboard.press("?")
    assert page.is_visible("#shortcuts")
    page.keyboard.press("Escape")

    expected = {}
    for key, credit in KEYS_AND_CREDITS:
        page.keyboard.press("n")  # next event without my label
        page.wait_for_function(
            "() => { const f = document.getElementById('label-form');"
            " return f && f.dataset.eventId === document.getElementById('graph')?.dataset.selected; }")
        event_id = page.get_attribute("#graph", "data-selected")
        page.keyboard.press(key)
        page.wait_for_selector(f'#label-form[data-event-id="{event_id}"] .status.good')
        assert page.inner_text("#label-form .status") == "saved v1"
        expected[event_id] = credit
    assert len(expected) == 5
    assert "labelled 5 / " in page.inner_text("#label-progress")

    fifth = page.get_attribute("#graph", "data-selected")
    page.keyboard.press("k")  # back to the fourth event, then undo its label with u
    # the fifth event's form says version 1 too: wait for the fourth's form, not just any form at version 1
    page.wait_for_function(
        "(fifth) => { const g = document.getElementById('graph'), f = document.getElementById('label-form');"
        " return g.dataset.selected !== fifth && f && f.dataset.eventId === g.dataset.selected"
        " && f.dataset.version === '1'; }", arg=fifth)
    page.keyboard.press("u")
    page.wait_for_function("() => document.getElementById('label-form')?.dataset.version === '2'")
    assert page.inner_text("#label-form .status").startswith("undone: v2")
    undone = page.get_attribute("#graph", "data-selected")

    exported = httpx.get(f"{live_server}/api/annotations/export", params={"format": "csv", "trace_id": trace_id})
    rows = {row["event_id"]: row for row in csv.DictReader(io.StringIO(exported.text))}
    assert set(rows) == set(expected)
    for event_id, credit in expected.items():
        assert rows[event_id]["reviewer"] == "keyboard-kim"
        if event_id == undone:
            assert rows[event_id]["credit"] == "" and rows[event_id]["version"] == "2"
        else:
            assert float(rows[event_id]["credit"]) == credit
