"""Overlay channels: numeric per-event properties (nested ones by dotted path, e.g. `credit.agent`)."""

from collections.abc import Iterator


def numeric_leaves(value, prefix: str = "") -> Iterator[tuple[str, float]]:
    """(dotted path, number) for every number in nested objects; booleans and lists are not channels."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield from numeric_leaves(child, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
        yield prefix, value


def event_channels(extras: list[tuple[int, dict]], n_events: int) -> dict[str, list[float | None]]:
    """Every numeric channel of a trace: one value (or None) per event, in event order."""
    channels: dict[str, list[float | None]] = {}
    for seq, props in extras:
        for path, number in numeric_leaves(props):
            column = channels.get(path)
            if column is None:
                column = channels[path] = [None] * n_events
            column[seq] = number
    return dict(sorted(channels.items()))


def describe(channels: dict[str, list[float | None]]) -> list[dict]:
    """Name, number of events with a value, and range of each channel, for the overlay picker."""
    out = []
    for name, values in channels.items():
        present = [v for v in values if v is not None]
        out.append({"name": name, "count": len(present), "min": min(present), "max": max(present)})
    return out
