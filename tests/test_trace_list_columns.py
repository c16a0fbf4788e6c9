"""The trace list's reward columns: by default the three channels most traces of the page report (the table fits
1440 px), the reader's pick (`reward=`, repeated) otherwise, and always the channel it is sorted by."""

import re

from conftest import make_trace, post_json

CHANNELS = ["alpha", "beta", "gamma", "delta", "epsilon"]


def reward_headers(page: str) -> list[str]:
    return re.findall(r'title="reward &#39;([^&]+)&#39;', page) or re.findall(r"title=\"reward '([^']+)'", page)


def seeded(client) -> None:
    traces = []
    for k in range(6):
        trace = make_trace(f"t-{k}")
        # alpha on every trace, beta on five, gamma on four, delta on three, epsilon on one
        trace["rewards"] = {c: 0.1 * k for i, c in enumerate(CHANNELS) if k < 6 - i or (c == "epsilon" and k == 0)}
        traces.append(trace)
    assert post_json(client, traces).status_code == 201


def test_the_three_most_reported_channels_show_by_default(client):
    seeded(client)
    page = client.get("/").text
    assert reward_headers(page) == ["alpha", "beta", "gamma"]
    assert "Reward columns: 3 of 5" in page
    for channel in CHANNELS:
        assert f'name="reward" value="{channel}"' in page


def test_the_reader_picks_the_columns_and_the_sorted_channel_always_shows(client):
    seeded(client)
    assert reward_headers(client.get("/?reward=epsilon&reward=delta").text) == ["delta", "epsilon"]
    assert reward_headers(client.get("/?sort=-reward:epsilon").text) == ["alpha", "beta", "gamma", "epsilon"]
    assert reward_headers(client.get("/?reward=nothing").text) == ["alpha", "beta", "gamma"]
    kept = client.get("/?q=t-&sort=events&reward=beta").text
    assert '<input type="hidden" name="q" value="t-">' in kept and '<input type="hidden" name="sort" value="events">' in kept
