"""Rollout groups: traces sharing a key, their reward statistics and each rollout's advantage within its group."""

import pytest
from conftest import make_trace, post_json

from app.store import groups as group_store


def test_group_store_lists_keys_and_trace_ids(client, db):
    systemless = make_trace("c", task_id="y")
    del systemless["system"]
    assert post_json(client, [make_trace("b", task_id="x/1"), make_trace("a", task_id="x/1"), systemless]).is_success
    assert group_store.group_keys(db, "task_id") == ["x/1", "y"]
    assert group_store.group_trace_ids(db, "task_id", "x/1") == ["a", "b"]
    assert group_store.group_trace_ids(db, "task_id", "none") == []
    assert group_store.group_keys(db, "system") == ["unit-test"]  # a trace without a system is in no group
    for by in ("team", "rewards", "trace_id", "events"):
        with pytest.raises(group_store.GroupByRefused) as refused:
            group_store.check_group_by(by)
        assert refused.value.status == 400 and refused.value.details() == {"parameter": "by"}
