"""Watch-based cache of the cluster (an informer) for the live controller.

:class:`WatchCache` keeps every kind of :data:`~scaler.sources.kube.READ_CALLS` except the
metrics API in memory: one thread per kind LISTs it (paginated, as
:func:`~scaler.sources.kube.fetch_objects` does) and then WATCHes it from the list's
resourceVersion, applying ``ADDED``/``MODIFIED``/``DELETED`` events and following ``BOOKMARK``
events. A steady-state control loop then reads the cache and makes exactly two requests per
iteration, the node-metrics and pod-metrics LISTs (:func:`snapshot_from_cache`); metrics-server
serves no watch.

Recovery, per kind:

* the watch stream ends cleanly (server ``timeoutSeconds``): WATCH again from the last
  resourceVersion seen (events and bookmarks advance it), no LIST; the kind stays fresh;
* ``410 Gone`` (HTTP status, or an ``ERROR`` event carrying a 410 ``Status``: the
  resourceVersion was compacted away): the kind is **stale**, LIST again at once, then WATCH
  from the new list;
* any other failure of a WATCH (an HTTP error, an ``ERROR`` event, a connection error or a
  broken stream, a malformed line): the kind is **stale**; back off exponentially with jitter
  (``backoff_initial`` doubling up to ``backoff_max``), then LIST again and WATCH from there. A
  failed LIST backs off the same way and is tried again. A stream that ends cleanly but at
  once, with nothing delivered, backs off too (and stays fresh).
* a ``429 Too Many Requests`` (API Priority and Fairness shedding load) is such a failure; its
  ``Retry-After`` is honoured: the next request of the kind waits at least that long
  (:func:`scaler.kube.retry.retry_after`).

**Stale kinds.** A kind is stale from the start until its first LIST completes, and from any
failure of its WATCH (the 410 included) or its LIST until a LIST completes again: only a
complete LIST says the cache holds every object of the kind as it is now, a re-opened WATCH
does not (what it replays may take a while, and after a 410 it cannot replay at all). A relist
of the pods of a 5,000-node cluster takes tens of seconds; :meth:`WatchCache.stale_kinds` says
which kinds are stale, why and for how long, and the controller starts no scale-down, and lets
no taint, eviction or delete go out, while it says anything.
* optional kinds (PVs, PVCs, Namespaces) that answer 403/404 to the LIST or the WATCH are
  skipped (empty, synced: the loop goes on without them), with one warning, and LISTed again
  later: after ``optional_retry_initial`` (30 s), then twice as long each time up to
  ``optional_retry_max`` (10 min). Once readable again they are cached as any kind, with an
  info line. RBAC that is still warming up after a kube-apiserver restart, or a ClusterRole
  granted later, therefore costs those kinds for a while, not until the process restarts
  (client-go's reflector likewise retries a forbidden LIST with backoff).

RBAC: ``list`` (:data:`WATCHED_CALLS`) and ``watch`` (:data:`WATCH_CALLS`) on every cached kind.

As in :mod:`scaler.sources.kube`, HTTP goes through the official ``kubernetes`` client with
``_preload_content=False`` (watch bodies are read line by line). Each LIST page and each event is
decoded once, by msgspec, straight into an immutable record (:mod:`scaler.model.decode`), and the
cache stores the records: a loop builds its snapshot from them without copying or parsing any
object again. It also remembers which pods changed since the last snapshot, so that the pods'
sort and grouping by node (:class:`~scaler.model.layout.PodLayout`) is updated rather than done
again.

**One bad object does not blind the cache.** An object that does not decode (a Node without
``status.allocatable``, a field of the wrong type) is kept out of the records as an
:class:`~scaler.model.unreadable.Unreadable`, in a LIST page (the rest of the page is kept) as
in a WATCH event, until it is fixed or deleted (:meth:`WatchCache.unreadable`);
:func:`snapshot_from_cache` charges it to the nodes it concerns, which are neither candidates
nor destinations, and everything else is decided.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Iterator, Sequence
from copy import deepcopy
from dataclasses import dataclass, replace
from typing import Any

import msgspec
import urllib3
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from scaler.kube.client import (
    DRA_GROUP,
    METRICS_GROUP,
    READ_CALLS,
    ApiCall,
    ClusterUnreachable,
    LiveSourceError,
    MetricsUnavailable,
)
from scaler.kube.retry import retry_after
from scaler.model.decode import decode_watch_event
from scaler.model.gcpause import no_cycle_collector
from scaler.model.layout import REBUILD_FRACTION, PodLayout
from scaler.model.parse import Record
from scaler.model.records import NodeMetrics, Pod, PodMetrics
from scaler.model.revisions import RevisionCounter
from scaler.model.snapshot import CONTROLLER_KINDS, DRA_KINDS, ClusterSnapshot, RecordSet, SnapshotError
from scaler.model.unreadable import Unreadable
from scaler.sources.kube import (
    _HttpStatusError,
    _lenient_page,
    _list_method,
    _one_line,
    _status_message,
    list_pages,
    skipped_optional,
    snapshot_with_unreadable,
)

__all__ = [
    "METRICS_CALLS",
    "WATCHED_CALLS",
    "WATCH_CALLS",
    "CacheNotSynced",
    "KindStats",
    "WatchCache",
    "fetch_metrics",
    "snapshot_from_cache",
]

logger = logging.getLogger(__name__)

WATCHED_CALLS: tuple[ApiCall, ...] = tuple(
    c for c in READ_CALLS if c.verb == "list" and c.group != METRICS_GROUP
)
"""The calls a :class:`WatchCache` lists and watches by default: :data:`READ_CALLS` without the
metrics API."""

WATCH_CALLS: tuple[ApiCall, ...] = tuple(replace(c, verb="watch") for c in WATCHED_CALLS)
"""The RBAC a :class:`WatchCache` needs on top of the ``list`` verbs of :data:`WATCHED_CALLS`:
``watch`` on the same resources (cluster-wide)."""

METRICS_CALLS: tuple[ApiCall, ...] = tuple(
    c for c in READ_CALLS if c.verb == "list" and c.group == METRICS_GROUP
)
"""The node-metrics and pod-metrics LISTs, made on every :func:`snapshot_from_cache`."""

_MIN_WATCH_SECONDS = 1.0  # a clean end sooner than this, with nothing delivered, backs off


class CacheNotSynced(LiveSourceError):
    """A snapshot was asked of a :class:`WatchCache` that has not listed every kind yet (or was
    stopped): building one from a partial cache would make nodes look empty."""


@dataclass(slots=True)
class KindStats:
    """Counters of one kind's list/watch loop (for tests and metrics).

    Attributes:
        lists: complete LISTs (all pages), the first one included.
        relists: LISTs after the first (a 410 Gone).
        watches: WATCH requests made.
        events: ``ADDED``/``MODIFIED``/``DELETED`` events applied.
        bookmarks: ``BOOKMARK`` events received.
        errors: failed LIST/WATCH requests, ``ERROR`` events (other than 410), broken streams.
        consecutive_errors: failures since the last complete LIST or clean end of a WATCH.
        stale: why the kind's cached objects may be stale now, ``""`` while they are fresh:
            from the start until the first LIST completes, and from any failure of a WATCH
            (410 included) or a LIST until a LIST completes again (see the module docstring).
        stale_since: when ``stale`` began (``time.monotonic()`` seconds; 0 while fresh).
        skipped: an optional kind the API refused (403/404); it stays empty until a later LIST
            succeeds (:class:`WatchCache` ``optional_retry_*``).
        skips: how many times the kind was refused (for tests and metrics).
        resource_version: the last resourceVersion seen (``""`` before the first LIST).
    """

    lists: int = 0
    relists: int = 0
    watches: int = 0
    events: int = 0
    bookmarks: int = 0
    errors: int = 0
    consecutive_errors: int = 0
    stale: str = "not listed yet"
    stale_since: float = 0.0
    skipped: bool = False
    skips: int = 0
    resource_version: str = ""


@dataclass(slots=True)
class _LoopState:
    need_list: bool = True
    failures: int = 0  # consecutive
    refusals: int = 0  # consecutive 403/404 of an optional kind


class _Gone(Exception):
    """The resourceVersion we watch from is too old: relist."""


class _Skip(Exception):
    """An optional kind the API refuses (403/404): cache none of it."""


class _WatchError(Exception):
    """A failed watch: back off (at least ``retry_after`` seconds when the server asked for it),
    then relist."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class WatchCache:
    """An in-memory, watch-maintained copy of the cluster's objects.

    Args:
        api: a ``kubernetes.client.ApiClient`` (see :func:`~scaler.sources.kube.make_api_client`);
            the cache makes its own client from a copy of its configuration, with a connection
            pool large enough for one long-lived watch per kind, and closes it in :meth:`stop`.
        calls: the kinds to cache (default :data:`WATCHED_CALLS`).
        page_size: items per LIST page (>= 1).
        bookmarks: ask for ``BOOKMARK`` events (``allowWatchBookmarks``).
        backoff_initial: first retry delay after a failure, seconds (> 0).
        backoff_max: longest retry delay, seconds (>= ``backoff_initial``).
        watch_timeout_seconds: ``timeoutSeconds`` of each WATCH (> 0); the server ends the
            stream then and the cache watches again from where it was.
        request_timeout: client-side timeout of each LIST page, and the connect timeout of a
            WATCH, seconds (> 0). A WATCH's read timeout is ``watch_timeout_seconds`` plus this.
        optional_retry_initial: seconds before an optional kind refused 403/404 is LISTed
            again (> 0); each further refusal in a row doubles it (with jitter), up to
            ``optional_retry_max`` seconds (>= ``optional_retry_initial``).

    Raises:
        ValueError: an argument is out of range, or ``calls`` holds a metrics call or a kind
            twice.
    """

    def __init__(
        self,
        api: ApiClient,
        calls: Sequence[ApiCall] = WATCHED_CALLS,
        *,
        page_size: int = 500,
        bookmarks: bool = True,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        watch_timeout_seconds: int = 300,
        request_timeout: float = 30.0,
        optional_retry_initial: float = 30.0,
        optional_retry_max: float = 600.0,
    ) -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be >= 1, got {page_size}")
        if not 0 < backoff_initial <= backoff_max:
            raise ValueError(f"need 0 < backoff_initial <= backoff_max, got {backoff_initial}, {backoff_max}")
        if not 0 < optional_retry_initial <= optional_retry_max:
            raise ValueError(
                "need 0 < optional_retry_initial <= optional_retry_max, "
                f"got {optional_retry_initial}, {optional_retry_max}"
            )
        if watch_timeout_seconds < 1 or request_timeout <= 0:
            raise ValueError("need watch_timeout_seconds >= 1 (whole seconds) and request_timeout > 0")
        kinds = [c.kind for c in calls]
        if len(set(kinds)) != len(kinds):
            raise ValueError(f"calls list a kind twice: {kinds}")
        if any(c.group == METRICS_GROUP or c.verb != "list" for c in calls):
            raise ValueError("the metrics API cannot be watched: only LIST calls of other groups")
        self.api = api
        self.calls: tuple[ApiCall, ...] = tuple(calls)
        self.page_size = page_size
        self.bookmarks = bookmarks
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.watch_timeout_seconds = watch_timeout_seconds
        self.request_timeout = request_timeout
        self.optional_retry_initial = optional_retry_initial
        self.optional_retry_max = optional_retry_max
        started = time.monotonic()
        self.stats: dict[str, KindStats] = {c.kind: KindStats(stale_since=started) for c in self.calls}
        """Counters per kind (``stats["Pod"].relists``); updated live by the worker threads."""
        self._lock = threading.Lock()
        self._store: dict[str, dict[tuple[str, str], Record]] = {c.kind: {} for c in self.calls}
        self._bad: dict[str, dict[tuple[str, str], Unreadable]] = {c.kind: {} for c in self.calls}
        self._synced = {c.kind: threading.Event() for c in self.calls}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._responses: dict[str, Any] = {}  # kind -> the open watch response (to cut it on stop)
        self._client: ApiClient | None = None
        # Pods sorted and grouped as of the previous records(), and the keys of the pods changed
        # since (None: relisted, build again). records() updates it under its own lock.
        self._pod_layout: PodLayout | None = None
        self._pod_changes: set[tuple[str, str]] | None = None
        self._layout_lock = threading.Lock()
        self._revisions = RevisionCounter(CONTROLLER_KINDS, DRA_KINDS)  # numbers every change (under _lock)
        self.revisions: RevisionCounter | None = None
        """The numbers of the records of the last :meth:`records` (its snapshots carry them)."""

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start one daemon thread per kind (LIST, then WATCH). Returns at once; see
        :meth:`wait_synced`. A cache starts once: after :meth:`stop`, make a new one.

        Raises:
            RuntimeError: already started.
        """
        if self._threads:
            raise RuntimeError("WatchCache already started")
        cfg = deepcopy(self.api.configuration)
        cfg.connection_pool_maxsize = max(int(cfg.connection_pool_maxsize or 0), len(self.calls) + 4)
        # A 429 must reach the loop at once (the kind is stale from then on); the loop itself
        # waits for its Retry-After.
        cfg.client_go_retries = False
        self._client = ApiClient(configuration=cfg)
        for call in self.calls:
            thread = threading.Thread(
                target=self._run, args=(call,), name=f"watch-{call.display}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every thread: cut open watch streams and wait up to ``timeout`` seconds for the
        threads to end. The cached objects stay readable (idempotent)."""
        self._stop.set()
        with self._lock:
            responses = list(self._responses.values())
        for resp in responses:
            _cut(resp)
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        client: Any = self._client
        if client is not None:
            client.close()  # empties the connection pool; a straggling thread would reconnect

    def __enter__(self) -> WatchCache:
        """Start the cache (``with WatchCache(api) as cache: ...``)."""
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop the cache."""
        self.stop()

    @property
    def running(self) -> bool:
        """Whether any worker thread is alive."""
        return any(t.is_alive() for t in self._threads)

    @property
    def synced(self) -> bool:
        """Whether every kind has been listed (or skipped) at least once."""
        return all(e.is_set() for e in self._synced.values())

    def wait_synced(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every kind's first LIST; returns :attr:`synced`."""
        deadline = time.monotonic() + timeout
        return all(e.wait(max(0.0, deadline - time.monotonic())) for e in self._synced.values())

    # -- reads -----------------------------------------------------------------------------------

    def malformed(self) -> list[str]:
        """Why each object the cache could not read is not in it (one message per object, naming
        it), until the object is fixed or deleted."""
        return [u.message for u in self.unreadable()]

    def unreadable(self) -> list[Unreadable]:
        """The objects the cache could not read (each kept out of the records), until each is
        fixed or deleted; in kind order, then as listed or changed."""
        with self._lock:
            return [u for bad in self._bad.values() for u in bad.values()]

    def stale_kinds(self) -> dict[str, str]:
        """Kind → why its cached objects may be stale now and since how long (``relisting after
        watch ERROR 410 … (for 3s)``); empty when every kind is fresh (see the module docstring). A kind skipped
        because the API refuses it is not stale: it is known to be empty."""
        now = time.monotonic()
        with self._lock:
            return {
                kind: f"{st.stale} (for {now - st.stale_since:.0f}s)"
                for kind, st in self.stats.items()
                if st.stale and not st.skipped
            }

    def records(self) -> RecordSet:
        """The cached records by kind (a consistent view: each kind's dict is copied under the
        lock, the records themselves are immutable and shared), with the pods already sorted
        and grouped by node (``RecordSet.pod_layout``): the previous call's layout updated
        with the pods changed since (:meth:`PodLayout.update`), or built anew after a LIST."""
        with self._layout_lock:
            with self._lock:
                records = RecordSet()
                records.by_kind = {c.kind: dict(self._store[c.kind]) for c in self.calls}
                changed, self._pod_changes = self._pod_changes, set()
                self.revisions = self._revisions.copy()
            pods: dict[tuple[str, str], Pod] | None = records.by_kind.get("Pod")  # type: ignore[assignment]
            if pods is None:
                return records
            if changed is None or self._pod_layout is None:
                self._pod_layout = PodLayout.build(pods.values())
            else:
                self._pod_layout = self._pod_layout.update(pods, changed)
            records.pod_layout = self._pod_layout
        return records

    # -- worker ----------------------------------------------------------------------------------

    def _run(self, call: ApiCall) -> None:
        state = _LoopState()
        while not self._stop.is_set():
            try:
                self._step(call, state)
            except Exception as e:  # a bug or an unexpected answer: never let the thread die
                logger.exception("%s: unexpected error in the watch loop", call.display)
                state.failures = self._failed(call, state.failures, f"unexpected error: {e!r}")
                state.need_list = True

    def _step(self, call: ApiCall, state: _LoopState) -> None:
        """One LIST (if needed) and one WATCH, or one failure and its back-off."""
        if state.need_list:
            try:
                self._list(call)
            except _HttpStatusError as e:
                if call.optional and e.status in (403, 404):
                    self._skip(call, e.describe(call), state)
                else:
                    state.failures = self._failed(call, state.failures, e.describe(call), e.retry_after)
                return
            except (ClusterUnreachable, LiveSourceError) as e:
                state.failures = self._failed(call, state.failures, str(e))
                return
            state.need_list, state.failures = False, 0
            self.stats[call.kind].consecutive_errors = 0
            if state.refusals:
                state.refusals = 0
                self.stats[call.kind].skipped = False
                logger.info("%s is readable again: cached from now on", call.display)
        started = time.monotonic()
        try:
            delivered = self._watch(call)
        except _Gone as e:
            self._mark_stale(call, f"relisting after {e}")
            logger.info("%s: %s; stale until relisted", call.display, e)
            state.need_list = True
            return
        except _WatchError as e:
            if not self._stop.is_set():
                state.need_list = True
                state.failures = self._failed(call, state.failures, str(e), e.retry_after)
            return
        except _Skip as e:
            self._skip(call, str(e), state)
            return
        if delivered or time.monotonic() - started >= _MIN_WATCH_SECONDS:
            state.failures = 0
            self.stats[call.kind].consecutive_errors = 0
        else:  # ended at once with nothing: do not hammer the server
            state.failures += 1
            self._stop.wait(self._backoff(state.failures))

    def _skip(self, call: ApiCall, message: str, state: _LoopState) -> None:
        """An optional kind refused (403/404): empty it, count it synced, and wait before the
        next LIST (one warning for a run of refusals; the retries are logged at debug level)."""
        with self._lock:
            self._store[call.kind] = {}
            self._bad[call.kind] = {}
        stats = self.stats[call.kind]
        stats.skipped = True
        stats.stale, stats.stale_since = "", 0.0  # known to be empty, not stale
        stats.skips += 1
        state.refusals += 1
        state.need_list = True
        self._synced[call.kind].set()
        base = min(self.optional_retry_max, self.optional_retry_initial * 2.0 ** min(state.refusals - 1, 30))
        delay = base * random.uniform(0.75, 1.0)
        if state.refusals == 1 and call.group == DRA_GROUP and "HTTP 404" in message:
            skipped_optional(call, 404, message, logger)  # said once for the whole API group
        elif state.refusals == 1:
            logger.warning(
                "skipping %s: %s; listing it again in %.0fs, then less and less often (at most every %.0fs)",
                call.display, message, delay, self.optional_retry_max,
            )  # fmt: skip
        else:
            logger.debug("%s still refused (%s); again in %.0fs", call.display, message, delay)
        self._stop.wait(delay)

    def _mark_stale(self, call: ApiCall, why: str) -> None:
        """The kind may be stale from now until a LIST completes (keeps the first reason's time)."""
        stats = self.stats[call.kind]
        with self._lock:
            if not stats.stale:
                stats.stale_since = time.monotonic()
            stats.stale = why

    def _failed(self, call: ApiCall, failures: int, message: str, retry_after: float | None = None) -> int:
        """Count one failure of the kind's LIST or WATCH (the kind is stale), log it and wait:
        the exponential backoff, or the answer's ``Retry-After`` when longer. Returns the
        consecutive failures."""
        stats = self.stats[call.kind]
        stats.errors += 1
        failures += 1
        stats.consecutive_errors = failures
        self._mark_stale(call, message)
        delay = self._backoff(failures)
        honoured = ""
        if retry_after is not None and retry_after > delay:
            delay, honoured = retry_after, " (the server's Retry-After)"
        logger.warning("%s: %s; retrying in %.1fs%s", call.display, message, delay, honoured)
        self._stop.wait(delay)
        return failures

    def _backoff(self, failures: int) -> float:
        base = min(self.backoff_max, self.backoff_initial * 2.0 ** min(failures - 1, 30))
        return base * random.uniform(0.5, 1.0)

    def _list(self, call: ApiCall) -> None:
        """One complete paginated LIST of ``call``; replaces the kind's cached records (an item
        that does not decode is kept as an :class:`Unreadable` instead) and makes it fresh."""
        assert self._client is not None
        items: dict[tuple[str, str], Record] = {}
        bad: dict[tuple[str, str], Unreadable] = {}
        records, rv = list_pages(self._client, call, self.page_size, self.request_timeout, _lenient_page)
        for rec in records:
            key = (getattr(rec, "namespace", "") if call.namespaced else "", rec.name)
            if isinstance(rec, Unreadable):
                bad[key] = rec
            else:
                items[key] = rec
        stats = self.stats[call.kind]
        with self._lock:
            self._store[call.kind] = items
            self._bad[call.kind] = bad
            if call.kind == "Pod":
                self._pod_changes = None
            self._revisions.restart()  # a relist may have missed changes: nothing kept is reused
            stats.resource_version = rv
            if stats.lists:
                stats.relists += 1
            stats.lists += 1
            if stats.stale and stats.lists > 1:
                logger.info("%s relisted: fresh again after %.1fs stale (%s)", call.display,
                            time.monotonic() - stats.stale_since, stats.stale)  # fmt: skip
            stats.stale, stats.stale_since = "", 0.0
        self._synced[call.kind].set()

    def _watch(self, call: ApiCall) -> int:
        """One WATCH from the kind's last resourceVersion until the stream ends; returns how many
        events and bookmarks it delivered.

        Raises:
            _Gone: the resourceVersion is too old (relist).
            _WatchError: anything else went wrong (back off, watch again).
        """
        assert self._client is not None
        stats = self.stats[call.kind]
        stats.watches += 1
        params: dict[str, Any] = {
            "watch": True,
            "resource_version": stats.resource_version,
            "timeout_seconds": int(self.watch_timeout_seconds),
            "_preload_content": False,
            "_request_timeout": (self.request_timeout, self.watch_timeout_seconds + self.request_timeout),
        }
        if self.bookmarks:
            params["allow_watch_bookmarks"] = True
        try:
            resp = _list_method(self._client, call)(**params)
        except ApiException as e:
            if e.status == 410:
                raise _Gone(f"HTTP 410: {_status_message(e.body)}") from None
            if call.optional and e.status in (403, 404):
                raise _Skip(f"cannot watch {call.display} ({call.path}): HTTP {e.status}") from None
            raise _WatchError(
                f"watch failed: HTTP {e.status} {e.reason or ''}: {_status_message(e.body)}", retry_after(e)
            ) from None
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise _WatchError(f"watch failed: {_one_line(str(e))}") from None
        with self._lock:
            self._responses[call.kind] = resp
        delivered = 0
        clean = False
        try:
            if self._stop.is_set():
                return 0
            for line in _lines(resp):
                delivered += 1
                self._apply(call, line)
                if self._stop.is_set():
                    return delivered
            clean = True
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as e:
            if not self._stop.is_set():
                raise _WatchError(f"watch stream broken: {_one_line(str(e))}") from None
        finally:
            with self._lock:
                self._responses.pop(call.kind, None)
            if clean:
                resp.release_conn()  # fully read: the connection can be reused
            else:
                resp.close()
                resp.release_conn()
        return delivered

    def _apply(self, call: ApiCall, line: bytes) -> None:
        """Apply one watch event line to the cache.

        Raises:
            _Gone: an ``ERROR`` event with code 410.
            _WatchError: any other ``ERROR`` event, or a malformed line.
        """
        try:
            event = decode_watch_event(line, call.kind)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise _WatchError(f"malformed watch event ({e}): {line[:200]!r}") from None
        stats = self.stats[call.kind]
        if event.type == "ERROR":
            if event.code == 410:
                raise _Gone(f"watch ERROR {event.message}")
            raise _WatchError(f"watch ERROR {event.message}")
        if event.type == "BOOKMARK":
            stats.bookmarks += 1
            if event.resource_version:
                stats.resource_version = event.resource_version
            return
        if event.type not in ("ADDED", "MODIFIED", "DELETED"):
            raise _WatchError(f"unknown watch event type {event.type!r}")
        if not event.name:
            raise _WatchError("watch event object without metadata.name")
        key = (event.namespace, event.name)
        with self._lock:
            store, bad = self._store[call.kind], self._bad[call.kind]
            changes = self._pod_changes
            if call.kind == "Pod" and changes is not None:
                changes.add(key)
                if len(changes) * REBUILD_FRACTION > len(store):  # records() builds anew: stop counting
                    self._pod_changes = None
            self._revisions.record(call.kind, store.get(key), event.record)
            for u in (bad.get(key), event.unreadable):  # an unreadable object concerns its node
                if u is not None and u.node:
                    self._revisions.node_changed(u.node)
            if event.record is not None:
                store[key] = event.record
                bad.pop(key, None)
            else:
                store.pop(key, None)
                if event.unreadable is not None:
                    bad[key] = event.unreadable
                else:
                    bad.pop(key, None)
            stats.events += 1
            if event.resource_version:
                stats.resource_version = event.resource_version


# -- snapshots -------------------------------------------------------------------------------------


def fetch_metrics(api: ApiClient, timeout_seconds: float = 30) -> list[NodeMetrics | PodMetrics]:
    """Exactly one LIST each of ``metrics.k8s.io`` nodes and pods (:data:`METRICS_CALLS`),
    decoded straight into records.

    A malformed metrics item is left out with a warning: its node or pod has no reading (unknown
    usage, never zero).

    Raises:
        ClusterUnreachable: connection refused, DNS or TLS failure, timeout.
        MetricsUnavailable: an HTTP error (404/503: metrics-server missing or down), or a body
            that is not a JSON List.
    """
    records: list[NodeMetrics | PodMetrics] = []
    for call in METRICS_CALLS:
        try:
            for rec in list_pages(api, call, 1, timeout_seconds, _lenient_page)[0]:
                if isinstance(rec, Unreadable):  # that node or pod has no reading: unknown usage
                    logger.warning("%s is left out: %s", rec.display, rec.message)
                else:
                    records.append(rec)
        except _HttpStatusError as e:
            raise MetricsUnavailable(e.describe(call)) from None
        except MetricsUnavailable:
            raise
        except (LiveSourceError, SnapshotError) as e:
            raise MetricsUnavailable(str(e)) from None
    return records


def snapshot_from_cache(cache: WatchCache, api: ApiClient, now: float) -> ClusterSnapshot:
    """Build a snapshot from the cache's records plus fresh metrics (:func:`fetch_metrics`: two
    requests). No cached object is copied or parsed again.

    Every controller kind the cache watches counts as listed (``workload_kinds``), as in
    :func:`~scaler.sources.kube.load_live_snapshot`. The objects the cache could not read
    (:meth:`WatchCache.unreadable`) are charged to the nodes they concern
    (:func:`~scaler.sources.kube.snapshot_with_unreadable`); the rest is the snapshot. The
    snapshot carries the numbers of the cache's changes (:mod:`scaler.model.revisions`; every
    event numbered as it is applied, a relist starting a new source), which the evaluation
    cache reads.

    Args:
        cache: a started, synced :class:`WatchCache`.
        api: the client for the metrics LISTs.
        now: evaluation time, Unix seconds.

    Raises:
        CacheNotSynced: some kind has not been listed yet.
        ClusterUnreachable, MetricsUnavailable: as :func:`fetch_metrics`.
    """
    if not cache.synced:
        missing = sorted(k for k, e in cache._synced.items() if not e.is_set())
        raise CacheNotSynced(f"the watch cache has not listed {', '.join(missing)} yet")
    records = cache.records()
    unreadable = cache.unreadable()
    kinds = {c.kind for c in cache.calls if c.kind in CONTROLLER_KINDS}
    with no_cycle_collector():  # the metrics records and the snapshot go to the oldest generation
        for rec in fetch_metrics(api):
            records.add(rec)
        snap = snapshot_with_unreadable(records, unreadable, now, kinds)
    numbers = cache.revisions
    return replace(snap, revisions=numbers.stamp(snap)) if numbers is not None else snap


# -- helpers ---------------------------------------------------------------------------------------


def _lines(resp: Any) -> Iterator[bytes]:
    """The non-empty lines of a streamed (chunked) response body, as each arrives."""
    buffer = b""
    for chunk in resp.stream(amt=None, decode_content=True):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


def _cut(resp: Any) -> None:
    """Unblock a thread reading ``resp``: shut the socket down (urllib3 >= 2.3), else close."""
    try:
        resp.shutdown()
    except Exception:  # older urllib3, or the connection is already gone
        try:
            resp.close()
        except Exception:
            logger.debug("could not close a watch response", exc_info=True)
