"""Trace-level orchestration measures, defined exactly here (the README repeats the definitions).

Pure functions over a trace dict, or over its columns (graph_from_columns: a stored trace is analysed with no
event dict built); linear in events and edges. `analyse_graph` is shared with the credit rules and the audit so the
critical path and lifetimes have one definition.
"""

import math
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, cached_property
from itertools import compress, islice, repeat
from operator import eq, ge, is_not, itemgetter, le, lt, ne

import numpy as np

COORDINATION_TYPES = ("orchestrator_decision", "spawn", "despawn", "message", "return", "aggregate")
NOT_TEAM_TYPES = ("tool_result", "human_intervention")  # a tool answering, a person stepping in
PERSON = "user"  # the agent name every importer gives the person at the keyboard
# A computed measure -> where a trace may report its own figure for it (`metrics` or `costs`, and the key).
# The two often differ (a trace counts LLM calls as messages, or steps its own way): pages show both, labelled.
REPORTED_AS = {
    "critical_path_steps": ("metrics", "critical_steps"),
    "parallelism_speedup": ("metrics", "parallelism_speedup"),
    "protocol_overhead": ("metrics", "protocol_overhead"),
    "tool_calls": ("costs", "tool_calls"),
    "messages": ("costs", "messages"),
    "tokens": ("costs", "tokens"),
}
REPORTED_REL_TOLERANCE = 0.005  # a reported figure this close to ours is ours rounded, not a different count
REPORTED_ABS_TOLERANCE = 0.0005
SELF_LOOP = "self loop"  # why an edge is left out of the path graph
BACK_IN_TIME = "points back in time"
CLOSES_CYCLE = "closes a cycle among simultaneous events"
# The event properties the analysis reads beside id, t, type and agent: a graph built from columns has them so
EVENT_FIELDS = ("role", "to", "trusted", "tool", "tokens")
# From this many events the graph's edge work is done on numpy arrays: below it, converting lists to arrays costs
# more than the loops it saves (a rollout has a few dozen events). A module constant so tests can lower it.
ARRAYS_FROM = 20_000
EXACT_BELOW = 2.0**53  # an int time below it in size is exactly its float, so numpy compares times as Python does


@dataclass(frozen=True)
class Coded:
    """A column of strings as integer codes (numpy) into its distinct values: how a large stored trace's edge types
    and event columns may be handed over, made into a list of 1.7 million strings at a million events only if a rule
    asks (an event column's codes in order of first appearance, as _coded gives them)."""

    codes: np.ndarray
    names: list[str]

    def __len__(self) -> int:
        return len(self.codes)

    def tolist(self) -> list[str]:
        names = np.empty(len(self.names), object)  # indexed by the codes at once: twice as fast as a map
        names[:] = self.names
        return names[self.codes].tolist()

    def at(self, k: int) -> str:
        """The k-th value."""
        return self.names[self.codes[k]]

    def equal(self, name: str) -> np.ndarray:
        """Which values are `name`, as a boolean array."""
        return self.codes == self.names.index(name) if name in self.names else np.zeros(len(self.codes), bool)


@dataclass
class TraceGraph:
    """Indexes over one trace that every analysis needs. Flat lists by position, not per-event containers:
    reading a long trace's event dicts costs more than the work, and many small lists make the garbage
    collector walk everything alive again and again."""

    events: list[dict] | None                     # the trace's own, or None when built from columns
    edges: list[dict] | None
    ids: list[str]                                # position -> event id, time, type and agent
    t: list[float]
    types: list[str]
    agents: list[str]
    order: list[int]                              # positions sorted by (t, position)
    rank: list[int]                               # position -> place in `order`
    path_src: list[int]                           # the path graph: non-temporal edges, forward in (t, position)
    path_dst: list[int]                           # order, sorted by the place of their dst (stable)
    linked: list[dict] | None                     # the edges whose two ends are events, in edge order
    links: Callable[[], tuple[list, list, list]]  # their types and the positions of their ends (see kinds, src, dst)
    ignored: list[tuple[dict, int, int, str]]     # (edge, src, dst, why) of edges left out of the path graph
    spawner: dict[str, str]                       # child agent -> agent that spawned it
    spawn_t: dict[str, float]
    despawn_t: dict[str, float]
    edge_ids: Callable[[], tuple[list, list]]     # every edge's src and dst ids (made when first asked: a stored
    edge_types_of: Callable[[], list]             # trace's rules seldom need them) and type, in edge order
    edge_count: int
    all_linked: bool                              # every edge's two ends are events: the linked edges are all
    in_order: bool                                # events come in time order: `order` is their positions
    forward_ends: Callable[[], tuple[list, list]] | None  # the linked edges forward in `order` (temporal ones too),
                                                  # by the place of their dst; None when times do not sort cleanly
    columns: dict[str, list | Coded] | None = None  # EVENT_FIELDS by position (None: absent) when built from columns
    ends: tuple[np.ndarray, np.ndarray] | None = None  # src and dst as int64 arrays, for a graph of ARRAYS_FROM events
    kind_codes: Coded | None = None               # the linked edges' types as codes, when handed over so
    codes: dict[str, Coded] | None = None         # the events' "type" and "agent" as codes, when handed over so

    # A large stored trace's lists of its edges' types and ends are made only when a rule asks: most read the arrays.
    @property
    def kinds(self) -> list[str]:
        return self.links()[0]

    @property
    def src(self) -> list[int]:
        return self.links()[1]

    @property
    def dst(self) -> list[int]:
        return self.links()[2]

    @property
    def forward_src(self) -> list[int] | None:
        return None if self.forward_ends is None else self.forward_ends()[0]

    @property
    def forward_dst(self) -> list[int] | None:
        return None if self.forward_ends is None else self.forward_ends()[1]

    @property
    def edge_types(self) -> list[str]:
        return self.edge_types_of()

    def edge_type(self, k: int) -> str:
        """The k-th edge's type, with no list of them all made for it."""
        return self.kind_codes.at(k) if self.kind_codes is not None else self.edge_types[k]

    @property
    def edge_src(self) -> list:
        return self.edge_ids()[0]

    @property
    def edge_dst(self) -> list:
        return self.edge_ids()[1]

    @cached_property
    def index(self) -> dict[str, int]:
        """Event id -> position (the last, for an id given twice)."""
        return dict(zip(self.ids, range(len(self.ids))))

    @cached_property
    def tokens(self) -> list[float | None]:
        """Each event's token count (see event_tokens); the metrics and the credit roll-up share it."""
        if self.columns is not None:
            return self.columns["tokens"]
        return [event_tokens(e) for e in self.events]

    @cached_property
    def times(self) -> np.ndarray | None:
        """The times as float64 in a large graph (one with arrays) when every one is a finite number that its float
        holds exactly, so that numpy's minima and maxima pick the events Python's comparisons would; None otherwise."""
        if self.ends is None or not self.t or not set(map(type, self.t)) <= {float, int}:
            return None
        try:
            times = np.fromiter(self.t, np.float64, len(self.t))
        except OverflowError:
            return None
        return times if np.abs(times).max() < EXACT_BELOW else None  # NaN and inf refused too

    @cached_property
    def roles(self) -> dict[str, str]:
        """Each agent's role: the first `role` on its events, spawns and tool results aside."""
        roles: dict[str, str] = {}
        if self.columns is not None and self.agent_codes is not None:  # a large graph's arrays
            coded = self.coded("role")
            has_role = ~coded.equal(None) if coded is not None else np.fromiter(
                map(is_not, self.column("role"), repeat(None)), bool, len(self.ids))
            kept = np.flatnonzero(has_role & ~self.type_codes.equal("tool_result") & ~self.type_codes.equal("spawn"))
            firsts = _first_places(self.agent_codes, kept)
            return {self.agents[i]: self.value(i, "role") for i in np.sort(firsts[firsts >= 0]).tolist()}
        if self.columns is not None:  # a stored event has no role, or a string
            for role, kind, agent in zip(self.columns["role"], self.types, self.agents):
                if role is not None and agent not in roles and kind != "tool_result" and kind != "spawn":
                    roles[agent] = role
            return roles
        for e, kind, agent in zip(self.events, self.types, self.agents):
            if agent not in roles and kind != "tool_result" and kind != "spawn" and "role" in e:
                roles[agent] = e["role"]
        return roles

    def column(self, key: str) -> list:
        """Each event's `key` (one of EVENT_FIELDS), None where it has none."""
        if self.columns is None:
            return [e.get(key) for e in self.events]
        if isinstance(self.columns[key], Coded):
            self.columns[key] = self.columns[key].tolist()
        return self.columns[key]

    def coded(self, key: str) -> Coded | None:
        """The column `key` as codes when the graph was given it so and no rule has asked for it as a list yet."""
        column = None if self.columns is None else self.columns.get(key)
        return column if isinstance(column, Coded) else None

    def value(self, i: int, key: str):
        """The event at position i's `key` (one of EVENT_FIELDS), None when it has none: for the few events a rule
        reads (spawns, returns, sources), not a column's worth."""
        if self.columns is None:
            return self.events[i].get(key)
        column = self.columns[key]
        return column.at(i) if isinstance(column, Coded) else column[i]

    def positions(self, kind: str) -> list[int]:
        """The positions of the events of this type."""
        if self.type_codes is not None:
            return np.flatnonzero(self.type_codes.equal(kind)).tolist()
        return _positions(self.types, kind)

    @cached_property
    def type_codes(self) -> Coded | None:
        """The events' types as codes in a large graph (one with arrays), so that the rules' questions (a type's
        positions, the count of each) are not each a pass of Python over a million types; None in a small one."""
        if self.ends is None:
            return None
        return self.codes["type"] if self.codes is not None else _coded(self.types)

    @cached_property
    def agent_codes(self) -> Coded | None:
        """The events' agents as codes in a large graph (see type_codes) when every agent is a string (as stored);
        None otherwise."""
        coded = None if self.ends is None else self.codes["agent"] if self.codes is not None else _coded(self.agents)
        return coded if coded is not None and all(type(name) is str for name in coded.names) else None

    @cached_property
    def type_counts(self) -> Counter:
        """How many events there are of each type."""
        if self.type_codes is None:
            return Counter(self.types)
        counts = np.bincount(self.type_codes.codes, minlength=len(self.type_codes.names))
        return Counter(dict(zip(self.type_codes.names, counts.tolist())))

    @cached_property
    def first_at(self) -> dict[str, int]:
        """Each agent's first event (position); with events in time order, its earliest."""
        if self.agent_codes is not None:
            firsts = _first_places(self.agent_codes, np.arange(len(self.ids)))
            return dict(zip(self.agent_codes.names, firsts.tolist()))
        return dict(zip(reversed(self.agents), range(len(self.agents) - 1, -1, -1)))

    @cached_property
    def last_at(self) -> dict[str, int]:
        """Each agent's last event (position); with events in time order, its latest."""
        if self.agent_codes is not None:
            lasts = np.full(len(self.agent_codes.names), -1)
            np.maximum.at(lasts, self.agent_codes.codes, np.arange(len(self.ids)))
            return dict(zip(self.agent_codes.names, lasts.tolist()))
        return dict(zip(self.agents, range(len(self.agents))))


def _coded(values: list) -> Coded:
    """The values as codes into their distinct ones, in order of first appearance."""
    names = list(dict.fromkeys(values))
    number = {name: k for k, name in enumerate(names)}
    return Coded(np.fromiter(map(number.__getitem__, values), np.int64, len(values)), names)


def _first_places(coded: Coded, positions: np.ndarray) -> np.ndarray:
    """Per code, the smallest of these positions whose value has it; -1 for a code none of them has."""
    firsts = np.full(len(coded.names), np.iinfo(np.int64).max)
    np.minimum.at(firsts, coded.codes[positions], positions)
    firsts[firsts == np.iinfo(np.int64).max] = -1
    return firsts


def _positions(types: list[str], kind: str) -> list[int]:
    return list(compress(range(len(types)), map(eq, types, repeat(kind))))


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def analyse_graph(trace: dict) -> TraceGraph:
    """Build the indexes; edges pointing back in time or closing a cycle are set aside, not followed."""
    events, edges = trace["events"], trace["edges"]
    def pull(key: str, items: list[dict]) -> list:
        return list(map(itemgetter(key), items))

    edge_ids = (pull("src", edges), pull("dst", edges))
    return _graph(pull("id", events), pull("t", events), pull("type", events), pull("agent", events),
                  lambda: edge_ids, pull("type", edges), events, edges, None)


def graph_from_columns(ids: list, t: list, types: list | Coded, agents: list | Coded,
                       edge_ids: Callable[[], tuple[list, list]], edge_types: list, columns: dict[str, list | Coded],
                       ends: tuple[list, list] | None = None) -> TraceGraph:
    """analyse_graph of a trace given as columns by position (a stored trace: no event dict to build), with its
    EVENT_FIELDS in `columns`, None where an event has none (`tokens` as event_tokens gives it), and its edges' src
    and dst ids made by `edge_ids()` when first needed. `ends`: the positions of each edge's src and dst (None for
    no event; the last position of an id given twice) when the caller has them, found faster than by a dict of a
    million ids; with them, the ids are made only for the rules that name edges (a self loop, a repeat). They may be
    two int64 arrays (read from Arrow without a copy) when every edge's ends are events, and then `edge_types` may be
    Coded. The types and agents, and any of `columns` but the tokens, may be Coded (a large stored trace's)."""
    return _graph(ids, t, types, agents, edge_ids, edge_types, None, None, columns, ends)


def _graph(ids: list, t: list, types: list | Coded, agents: list | Coded, edge_ids: Callable[[], tuple[list, list]],
           edge_types: list | Coded, events: list[dict] | None, edges: list[dict] | None,
           columns: dict[str, list | Coded] | None, ends: tuple[list, list] | None = None) -> TraceGraph:
    n = len(ids)
    codes = {"type": types, "agent": agents} if isinstance(types, Coded) else None
    if codes is not None:
        types, agents = types.tolist(), agents.tolist()
    edge_ids = cache(edge_ids)
    in_order = ascending(t)
    if in_order:  # as sorted() would leave them: equal times keep position order
        order, rank = list(range(n)), list(range(n))
    else:
        order = sorted(range(n), key=t.__getitem__)  # stable: equal times keep position order
        rank = [0] * n
        for place, i in enumerate(order):
            rank[i] = place
    clean = in_order or ascending([t[i] for i in order])  # times sort cleanly: forward in `order` is forward in time
    by_arrays = clean and n >= ARRAYS_FROM
    coded = edge_types if isinstance(edge_types, Coded) else None
    arrays = ends if ends is not None and isinstance(ends[0], np.ndarray) else None
    if not by_arrays or arrays is None:  # the lists' way (edge types as codes come with ends as arrays)
        coded, edge_types = None, edge_types.tolist() if coded is not None else edge_types
        arrays, ends = None, (ends[0].tolist(), ends[1].tolist()) if arrays is not None else ends
    types_of_edges = cache(coded.tolist) if coded is not None else lambda: edge_types
    kinds, linked, kept, src, dst = edge_types, edges, None, None, None
    if ends is None:
        index = dict(zip(ids, range(n)))
        edge_src, edge_dst = edge_ids()
        try:
            src, dst = list(map(index.__getitem__, edge_src)), list(map(index.__getitem__, edge_dst))
            missing = False
        except KeyError:
            src, dst = list(map(index.get, edge_src)), list(map(index.get, edge_dst))
            missing = True
    elif arrays is None:
        src, dst = ends
        missing = None in src or None in dst
    else:  # every edge's ends events
        missing = False
    if missing:  # an edge to no event: left out
        kept = [k for k, (s, d) in enumerate(zip(src, dst)) if s is not None and d is not None]
        src, dst = [src[k] for k in kept], [dst[k] for k in kept]
        kinds = [kinds[k] for k in kept]
        if edges is not None:
            linked = [edges[k] for k in kept]
    type_at = coded.at if coded is not None else edge_types.__getitem__

    def edge(k: int) -> dict:
        """The k-th linked edge: the trace's own dict, or one made for it (only edges set aside need one)."""
        if linked is not None:
            return linked[k]
        k = k if kept is None else kept[k]
        return {"src": edge_ids()[0][k], "dst": edge_ids()[1][k], "type": type_at(k)}
    forward_ends = None
    if by_arrays:
        arrays = arrays or (np.asarray(src, np.int64), np.asarray(dst, np.int64))
        temporal = coded.equal("temporal") if coded is not None else np.fromiter(
            map(eq, kinds, repeat("temporal")), bool, len(kinds))
        forward, path_src, path_dst, back = _forward_arrays(*arrays, None if in_order else rank, temporal)
        forward_ends = cache(lambda: (forward[0].tolist(), forward[1].tolist()))
        ignored = [(edge(k), s, d, SELF_LOOP if s == d else BACK_IN_TIME if t[d] < t[s] else CLOSES_CYCLE)
                   for k, s, d in zip(back, arrays[0][back].tolist(), arrays[1][back].tolist())]
    elif clean:
        # Only the edges not forward need a look.
        src_place, dst_place = (src, dst) if in_order else (list(map(rank.__getitem__, src)),
                                                            list(map(rank.__getitem__, dst)))
        ignored = [(edge(k), src[k], dst[k], SELF_LOOP if src[k] == dst[k] else BACK_IN_TIME
                    if t[dst[k]] < t[src[k]] else CLOSES_CYCLE)
                   for k in compress(range(len(src)), map(ge, src_place, dst_place)) if kinds[k] != "temporal"]
        forward = list(compress(range(len(src)), map(lt, src_place, dst_place)))
        forward_dst = list(map(dst.__getitem__, forward))
        # Edges usually come in the order of their dst already (a trace records an edge with the event it leads
        # to): then there is nothing to sort, and sorting by a key still called it for every edge.
        if not ascending(forward_dst if in_order else list(map(rank.__getitem__, forward_dst))):
            forward.sort(key=dst_place.__getitem__)  # stable: edge order among equal places
            forward_dst = list(map(dst.__getitem__, forward))
        forward_src = list(map(src.__getitem__, forward))
        path = list(map(ne, map(kinds.__getitem__, forward), repeat("temporal")))
        path_src, path_dst = list(compress(forward_src, path)), list(compress(forward_dst, path))
        forward_ends = lambda: (forward_src, forward_dst)
    else:
        path_src, path_dst, ignored = [], [], []
        for k, (kind, s, d) in enumerate(zip(kinds, src, dst)):
            if kind == "temporal":
                continue
            if s == d:
                ignored.append((edge(k), s, d, SELF_LOOP))
            elif t[d] < t[s]:
                ignored.append((edge(k), s, d, BACK_IN_TIME))
            elif rank[d] < rank[s]:
                ignored.append((edge(k), s, d, CLOSES_CYCLE))
            else:
                path_src.append(s)
                path_dst.append(d)
        by_dst = sorted(range(len(path_dst)), key=[rank[d] for d in path_dst].__getitem__)
        path_src, path_dst = [path_src[k] for k in by_dst], [path_dst[k] for k in by_dst]
    if src is None:
        links = cache(lambda: (types_of_edges(), arrays[0].tolist(), arrays[1].tolist()))
    else:
        links = lambda: (kinds, src, dst)
    if codes is not None:
        changes = np.flatnonzero(codes["type"].equal("spawn") | codes["type"].equal("despawn")).tolist()
    else:
        changes = list(compress(range(n), map(frozenset(("spawn", "despawn")).__contains__, types)))
    g = TraceGraph(events, edges, ids, t, types, agents, order, rank, path_src, path_dst, linked, links, ignored, {},
                   {}, {}, edge_ids, types_of_edges, len(edge_types), kept is None, in_order, forward_ends,
                   columns, arrays, coded, codes)
    g.spawner, g.spawn_t, g.despawn_t = _spawn_times((types[i], agents[i], t[i], g.value(i, "to")) for i in changes)
    return g


def _forward_arrays(src: np.ndarray, dst: np.ndarray, rank: list[int] | None, temporal: np.ndarray) -> tuple:
    """_graph's work on the linked edges when times sort cleanly, over arrays: the edges forward in `order` by the
    place of their dst (stable), the non-temporal ones among them (the path graph), and the non-temporal edges not
    forward (to be set aside), as ((forward_src, forward_dst), path_src, path_dst, back): the forward edges as
    arrays (made lists only for the rule that reads them, untrusted_flow's loops: 2 x 1.7 million at a million
    events), the others as lists."""
    if rank is None:
        src_place, dst_place = src, dst
    else:
        place = np.asarray(rank, np.int64)
        src_place, dst_place = place[src], place[dst]
    back = np.flatnonzero((src_place >= dst_place) & ~temporal).tolist()
    forward = np.flatnonzero(src_place < dst_place)
    places = dst_place[forward]
    if (places[1:] < places[:-1]).any():
        forward = forward[_stable_argsort(places)]
    forward_src, forward_dst, path = src[forward], dst[forward], ~temporal[forward]
    return (forward_src, forward_dst), forward_src[path].tolist(), forward_dst[path].tolist(), back


def _stable_argsort(values: np.ndarray) -> np.ndarray:
    """np.argsort(values, kind="stable") of non-negative integers, as numpy's default sort of keys made unique by
    their index: its vectorised quicksort takes half the time of the stable one (timsort) at 1.7 million edges."""
    size = len(values)
    if not size or (int(values.max()) + 1) * size >= 2**63:  # a key would overflow
        return np.argsort(values, kind="stable")
    return np.argsort(values * size + np.arange(size))


def ascending(values: list) -> bool:
    """Whether each value is <= the next: sorting leaves them as they are, and no NaN is among them."""
    try:
        return all(map(le, values, islice(values, 1, None)))
    except TypeError:  # a value that does not compare: leave it to sorted(), to fail or not as before
        return False


def spawn_times(events: list[dict]) -> tuple[dict[str, str], dict[str, float], dict[str, float]]:
    """Who spawned each agent, when, and when each agent was despawned (the first such event counts)."""
    return _spawn_times((e["type"], e["agent"], e["t"], e.get("to")) for e in events
                        if e["type"] == "spawn" or e["type"] == "despawn")


def _spawn_times(rows) -> tuple[dict[str, str], dict[str, float], dict[str, float]]:
    """spawn_times of the spawns and despawns as (type, agent, t, to) rows."""
    spawner: dict[str, str] = {}
    spawn_t: dict[str, float] = {}
    despawn_t: dict[str, float] = {}
    for kind, agent, t, to in rows:
        target = to if isinstance(to, str) else None
        if kind == "spawn" and target and target != agent and target not in spawner:
            spawner[target] = agent
            spawn_t[target] = t
        elif kind == "despawn":
            despawn_t.setdefault(target or agent, t)
    return spawner, spawn_t, despawn_t


def is_team_act(event: dict) -> bool:
    """Whether an event is a team member acting: not a tool answering a call (`tool_result`), not a person
    (a `human_intervention`, or anything said by `user`, the name the importers give the person at the
    keyboard). "Agents" everywhere (the trace list, the trace page, the metrics) are the distinct `agent`s
    of such events. The SQL twin is app/store/traces.py TEAM_MEMBER_EVENT; a test checks they agree."""
    return is_team(event["type"], event["agent"])


def is_team(kind: str, agent: str) -> bool:
    """is_team_act of an event's type and agent."""
    return kind not in NOT_TEAM_TYPES and agent != PERSON


def team_members(events: list[dict]) -> list[str]:
    """The trace's agents (see is_team_act), in order of first appearance."""
    return list(dict.fromkeys(e["agent"] for e in events if is_team_act(e)))


def agent_spans(events: list[dict]) -> dict[str, tuple[float, float]]:
    """Per team member (see is_team_act): alive from its spawn (or first event) to its despawn, else its
    last return, else its last event."""
    _, spawn_t, despawn_t = spawn_times(events)
    return lifetimes([e["t"] for e in events], [e["type"] for e in events], [e["agent"] for e in events],
                     spawn_t, despawn_t)


def lifetimes(times: list[float], types: list[str], agents: list[str], spawn_t: dict[str, float],
              despawn_t: dict[str, float]) -> dict[str, tuple[float, float]]:
    """agent_spans of events given as columns, with their spawn and despawn times (a TraceGraph has all)."""
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    last_return: dict[str, float] = {}
    for t, kind, agent in zip(times, types, agents):
        if kind in NOT_TEAM_TYPES or agent == PERSON:  # is_team, written out: a call per event costs most
            continue
        if agent not in first:  # the comparisons keep the earlier of equal times, as min and max would
            first[agent] = last[agent] = t
        elif t < first[agent]:
            first[agent] = t
        elif t > last[agent]:
            last[agent] = t
        if kind == "return" and (agent not in last_return or t > last_return[agent]):
            last_return[agent] = t
    spans = {}
    for agent in first:
        start = min(spawn_t.get(agent, first[agent]), first[agent])
        end = despawn_t.get(agent, last_return.get(agent, last[agent]))
        spans[agent] = (start, max(end, start))
    return spans


def graph_lifetimes(g: TraceGraph) -> dict[str, tuple[float, float]]:
    """lifetimes of a graph's events: in a large graph by numpy per agent (each agent's first and last event the
    earliest of its least and greatest times, as the loop keeps them), else by the loop."""
    times = g.times
    if times is None or g.agent_codes is None:
        return lifetimes(g.t, g.types, g.agents, g.spawn_t, g.despawn_t)
    agents, names = g.agent_codes, g.agent_codes.names
    team = ~np.logical_or.reduce([g.type_codes.equal(kind) for kind in NOT_TEAM_TYPES]) & ~agents.equal(PERSON)
    team = np.flatnonzero(team)
    starts = _first_places(agents, team)
    ends_at = _extreme_places(agents, team, times, np.maximum)
    last_return = _extreme_places(agents, team[g.type_codes.equal("return")[team]], times, np.maximum)
    firsts = _extreme_places(agents, team, times, np.minimum)
    spans = {}
    for k in np.argsort(starts, kind="stable")[np.count_nonzero(starts < 0):].tolist():  # by first team event
        agent, first = names[k], g.t[firsts[k]]
        start = min(g.spawn_t.get(agent, first), first)
        end = g.despawn_t.get(agent, g.t[last_return[k]] if last_return[k] >= 0 else g.t[ends_at[k]])
        spans[agent] = (start, max(end, start))
    return spans


def _extreme_places(coded: Coded, positions: np.ndarray, times: np.ndarray, extreme: np.ufunc) -> np.ndarray:
    """Per code, the first of these positions whose time is the least (np.minimum) or greatest (np.maximum) of its
    code's; -1 for a code none of them has."""
    codes, at = coded.codes[positions], times[positions]
    best = np.full(len(coded.names), np.inf if extreme is np.minimum else -np.inf)
    extreme.at(best, codes, at)
    return _first_places(coded, positions[at == best[codes]])


def token_sums(g: TraceGraph) -> tuple[dict[str, float], dict[str, float]]:
    """The tokens by agent and by role (the event's role, else its agent's, else "(no role)"), each in order of its
    first counted event, summed in event order: in a large graph by numpy (np.bincount adds in that order too)."""
    roles = g.roles
    values = _token_values(g) if g.agent_codes is not None else None
    if values is not None:
        counted, tokens = values
        coded = g.coded("role")  # its names may hold some no counted event has: they add to no sum
        role_codes = Coded(coded.codes[counted], coded.names) if coded is not None else _coded(
            list(map(g.column("role").__getitem__, counted.tolist())))
        if all(name is None or type(name) is str for name in role_codes.names):  # keys that no other key equals
            agents = g.agent_codes
            # each counted event's key as a number among the keys: its role's, else its agent's role's
            keys = list(dict.fromkeys([name for name in role_codes.names if name] +
                                      [roles.get(agent, "(no role)") for agent in agents.names]))
            number = {key: k for k, key in enumerate(keys)}
            by_own = np.asarray([number[name] if name else -1 for name in role_codes.names], np.int64)
            by_agents = np.asarray([number[roles.get(agent, "(no role)")] for agent in agents.names], np.int64)
            own = by_own[role_codes.codes]
            role_keys = np.where(own >= 0, own, by_agents[agents.codes[counted]])
            return _sums(agents.codes[counted], tokens, agents.names), _sums(role_keys, tokens, keys)
    by_agent: dict[str, float] = defaultdict(float)
    by_role: dict[str, float] = defaultdict(float)
    counted = list(map(is_not, g.tokens, repeat(None)))
    for agent, tokens, role in zip(compress(g.agents, counted), compress(g.tokens, counted),
                                   compress(g.column("role"), counted)):
        by_agent[agent] += tokens
        by_role[role or roles.get(agent, "(no role)")] += tokens
    return by_agent, by_role


def _token_values(g: TraceGraph) -> tuple[np.ndarray, np.ndarray] | None:
    """The positions of the events with a token count (a number: see tokens_of) and their counts as float64 (as
    Python adds a count to a float), or None when a count is one no float holds or NaN (inf - inf)."""
    tokens = g.tokens
    try:
        values = np.fromiter(tokens, np.float64, len(tokens))  # None -> NaN
    except OverflowError:
        return None
    missing = np.isnan(values)
    if np.count_nonzero(missing) != tokens.count(None):
        return None
    counted = np.flatnonzero(~missing)
    return counted, values[counted]


def _sums(keys: np.ndarray, values: np.ndarray, names: list[str]) -> dict[str, float]:
    """Per key (a number into names) that occurs, the sum of its values, in order of the key's first occurrence."""
    sums = np.bincount(keys, values, len(names)).tolist()
    firsts = _first_places(Coded(keys, names), np.arange(len(keys)))
    seen = np.flatnonzero(firsts >= 0)
    return {names[k]: sums[k] for k in seen[np.argsort(firsts[seen])].tolist()}


def critical_path(g: TraceGraph) -> list[int]:
    """Positions of the events on the longest path (in events) through the non-temporal edges."""
    if not g.ids:
        return []
    length = [1] * len(g.ids)
    back = [-1] * len(g.ids)
    for j, i in zip(g.path_src, g.path_dst):  # by the place of i, so j's length is final by now
        if length[j] + 1 > length[i]:
            length[i], back[i] = length[j] + 1, j
    longest = max(length)
    # the first in time of the longest
    end = length.index(longest) if g.in_order else next(i for i in g.order if length[i] == longest)
    path = []
    while end != -1:
        path.append(end)
        end = back[end]
    return path[::-1]


def spawn_depth(g: TraceGraph) -> int:
    """Longest chain spawner -> spawned agent; an agent nobody spawned has depth 0."""
    depth: dict[str, int] = {}
    for agent in g.spawner:
        chain, node = [], agent
        while node in g.spawner and node not in depth and node not in chain:
            chain.append(node)
            node = g.spawner[node]
        base = depth.get(node, 0)
        for k, member in enumerate(reversed(chain), start=1):
            depth[member] = base + k
    return max(depth.values(), default=0)


def max_concurrency(spans: dict[str, tuple[float, float]]) -> int:
    """Most agents alive at one instant (an agent ending at t and one starting at t overlap)."""
    points = sorted([(lo, 0) for lo, _ in spans.values()] + [(hi, 1) for _, hi in spans.values()])
    alive = best = 0
    for _, kind in points:
        alive += 1 if kind == 0 else -1
        best = max(best, alive)
    return best


def event_tokens(event: dict) -> float | None:
    """`tokens` when the event carries it, else tokens_in + tokens_out; None without token counts."""
    tokens = event.get("tokens")
    if tokens is not None and is_number(tokens):
        return tokens
    if "tokens_in" not in event and "tokens_out" not in event:  # most events: skip the checks below
        return None
    return tokens_of(None, event.get("tokens_in"), event.get("tokens_out"))


def tokens_of(tokens, tokens_in, tokens_out) -> float | None:
    """event_tokens of an event's `tokens`, `tokens_in` and `tokens_out` (None when absent: the same count)."""
    if tokens is not None and is_number(tokens):
        return tokens
    # sum() of the parts that are numbers, written out: an int is one (the common case, checked first)
    has_in = type(tokens_in) is int or is_number(tokens_in)
    if type(tokens_out) is int or is_number(tokens_out):
        return 0 + tokens_in + tokens_out if has_in else 0 + tokens_out
    return 0 + tokens_in if has_in else None


def compute_metrics(trace: dict, g: TraceGraph | None = None) -> dict:
    """Every measure of one trace (see the README for the exact definitions)."""
    g = g or analyse_graph(trace)
    n = len(g.ids)
    types = g.type_counts
    spans = graph_lifetimes(g)
    path = critical_path(g)
    if g.times is not None:  # the first of the greatest and of the least, as max() and min() give them
        span_s = g.t[int(np.argmax(g.times))] - g.t[int(np.argmin(g.times))]
    else:
        span_s = max(g.t) - min(g.t) if n else 0
    work_s = sum(hi - lo for lo, hi in spans.values())
    by_agent, by_role = token_sums(g)
    fanout = Counter(map(g.agents.__getitem__, g.positions("spawn")))
    return {
        "events": n,
        "edges": g.edge_count,
        "agents": len(spans),
        "spawns": types["spawn"],
        "max_fanout": max(fanout.values(), default=0),
        "spawn_depth": spawn_depth(g),
        "max_concurrency": max_concurrency(spans),
        "critical_path_steps": len(path),
        "critical_path_s": (g.t[path[-1]] - g.t[path[0]]) if path else 0,
        "critical_path": [g.ids[i] for i in path],
        "span_s": span_s,
        "work_s": work_s,
        "parallelism_speedup": work_s / span_s if span_s else None,
        "protocol_overhead": sum(types[t] for t in COORDINATION_TYPES) / n if n else 0,
        "tool_calls": types["tool_call"],
        "messages": types["message"],
        "tokens": sum(by_agent.values()) if by_agent else None,
        "tokens_by_agent": dict(sorted(by_agent.items(), key=lambda kv: -kv[1])),
        "tokens_by_role": dict(sorted(by_role.items(), key=lambda kv: -kv[1])),
        "ignored_edges": [{"src": edge["src"], "dst": edge["dst"], "type": edge["type"], "reason": reason}
                          for edge, _, _, reason in g.ignored],
    }


def reported_differences(trace: dict, metrics: dict) -> dict[str, float]:
    """The trace's own figure for each computed measure it reports (see REPORTED_AS) that differs from ours
    by more than rounding (0.292 reported for 0.2922 computed is the same figure), by the computed name."""
    out = {}
    for measure, (group, key) in REPORTED_AS.items():
        reported, computed = (trace.get(group) or {}).get(key), metrics.get(measure)
        if is_number(reported) and not (is_number(computed) and math.isclose(
                reported, computed, rel_tol=REPORTED_REL_TOLERANCE, abs_tol=REPORTED_ABS_TOLERANCE)):
            out[measure] = reported
    return out
