"""Metrics and audit findings of stored traces: computed when traces are stored (app/store/writes.py, a whole
request at once), made again in bulk when the analysis version changes (Reanalysis: ensure_all in the background
from startup, its progress on every page), then read back.

The pure functions live in metrics.py and audit.py (app/domain/analysis.py runs both); the trace list, the
corpus audit and the dashboard sort and count their stored results and never analyse on view.
"""

import json
import logging
import threading
from collections.abc import Callable

from app.domain.analysis import ANALYSIS_VERSION, analyse
from app.domain.credit import RULES, assign, correlation, rollup
from app.domain.metrics import TraceGraph, analyse_graph
from app.services.cache import TraceCache
from app.store import analysis as analysis_store
from app.store import analyst
from app.store import traces as trace_store
from app.store.db import Database

COMPUTED_PREFIX = "computed credit: "
REANALYSIS_BATCH = 1000  # traces analysed again per write when the analysis version changes
log = logging.getLogger("orchestrace")


def stored_trace(db: Database, cache: TraceCache, trace_id: str) -> dict | None:
    """The whole trace, read once per ingest and kept in the cache for the analyses."""
    version = trace_store.trace_version(db, trace_id)
    if version is None:
        return None
    return cache.get_or_build(("trace", trace_id, version), lambda: trace_store.read_trace(db, trace_id))


def stored_graph(db: Database, cache: TraceCache, trace_id: str) -> TraceGraph | None:
    """The trace's indexes (see analyse_graph), built once per ingest: the metrics, the audit and every
    credit rule and roll-up share them instead of each building its own."""
    version = trace_store.trace_version(db, trace_id)
    if version is None:
        return None
    return cache.get_or_build(("graph", trace_id, version),
                              lambda: analyse_graph(stored_trace(db, cache, trace_id)))


def ensure_analysis(db: Database, cache: TraceCache, trace_id: str) -> dict | None:
    """{"metrics", "findings"} of a trace: stored at ingest, made again here when stale (an analysis version newer
    than the stored one, not yet reached by ensure_all)."""
    state = analysis_store.analysis_state(db, trace_id, ANALYSIS_VERSION)
    if state is None:
        return None
    if state["fresh"]:
        return {"metrics": json.loads(state["metrics"]), "findings": analysis_store.read_findings(db, trace_id)}
    result = analyse(stored_trace(db, cache, trace_id), stored_graph(db, cache, trace_id))
    analysis_store.replace_analyses(db, {trace_id: result}, {trace_id: state["ingested_at"]})
    return {"metrics": result["metrics"], "findings": result["findings"]}


def findings_of(db: Database, cache: TraceCache, trace_ids: list[str]) -> dict[str, list[dict]]:
    """The audit findings of each of these traces that is stored, by id: as stored, in one read, where the analysis
    is fresh; made again (ensure_analysis) where it is stale."""
    states = analysis_store.analysis_states(db, trace_ids, ANALYSIS_VERSION)
    fresh = [trace_id for trace_id, state in states.items() if state["fresh"]]
    stored = analysis_store.read_findings_in(db, fresh) if fresh else {}
    found = {}
    for trace_id in trace_ids:
        state = states.get(trace_id)
        if state is None:
            continue
        if state["fresh"]:
            found[trace_id] = stored.get(trace_id, [])
        elif (result := ensure_analysis(db, cache, trace_id)) is not None:  # None: deleted meanwhile
            found[trace_id] = result["findings"]
    return found


def ensure_all(db: Database, batch: int = REANALYSIS_BATCH, progress=None,
               stop: threading.Event | None = None) -> int:
    """Analyse every trace whose stored analysis is missing or stale (stored by an older analysis version, or by
    none), `batch` traces per write; `progress(done, total)` before the first and after each; `stop` set ends it
    between batches. Returns how many were analysed."""
    stale = analysis_store.traces_needing_analysis(db, ANALYSIS_VERSION)
    if progress and stale:
        progress(0, len(stale))
    done = 0
    for start in range(0, len(stale), batch):
        if stop is not None and stop.is_set():
            break
        chunk = stale[start:start + batch]
        tables = trace_store.read_trace_tables(db, [row["trace_id"] for row in chunk])
        analysis_store.replace_analyses(db, analyst.analyse_tables(*tables),
                                        {row["trace_id"]: row["ingested_at"] for row in chunk})
        done = start + len(chunk)
        if progress:
            progress(done, len(stale))
    return done


class Reanalysis:
    """ensure_all in a thread of its own from the server's start: a new analysis version over a large corpus
    takes minutes, and the server answers meanwhile (pages read the analyses as stored, and say how far the pass
    has come). Stopped between batches when the server stops. Then `then(stop)`: what waits for the analyses
    (the corpus facts built ahead)."""

    def __init__(self, db: Database, then: Callable[[threading.Event], None] = lambda stop: None):
        self.done = 0
        self.total = 0
        self._then = then
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(db,), name="reanalysis", daemon=True)

    def start(self) -> "Reanalysis":
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and self.done < self.total

    def wait(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _progress(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        log.info("analysed again: %d of %d traces", done, total)

    def _run(self, db: Database) -> None:
        try:
            ensure_all(db, REANALYSIS_BATCH, self._progress, self._stop)
        except Exception:  # the traces keep their stored analyses, and the next start tries again
            log.exception("analysing stored traces again failed")
        self._then(self._stop)


def computed_credit(db: Database, cache: TraceCache, trace_id: str, rule: str, channel: str) -> list[float]:
    """A reward channel's value spread over the events by `rule` (see credit.assign); cached per trace."""
    # The version before the trace: read after it, a replace in between would key the old credit as new.
    version = trace_store.trace_version(db, trace_id)
    trace = stored_trace(db, cache, trace_id)
    if rule not in RULES:
        raise ValueError(f"rule: {rule!r} is not one of {', '.join(RULES)}")
    if channel not in trace["rewards"]:
        raise ValueError(f"channel: trace '{trace_id}' has no reward channel {channel!r}; "
                         f"it has {', '.join(trace['rewards']) or 'none'}")
    return cache.get_or_build(("credit", trace_id, version, rule, channel),
                              lambda: assign(trace, rule, trace["rewards"][channel], stored_graph(db, cache, trace_id)))


def computed_channel_names(trace_rewards: dict) -> list[str]:
    """Overlay names of every rule applied to every reward channel, e.g. "computed credit: causal × team"."""
    return [f"{COMPUTED_PREFIX}{rule} × {channel}" for channel in trace_rewards for rule in RULES]


def parse_computed(name: str) -> tuple[str, str] | None:
    """(rule, channel) of a computed-credit overlay name, or None for any other name."""
    if not name.startswith(COMPUTED_PREFIX) or " × " not in name:
        return None
    rule, channel = name[len(COMPUTED_PREFIX):].split(" × ", 1)
    return rule, channel


def credit_report(db: Database, cache: TraceCache, trace_id: str, values: list, human_mean: list | None) -> dict:
    """Roll-up of per-event credit to the eight units, and its correlation with human mean credit."""
    trace = stored_trace(db, cache, trace_id)
    return {"rollup": rollup(trace, values, stored_graph(db, cache, trace_id)),
            "human_correlation": correlation(values, human_mean) if human_mean else {"n": 0, "pearson": None}}
