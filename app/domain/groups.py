"""Rollout groups, GRPO's way of comparing: a rollout's advantage on a reward channel is its reward normalised within
its group, (r - mean) / std with the population std of the group's rewards on that channel; a group whose rewards
on a channel do not differ (std 0) teaches nothing there, so every advantage on it is 0, not a division by zero."""

from collections import Counter

from app.domain import charts

STATS = ("mean", "std", "min", "max")
# The group list sorts by a group's key, its size, or a statistic of one reward channel (`mean:team`).
GROUP_SORTS = ("key", "n")
POINTS_UP_TO = 1_000  # a group of more rollouts draws bins: the browser gets no more marks than pixels
# The structure of a rollout plotted against its reward: (field, axis label).
STRUCTURE = (("critical_steps", "critical steps"), ("agents", "agents"), ("spawns", "spawns"),
             ("parallel_speedup", "parallelism speedup"))


def advantages(rewards: dict[str, float], stats: dict[str, dict]) -> dict[str, float]:
    """A rollout's advantage on each channel it has a reward on, against its group's `stats` per channel."""
    return {channel: advantage(value, stats[channel]) for channel, value in rewards.items() if channel in stats}


def advantage(value: float, stats: dict) -> float:
    return (value - stats["mean"]) / stats["std"] if stats["std"] else 0.0


def parse_group_sort(sort: str) -> tuple[str, str | None, bool]:
    """(key or statistic, its channel or None, descending) of a group sort, - first for descending: key, n or
    <stat>:<channel>; ValueError for another."""
    name = sort.removeprefix("-")
    stat, _, channel = name.partition(":")
    if name in GROUP_SORTS or (stat in STATS and channel):
        return (name, None, sort.startswith("-")) if name in GROUP_SORTS else (stat, channel, sort.startswith("-"))
    raise ValueError(f"sort: one of {', '.join(GROUP_SORTS)} or <{'|'.join(STATS)}>:<channel>, - first for "
                     f"descending, not '{sort}'")


def ranked(rollouts: list[dict], channel: str | None) -> list[dict]:
    """Rollouts by their advantage on `channel`, greatest first (those without a reward on it last), ties by id."""
    def rank(rollout: dict) -> tuple:
        value = rollout["advantage"].get(channel)
        return (value is None, -(value or 0.0), rollout["trace_id"])
    return sorted(rollouts, key=rank)


def spread_marks(stats: dict, low: float, high: float) -> dict:
    """Where a group's rewards on a channel fall on a scale from `low` to `high` (the channel's extent across the
    corpus), as fractions 0..1: min to max, mean - std to mean + std (clipped to min..max), and the mean."""
    width = high - low

    def at(value: float) -> float:
        return (value - low) / width if width else 0.5
    return {"min": at(stats["min"]), "max": at(stats["max"]), "mean": at(stats["mean"]),
            "std_low": at(max(stats["mean"] - stats["std"], stats["min"])),
            "std_high": at(min(stats["mean"] + stats["std"], stats["max"]))}


def structure_figures(rollouts: list[dict], channel: str) -> dict:
    """A chart per structural measure against the reward on `channel`: a point per rollout linking to its trace,
    or counts in bins for a group of more than POINTS_UP_TO rollouts."""
    figures = {}
    for field, label in STRUCTURE:
        have = [r for r in rollouts if r[field] is not None and channel in r["rewards"]]
        xs, ys = [r[field] for r in have], [r["rewards"][channel] for r in have]
        title = f"reward '{channel}' vs {label}"
        if len(have) <= POINTS_UP_TO:
            figures[field] = charts.scatter(title, xs, ys, label, channel, ids=[r["trace_id"] for r in have],
                                            links=True)
            continue
        figures[field] = density(f"{title}: {len(have):,} rollouts", xs, ys, label, channel)
    return figures


def density(title: str, xs: list, ys: list, x_label: str, y_label: str) -> dict:
    """Points counted in 2-D bins on round grids over their extents."""
    x_grid = charts.grid(min(xs), max(xs), all(float(x).is_integer() for x in xs))
    y_grid = charts.grid(min(ys), max(ys), all(float(y).is_integer() for y in ys))
    counts = Counter((charts.bin_of(x, x_grid.num, x_grid.den), charts.bin_of(y, y_grid.num, y_grid.den))
                     for x, y in zip(xs, ys))
    return charts.density(title, x_grid, y_grid, dict(counts), x_label, y_label)
