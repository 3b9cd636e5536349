"""HTTP transport to `hermes serve`: keep-alive connections, one per thread,
timeouts, retries that cannot apply a command twice, and clear errors."""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import uuid
from typing import Any, Dict, Optional, Tuple
from urllib.parse import quote, urlencode, urlsplit

from .errors import (
    HermesConflict,
    HermesError,
    HermesInvalidArgument,
    HermesNotFound,
    HermesUnavailable,
)

DEFAULT_URL = "http://127.0.0.1:8642"
DEFAULT_TIMEOUT = 10.0


def _env_timeout() -> float:
    raw = os.environ.get("HERMES_TIMEOUT", "")
    try:
        return float(raw) if raw else DEFAULT_TIMEOUT
    except ValueError:
        return DEFAULT_TIMEOUT


class Transport:
    """A small thread-safe client of the hermes HTTP API.

    Each thread keeps its own keep-alive connection (``http.client`` objects
    are not thread-safe), so concurrent callers never share a socket. Every
    request with a body is sent as ``application/json`` and carries an
    ``Idempotency-Key``, so a request resent after a dropped keep-alive
    connection is applied at most once.
    """

    def __init__(self, base_url: Optional[str] = None, token: Optional[str] = None,
                 timeout: Optional[float] = None) -> None:
        self.base_url = (base_url or os.environ.get("HERMES_URL") or DEFAULT_URL).rstrip("/")
        if token is None:
            token = os.environ.get("HERMES_API_TOKEN") or None
        self._token = token
        self.timeout = float(timeout) if timeout is not None else _env_timeout()
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"hermes URL must be http(s)://host[:port], got {self.base_url!r}")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        self._local = threading.local()
        self._all_lock = threading.Lock()
        self._all: list = []

    # -- connections -----------------------------------------------------

    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            conn = cls(self._host, self._port, timeout=self.timeout)
            self._local.conn = conn
            with self._all_lock:
                self._all.append(conn)
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """Close every connection this transport opened (any thread's)."""
        with self._all_lock:
            conns, self._all = self._all, []
        for c in conns:
            try:
                c.close()
            except Exception:  # pragma: no cover - best effort
                pass
        self._local = threading.local()

    # -- requests --------------------------------------------------------

    @staticmethod
    def path(*segments: str) -> str:
        """Joins path segments, percent-encoding each (keys contain colons)."""
        return "/" + "/".join(quote(str(s), safe="") for s in segments)

    def request(self, method: str, path: str, body: Any = None,
                query: Optional[Dict[str, Any]] = None) -> Tuple[int, Any]:
        """Sends one request and returns (status, decoded JSON or None).

        Raises HermesUnavailable when hermes cannot be reached, and a
        HermesError subclass for an error answer.
        """
        url = self._prefix + "/v1" + path
        if query:
            items = []
            for k, v in query.items():
                if v is None:
                    continue
                if isinstance(v, bool):
                    v = "true" if v else "false"
                if isinstance(v, (list, tuple)):
                    for one in v:
                        items.append((k, str(one)))
                else:
                    items.append((k, str(v)))
            if items:
                url += "?" + urlencode(items)
        headers = {"Accept": "application/json"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        payload = None
        if body is not None:
            payload = json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
            headers["Idempotency-Key"] = uuid.uuid4().hex
        last_exc: Optional[BaseException] = None
        # A reused keep-alive connection may have been closed by the server
        # between requests: retry once on a fresh one. GETs are safe to
        # repeat; commands carry an Idempotency-Key.
        for attempt in range(2):
            conn = self._conn()
            try:
                conn.request(method, url, body=payload, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
                status = resp.status
                if resp.getheader("Connection", "").lower() == "close":
                    self._drop()
                break
            except socket.timeout as exc:
                self._drop()
                raise HermesUnavailable(
                    f"hermes at {self.base_url} did not answer {method} {path} within {self.timeout:g}s"
                ) from exc
            except (ConnectionError, http.client.HTTPException, OSError) as exc:
                self._drop()
                last_exc = exc
                if attempt == 0 and not isinstance(exc, ConnectionRefusedError):
                    continue
                raise HermesUnavailable(
                    f"hermes is not reachable at {self.base_url} ({exc.__class__.__name__}: {exc}); "
                    "is `hermes serve` running? (set HERMES_URL / base_url)"
                ) from exc
        else:  # pragma: no cover - the loop always breaks or raises
            raise HermesUnavailable(f"hermes is not reachable at {self.base_url}: {last_exc}")
        data = None
        if raw:
            try:
                data = json.loads(raw.decode("utf-8"))
            except ValueError:
                data = raw.decode("utf-8", "replace")
        if status >= 400:
            raise _error(status, data, method, path)
        return status, data

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, query=query)[1]

    def post(self, path: str, body: Any = None, **query: Any) -> Any:
        return self.request("POST", path, body if body is not None else {}, query=query)[1]

    def put(self, path: str, body: Any) -> Any:
        return self.request("PUT", path, body)[1]

    def patch(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, body)[1]

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)[1]


def _error(status: int, data: Any, method: str, path: str) -> HermesError:
    code, message = "", ""
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        code = data["error"].get("code", "")
        message = data["error"].get("message", "")
    elif isinstance(data, str):
        message = data
    text = f"{method} {path}: {status} {code}: {message}".rstrip(": ")
    if status == 404:
        return HermesNotFound(text, status, code, message)
    if status == 409:
        return HermesConflict(text, status, code, message)
    if status == 400:
        return HermesInvalidArgument(text, status, code, message)
    if status == 503:
        return HermesUnavailable(text, status, code, message)
    return HermesError(text, status, code, message)
