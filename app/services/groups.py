"""Rollout groups: pages of groups with their reward statistics, and one group's rollouts with their advantages,
for the API and the pages alike."""

from app.domain.groups import advantages, parse_group_sort
from app.domain.refusals import NotFound, Refusal
from app.store import groups as group_store


class GroupSortRefused(Refusal, ValueError):
    """`sort` names no key a group list is sorted by."""

    status = 400

    def details(self) -> dict:
        return {"parameter": "sort"}


def list_groups(db, by: str, sort: str, limit: int, offset: int) -> tuple[list[dict], int]:
    """One page of the groups of traces sharing `by`, sorted by `sort`, and how many groups there are."""
    group_store.check_group_by(by)
    try:
        order = parse_group_sort(sort)
    except ValueError as exc:
        raise GroupSortRefused(str(exc)) from exc
    page, count = db.together(lambda: group_store.group_page(db, by, order, limit, offset),
                              lambda: group_store.group_count(db, by))  # side by side on a lake
    return page, count


def read_group(db, by: str, key: str) -> dict:
    """One group's size, reward statistics and rollouts (in id order), each with its advantage per channel."""
    rollouts, stats = db.together(lambda: group_store.group_rollouts(db, by, key),
                                  lambda: group_store.group_stats(db, by, key))  # side by side on a lake
    if not rollouts:
        raise NotFound(f"no traces with {by} '{key}'", what=f"group {by} '{key}'")
    for rollout in rollouts:
        rollout["advantage"] = advantages(rollout["rewards"], stats)
    return {"key": key, "n": len(rollouts), "rewards": stats, "rollouts": rollouts}
