"""A queue's sample is drawn from the sizes of the matching events' strata and reads only the chosen events (a filter
over a training run's rollouts matches hundreds of thousands), and chooses what drawing from every matching event,
loaded, chooses: a seeded sample stays the same."""

import random
import shutil
from collections import defaultdict

import pytest
from conftest import BASE_URL, post_json
from fastapi.testclient import TestClient

from app.domain.generate import generate_swarm
from app.main import create_app
from app.services import queues
from app.settings import Settings
from app.store import queues as queue_store

NO_FILTER = {key: [] for key in queues.FILTER_KEYS if key != "subdecisions"}


def drawn_from_every_event(candidates: list[dict], sample: dict) -> list[dict]:
    """The sample as drawn from every matching event loaded (how queues drew it before): the reference."""
    if sample["n"] >= len(candidates):
        return candidates
    rng = random.Random(sample["seed"])
    if sample["stratify_by"] is None:
        chosen = rng.sample(range(len(candidates)), sample["n"])
    else:
        strata: dict = defaultdict(list)
        for index, row in enumerate(candidates):
            strata[row[sample["stratify_by"]]].append(index)
        quotas = {key: sample["n"] * len(members) / len(candidates) for key, members in strata.items()}
        counts = {key: int(q) for key, q in quotas.items()}
        for key in sorted(quotas, key=lambda k: (counts[k] - quotas[k], str(k)))[:sample["n"] - sum(counts.values())]:
            counts[key] += 1
        chosen = [i for key, members in strata.items() for i in rng.sample(members, counts[key])]
    return [candidates[i] for i in sorted(chosen)]


@pytest.fixture(scope="module")
def stored(migrated_file, tmp_path_factory):
    """Twelve small swarms stored once for the module: its tests only read them (a store each took a second)."""
    path = tmp_path_factory.mktemp("sample") / "sample.duckdb"
    shutil.copyfile(migrated_file, path)
    app = create_app(Settings(db=path))
    traces = []
    for i in range(12):
        trace = generate_swarm(3 + i % 4, 30 + 7 * i, seed=i)
        trace |= {"trace_id": f"s-{i:02d}", "task_id": f"task-{i // 4}", "system": ("a", "b", None)[i % 3]}
        if trace["system"] is None:
            del trace["system"]
        traces.append(trace)
    with TestClient(app, base_url=BASE_URL) as client:
        assert post_json(client, traces).status_code == 201
        yield app.state.db
    app.state.db.close()


FILTERS = [NO_FILTER, NO_FILTER | {"event_types": ["tool_call", "message"]},
           NO_FILTER | {"systems": ["a"], "event_types": ["tool_call"]}, NO_FILTER | {"trace_ids": ["s-03", "s-07"]}]


@pytest.mark.parametrize("lists", FILTERS, ids=["all", "types", "system-and-type", "traces"])
def test_a_sample_chooses_what_drawing_from_every_event_chooses(stored, monkeypatch, lists):
    candidates = queue_store.queue_candidates(stored, lists)
    assert len(candidates) > 20
    loaded = []
    monkeypatch.setattr(queue_store, "queue_candidates", lambda *args: loaded.append(args) or candidates)
    rng = random.Random(0)
    for by in (None, *queues.STRATA):
        for n in (1, 2, 5, rng.randrange(3, len(candidates)), len(candidates) - 1):
            sample = {"n": n, "seed": rng.randrange(10**6), "stratify_by": by}
            assert queues.pick(stored, lists, sample) == drawn_from_every_event(candidates, sample), sample
    assert not loaded  # a sample of fewer than all reads only its events
    everything = {"n": len(candidates), "seed": 1, "stratify_by": "tool"}
    assert queues.pick(stored, lists, everything) == candidates and loaded


def test_a_queue_larger_than_it_may_hold_is_refused_naming_the_cause(stored, monkeypatch):
    monkeypatch.setattr(queues, "MAX_ITEMS", 10)
    with pytest.raises(queues.QueueError, match="a queue holds at most 10 \\(sample them\\)") as refused:
        queues.pick(stored, NO_FILTER, None)
    assert refused.value.field == "filter"
    with pytest.raises(queues.QueueError, match="asks 11 events; a queue holds at most 10") as refused:
        queues.pick(stored, NO_FILTER, {"n": 11, "seed": 0, "stratify_by": None})
    assert refused.value.field == "sample.n"
    assert len(queues.pick(stored, NO_FILTER, {"n": 10, "seed": 0, "stratify_by": "agent"})) == 10
    assert queues.pick(stored, NO_FILTER | {"trace_ids": ["none"]}, None) == []
