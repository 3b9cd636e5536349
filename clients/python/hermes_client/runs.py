"""Gateway runs: the client tells hermes when a Hermes gateway process
starts, that it is alive (a heartbeat), which turns it runs, and when it
stops cleanly. A gateway that dies without a word is found by its lapsed
lease, and hermes gives its open turns crash recovery (the turn is cut, the
lane marked resume-pending, the stuck-loop count moves).

:func:`instrument` wraps three methods of Hermes' ``GatewayRunner`` to do
so (the import hook calls it when ``gateway.run`` loads):

- ``start``: announce the run before Hermes' own start-up (which reads
  ``_entries`` for its stuck-loop check, so hermes' suspensions are seen),
- ``stop``: after Hermes' drain, tell hermes the run stopped,
- ``_run_agent``: the agent's turn on a lane, opened on hermes as a turn
  of the run and closed when the agent returns. A turn the drain cut
  (interrupted while the gateway stops) is left open: the run's stop cuts
  it, with the resume mark and the stuck-loop count Hermes' gateway keeps
  in ``.restart_failure_counts``.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import socket
import threading
import uuid
from typing import Any, Dict, Optional

from ._http import Transport
from .errors import HermesConflict, HermesError

logger = logging.getLogger(__name__)

DEFAULT_LEASE_SECONDS = 60


def gateway_name() -> str:
    """The gateway's name in hermes: HERMES_GATEWAY, else "default"."""
    return os.environ.get("HERMES_GATEWAY") or "default"


def default_lease() -> int:
    """The run's lease: HERMES_GATEWAY_LEASE_SECONDS (5 to 3600), else 60."""
    try:
        return min(3600, max(5, int(os.environ.get("HERMES_GATEWAY_LEASE_SECONDS", DEFAULT_LEASE_SECONDS))))
    except ValueError:
        return DEFAULT_LEASE_SECONDS


class GatewayRun:
    """One process of a gateway, announced to hermes.

    ``start()`` announces it (hermes first recovers the gateway's previous
    run if it never stopped) and starts a daemon thread that renews the
    lease every third of ``lease_seconds``; ``stop()`` ends it cleanly.
    """

    def __init__(self, transport: Transport, gateway: Optional[str] = None,
                 lease_seconds: Optional[int] = None, run_id: Optional[str] = None) -> None:
        self._http = transport
        self.gateway = gateway or gateway_name()
        self.run_id = run_id or uuid.uuid4().hex
        self.lease_seconds = int(lease_seconds) if lease_seconds is not None else default_lease()
        self.started: Optional[Dict[str, Any]] = None
        self.stopped: Optional[Dict[str, Any]] = None
        self._halt = threading.Event()
        self._beat: Optional[threading.Thread] = None

    def ref(self) -> Dict[str, str]:
        """The run as turns/start names it."""
        return {"gateway": self.gateway, "run_id": self.run_id}

    def _path(self, *rest: str) -> str:
        return self._http.path("gateway-runs", self.gateway, self.run_id, *rest)

    def start(self) -> Dict[str, Any]:
        """Announces the run: ``{"run", "previous", "interrupted",
        "suspended"}`` (the lanes hermes recovered from the previous run)."""
        self.started = self._http.post("/gateway-runs", self._announcement())
        prev = self.started.get("previous") or {}
        if self.started.get("interrupted") or self.started.get("suspended"):
            logger.warning(
                "hermes: the previous run of gateway %s ended %s; turns recovered on %d lane(s), "
                "%d suspended as stuck", self.gateway, prev.get("state") or "?",
                len(self.started.get("interrupted") or []), len(self.started.get("suspended") or []))
        self._beat = threading.Thread(target=self._heartbeat, name=f"hermes-run-{self.run_id[:8]}", daemon=True)
        self._beat.start()
        return self.started

    def _heartbeat(self) -> None:
        interval = max(1.0, self.lease_seconds / 3.0)
        while not self._halt.wait(interval):
            try:
                self.beat()
            except HermesConflict as e:
                # hermes saw no heartbeat in time (the process was frozen,
                # or hermes was down a whole lease) and declared the run
                # lost: its turns were recovered. The process is alive:
                # it announces itself again as a new run.
                logger.error("hermes: gateway run %s is no longer running (%s); announcing a new run",
                             self.run_id, e.message)
                try:
                    self.run_id = uuid.uuid4().hex
                    self.started = self._http.post("/gateway-runs", self._announcement())
                except HermesError as e2:
                    logger.error("hermes: announcing gateway run %s failed: %s", self.run_id, e2)
            except HermesError as e:
                logger.warning("hermes: heartbeat of gateway run %s failed: %s", self.run_id, e)

    def _announcement(self) -> Dict[str, Any]:
        return {"gateway": self.gateway, "run_id": self.run_id, "pid": os.getpid(),
                "host": socket.gethostname()[:200], "lease_seconds": self.lease_seconds}

    def beat(self) -> Dict[str, Any]:
        """Renews the lease now."""
        return self._http.post(self._path("heartbeat"), {})

    def stop(self, restart: bool = False) -> Optional[Dict[str, Any]]:
        """Ends the run cleanly (the gateway's drain is done): hermes cuts
        the turns still open, as Hermes' gateway marks them."""
        self._halt.set()
        if self.started is None or self.stopped is not None:
            return self.stopped
        self.stopped = self._http.post(self._path("stop"), {"restart": bool(restart)})
        return self.stopped


def _client_store(runner: Any):
    from .session import SessionStore
    store = getattr(runner, "session_store", None)
    return store if isinstance(store, SessionStore) else None


def _turn_done(result: Any) -> bool:
    """Hermes' own test of a turn that really completed
    (gateway.run._should_clear_resume_pending_after_turn)."""
    if not isinstance(result, dict):
        return False
    if result.get("interrupted") or result.get("failed") or result.get("partial") or result.get("error"):
        return False
    return result.get("completed") is not False


def instrument(runner_cls: type) -> type:
    """Wraps GatewayRunner.start, .stop and ._run_agent (once)."""
    if getattr(runner_cls, "_hermes_client_instrumented", False):
        return runner_cls
    orig_start, orig_stop, orig_run = runner_cls.start, runner_cls.stop, runner_cls._run_agent

    @functools.wraps(orig_start)
    async def start(self, *args, **kwargs):
        store = _client_store(self)
        if store is not None and getattr(store, "_gateway_run", None) is None:
            run = GatewayRun(store._http)
            try:
                run.start()
                store._gateway_run = run
                if store._loaded:
                    store._refresh_all()
            except HermesError as e:
                logger.error("hermes: could not announce gateway run: %s (crash recovery of this run's "
                             "turns is off)", e)
        return await orig_start(self, *args, **kwargs)

    @functools.wraps(orig_stop)
    async def stop(self, *args, **kwargs):
        try:
            return await orig_stop(self, *args, **kwargs)
        finally:
            store = _client_store(self)
            run = getattr(store, "_gateway_run", None) if store is not None else None
            if run is not None:
                restart = bool(kwargs.get("restart") or getattr(self, "_restart_requested", False))
                try:
                    run.stop(restart=restart)
                except HermesError as e:
                    logger.error("hermes: could not record the clean stop of gateway run %s: %s", run.run_id, e)

    run_sig = inspect.signature(orig_run)

    @functools.wraps(orig_run)
    async def _run_agent(self, *args, **kwargs):
        try:
            session_key = run_sig.bind(self, *args, **kwargs).arguments.get("session_key")
        except TypeError:
            session_key = None
        store = _client_store(self)
        run = getattr(store, "_gateway_run", None) if store is not None else None
        depth = getattr(self, "_hermes_turn_depth", None)
        if depth is None:
            depth = {}
            self._hermes_turn_depth = depth
        outer = bool(run is not None and session_key and not depth.get(session_key))
        turn_id = None
        if outer:
            try:
                # The turn Hermes' active-turn marker opened, when it did.
                turn_id = store._hold_turn(session_key, "runner")
            except HermesError as e:
                logger.warning("hermes: turns/start of %s failed: %s", session_key, e)
        if session_key:
            depth[session_key] = depth.get(session_key, 0) + 1
        result = None
        try:
            result = await orig_run(self, *args, **kwargs)
            return result
        finally:
            if session_key:
                depth[session_key] -= 1
                if not depth[session_key]:
                    del depth[session_key]
            if turn_id is not None:
                done = _turn_done(result)
                # A turn cut by the drain stays open: the run's stop cuts it
                # (resume mark, stuck-loop count), as Hermes counts it.
                cut = not done and getattr(self, "_draining", False)
                try:
                    store._release_turn(session_key, turn_id, "runner", failed=not done, keep_open=cut)
                except HermesError as e:
                    logger.warning("hermes: completing the turn of %s failed: %s", session_key, e)

    runner_cls.start, runner_cls.stop, runner_cls._run_agent = start, stop, _run_agent
    runner_cls._hermes_client_instrumented = True
    return runner_cls
