"""pytest plugin: runs Hermes' own SessionStore / SessionDB tests through
hermes_client against real `hermes serve` processes (loopback only).

Loaded by run.py with ``-p hermes_conformance``. It imports Hermes' own
``gateway.session`` and ``hermes_state`` from the checkout, then puts the
client's classes in place of ``SessionStore``, ``SessionSource``,
``SessionEntry`` and ``SessionDB`` before any test module imports them. Each
database path (``SessionDB(db_path)``) or sessions directory gets its own
hermes home and server, stopped after the test, so tests stay isolated as
they are with their own SQLite files. The test files are run unmodified.

A test whose source (or the source of the fixtures it names) touches Python
internals is reported not applicable with the reason, never run: see
INTERNALS below.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

import hermes_client
from hermes_client import session as client_session
from hermes_client import state as client_state

MODE = os.environ.get("HERMES_CONFORMANCE_MODE", "client")

# Tests whose assertion is about Python-internal state of Hermes' classes
# that cannot exist over HTTP: (substring of the test's or its fixtures'
# source, one-line reason). Only applied with the client.
INTERNALS = [
    ("._conn", "reads Hermes' SQLite connection (hermes' state.db is its read model, behind the API)"),
    ("sqlite3", "opens or inspects Hermes' SQLite file"),
    ("_execute_write", "calls Hermes' private SQLite write helper"),
    ("_init_schema", "tests Hermes' schema creation"),
    ("_reconcile_columns", "tests Hermes' schema migration"),
    ("SCHEMA_SQL", "tests Hermes' schema text"),
    ("SCHEMA_VERSION", "tests Hermes' schema version and migrations"),
    ("apply_wal_with_fallback", "tests Hermes' SQLite journal setup"),
    ("repair_state_db_schema", "tests Hermes' SQLite repair"),
    ("_fts_", "inspects Hermes' FTS5 tables"),
    ("_sanitize_fts5_query", "calls Hermes' private FTS5 query sanitizer (hermes' is tested in Go)"),
    ("SessionDB._contains_cjk", "calls Hermes' private CJK detector of its SQLite LIKE fallback"),
]

# Patterns of one file: (file, substring, reason).
FILE_INTERNALS = [
    ("tests/gateway/test_session_store_prune.py", "store._entries[",
     "puts SessionEntry objects with past times straight into _entries (lanes hermes does not have) "
     "and checks the in-memory dict after pruning"),
    ("tests/gateway/test_session_reset_notify.py", "store._should_reset(entry, source)",
     "asks _should_reset about a SessionEntry made in the test with a past updated_at (no lane in hermes)"),
    ("tests/gateway/test_session.py", "store._save = MagicMock()",
     "puts a SessionEntry made in the test into _entries with _save mocked and reads that in-memory "
     "object back (hermes has no such lane)"),
    ("tests/", "SessionDB._encode_content",
     "patches Hermes' private SessionDB._encode_content to make a SQLite insert fail"),
]

# Single tests, by node id: reason.
NOT_APPLICABLE: dict = {
    "tests/gateway/test_telegram_topic_mode.py::test_binding_survives_session_deletion_via_cascade":
        "deletes the session row through SessionDB._conn and checks SQLite's ON DELETE CASCADE "
        "(hermes: DELETE /v1/transcripts/{id} drops the binding, tested in Go)",
    "tests/gateway/test_telegram_topic_mode.py::test_migration_rebuilds_v1_binding_table_with_cascade_fk":
        "rebuilds Hermes' v1 bindings table through SessionDB._conn (hermes' state.db always has v2)",
    "tests/gateway/test_telegram_topic_mode.py::test_topic_help_subcommand_returns_usage":
        "asserts through SessionDB._conn that no telegram_dm_* table was created (hermes' state.db always has them)",
    "tests/gateway/test_telegram_topic_mode.py::test_topic_refuses_unauthorized_user":
        "asserts through SessionDB._conn that no telegram_dm_* table was created (hermes' state.db always has them)",
    "tests/gateway/test_telegram_topic_mode.py::test_list_telegram_topic_bindings_for_chat_no_table":
        "asserts through SessionDB._conn that no telegram_dm_* table was created (hermes' state.db always has them)",
}

_BIN = os.environ.get("HERMES_BIN", "hermes")
_servers: dict = {}
_started_this_test: list = []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Server:
    def __init__(self, home: Path) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.home = home
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log = open(home / "serve.log", "wb")
        env = {k: v for k, v in os.environ.items() if k not in ("HERMES_API_TOKEN", "HERMES_HOME")}
        # The real clock: Hermes' tests let time pass between calls
        # (an entry touched after its creation has updated_at > created_at).
        self.proc = subprocess.Popen([_BIN, "serve", "--home", str(home), "--addr", f"127.0.0.1:{port}"],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=2) as r:
                    if r.status == 200:
                        return
            except Exception:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        raise RuntimeError(f"hermes serve in {home} did not become ready")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def _server_for(anchor) -> _Server:
    if anchor is None:
        anchor = Path(os.environ.get("HERMES_HOME") or _fallback_home()) / "state.db"
    home = Path(anchor).resolve().parent / ".hermes-conformance-home"
    key = str(home)
    if key not in _servers:
        _servers[key] = _Server(home)
        _started_this_test.append(key)
    return _servers[key]


_fallback = []


def _fallback_home() -> str:
    if not _fallback:
        _fallback.append(tempfile.mkdtemp(prefix="hermes-conf-"))
    return _fallback[0]


class SessionDB(client_state.SessionDB):
    def __init__(self, db_path=None, read_only=False):
        srv = _server_for(db_path)
        super().__init__(db_path, read_only, base_url=srv.url)


# SessionDB.sanitize_title is static: it reaches hermes through HERMES_URL,
# as a gateway configures it; one server for the whole run answers it.
_static_server = None
if MODE == "client":
    _static_server = _Server(Path(tempfile.mkdtemp(prefix="hermes-conf-static-")))
    os.environ["HERMES_URL"] = _static_server.url


class SessionStore(client_session.SessionStore):
    # Hermes' store keeps its transcripts in SessionDB() (HERMES_HOME's
    # state.db): the lanes and that database are one hermes here.
    def __init__(self, sessions_dir, config, has_active_processes_fn=None):
        srv = _server_for(None)
        super().__init__(sessions_dir, config, has_active_processes_fn, base_url=srv.url)

    def __setattr__(self, name, value):
        # A test that gives the store another database (store._db =
        # SessionDB(path)) means that file holds the store's sessions: the
        # lanes follow it to that database's hermes.
        if name == "_db" and isinstance(value, client_state.SessionDB) and "_http" in self.__dict__ \
                and value._http.base_url != self._http.base_url:
            object.__setattr__(self, "_http", value._http)
        object.__setattr__(self, name, value)


def _install() -> None:
    """What the import hook does, with per-home servers."""
    import gateway.session as gs  # Hermes' module, from the checkout
    import hermes_state as hs
    gs.SessionStore = SessionStore
    gs.SessionSource = client_session.SessionSource
    gs.SessionEntry = client_session.SessionEntry
    hs.SessionDB = SessionDB
    try:
        import gateway.run as gr
    except Exception:
        return
    from hermes_client import runs
    for n, mine in (("SessionStore", SessionStore), ("SessionEntry", client_session.SessionEntry),
                    ("SessionSource", client_session.SessionSource), ("SessionDB", SessionDB)):
        if hasattr(gr, n):
            setattr(gr, n, mine)
    runs.instrument(gr.GatewayRunner)


if MODE == "client":
    _install()


def _source_of(fn) -> str:
    try:
        return textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return ""


def _reason(item) -> str:
    if MODE != "client":
        return ""
    for key, why in NOT_APPLICABLE.items():
        if item.nodeid.endswith(key.split("/", 1)[-1]) or item.nodeid == key:
            return why
    fn = getattr(item, "function", None)
    if fn is None:
        return ""
    src = _source_of(fn)
    cls = getattr(item, "cls", None)
    names = set(getattr(item, "fixturenames", ()))
    mod = item.module
    for name in names:
        f = getattr(mod, name, None) or (getattr(cls, name, None) if cls else None)
        if f is not None and hasattr(f, "__wrapped__"):
            f = f.__wrapped__
        if f is not None and callable(f):
            # The fixture's body, not its name (d7f5acb9's autouse
            # _no_fts_rebuild_throttle only sets two tunables).
            src += "\n" + _source_of(f).split(":\n", 1)[-1]
    # Module-level helpers the test or its fixtures call.
    for name, obj in vars(mod).items():
        if inspect.isfunction(obj) and not name.startswith("test") and f"{name}(" in src:
            src += "\n" + _source_of(obj)
    if cls is not None:
        for helper in ("setup_method", "setUp"):
            if hasattr(cls, helper):
                src += "\n" + _source_of(getattr(cls, helper))
        # Helper methods the test calls (self._make_old_ended(...)).
        for name, obj in vars(cls).items():
            if inspect.isfunction(obj) and not name.startswith("test") and f"self.{name}(" in src:
                src += "\n" + _source_of(obj)
    for needle, why in INTERNALS:
        if needle in src:
            return why
    path = str(getattr(item, "fspath", ""))
    for f, needle, why in FILE_INTERNALS:
        if path.endswith(f) or (f.endswith("/") and f in path):
            if needle in src:
                return why
    return ""


# A test whose assertion is about Python-internal state runs all the same:
# it counts as passed when it passes, and as not applicable, with its
# reason, when it fails.
_why: dict = {}


def pytest_collection_modifyitems(config, items):
    for item in items:
        why = _reason(item)
        if why:
            _why[item.nodeid] = why


_results = []


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        outcome = report.outcome
        reason = ""
        if outcome == "skipped":
            reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
            outcome = "n/a" if "N/A: " in reason else "skipped"
        elif outcome == "failed":
            reason = (report.longreprtext or "").strip().splitlines()[-1:] and report.longreprtext.strip().splitlines()[-1]
            if report.nodeid in _why and not os.environ.get("HERMES_CONFORMANCE_RUN_ALL"):
                outcome, reason = "n/a", "N/A: " + _why[report.nodeid]
        _results.append({"nodeid": report.nodeid, "outcome": outcome, "reason": reason[:300]})


@pytest.fixture(autouse=True)
def _hermes_servers():
    """Stops the servers a test started, after its own fixtures."""
    yield
    while _started_this_test:
        key = _started_this_test.pop()
        srv = _servers.pop(key, None)
        if srv:
            try:
                srv.stop()
            except Exception:  # pragma: no cover - best effort
                pass


def pytest_sessionfinish(session, exitstatus):
    if _static_server is not None:
        _static_server.stop()
    out = os.environ.get("HERMES_CONFORMANCE_OUT")
    if out:
        Path(out).write_text(json.dumps(_results, indent=1))
