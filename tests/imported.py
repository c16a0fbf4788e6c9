"""Reading the traces an importer made, shared by the importer tests."""

from app.validation import validate_trace


def only_trace(result) -> dict:
    """The single trace of an import, checked against the published format."""
    assert len(result.traces) == 1
    trace = result.traces[0]
    assert validate_trace(trace) == []
    return trace


def edges(trace: dict, type_: str) -> set[tuple[str, str]]:
    return {(e["src"], e["dst"]) for e in trace["edges"] if e["type"] == type_}


def one(items):
    items = list(items)
    assert len(items) == 1, items
    return items[0]


def first_event(trace: dict, agent: str) -> dict:
    return next(e for e in trace["events"] if e["agent"] == agent)


def timeline_pairs(trace: dict) -> set[tuple[str, str]]:
    """The temporal edges IMPORTERS.md asks for: each acting agent's consecutive events (tool results
    belong to no timeline)."""
    timelines: dict[str, list[str]] = {}
    for e in trace["events"]:
        if e["type"] != "tool_result":
            timelines.setdefault(e["agent"], []).append(e["id"])
    return {pair for ids in timelines.values() for pair in zip(ids, ids[1:])}
