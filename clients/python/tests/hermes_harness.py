"""A real `hermes serve` for the client's tests: a temp home, a loopback
port, the manual clock, stopped with SIGTERM. HERMES_BIN names the binary
(make test-python builds it)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT_ROOT = os.path.dirname(HERE)
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
if CLIENT_ROOT not in sys.path:
    sys.path.insert(0, CLIENT_ROOT)

from hermes_client._http import Transport  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hermes_bin() -> str:
    path = os.environ.get("HERMES_BIN") or os.path.join(REPO, "bin", "hermes")
    if not os.path.exists(path):
        raise unittest.SkipTest(f"no hermes binary at {path} (make build)")
    return path


class Server:
    """`hermes serve` in a home (a new temp one unless given)."""

    def __init__(self, home: Optional[str] = None, config: Optional[str] = None,
                 clock: str = "manual") -> None:
        self.bin = hermes_bin()
        self.own_home = home is None
        self.home = home or tempfile.mkdtemp(prefix="hermes-pyclient-")
        if config is not None:
            with open(os.path.join(self.home, "config.yaml"), "w") as f:
                f.write(config)
        self.clock = clock
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: Optional[subprocess.Popen] = None
        self.start()

    def start(self) -> None:
        self.log = open(os.path.join(self.home, "serve.log"), "ab")
        env = dict(os.environ)
        env.pop("HERMES_API_TOKEN", None)
        env.pop("HERMES_HOME", None)
        args = [self.bin, "serve", "--home", self.home, "--addr", f"127.0.0.1:{self.port}"]
        if self.clock:
            args.append(f"--clock={self.clock}")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=2) as r:
                    if r.status == 200:
                        return
            except Exception:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        self.stop(remove=False)
        with open(os.path.join(self.home, "serve.log"), "rb") as f:
            tail = f.read()[-2000:].decode("utf-8", "replace")
        raise RuntimeError(f"hermes serve did not become ready:\n{tail}")

    def transport(self) -> Transport:
        return Transport(self.url)

    def advance(self, duration: str) -> None:
        t = self.transport()
        try:
            t.post("/clock", {"advance": duration})
        finally:
            t.close()

    def events(self, key: str) -> List[Dict[str, Any]]:
        """The lane's events over the API (envelopes)."""
        t = self.transport()
        try:
            return t.get(t.path("sessions", key, "events"), limit=1000)["events"]
        finally:
            t.close()

    def types(self, key: str) -> List[str]:
        return [e["type"] for e in self.events(key)]

    def tail(self, key: str) -> str:
        """`hermes events tail <key>` against this home (the log opened
        read-only while serve runs)."""
        out = subprocess.run([self.bin, "events", "tail", key, "--home", self.home],
                             capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise AssertionError(f"hermes events tail {key} failed: {out.stderr}")
        return out.stdout

    def stop(self, remove: bool = True) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        if remove and self.own_home:
            shutil.rmtree(self.home, ignore_errors=True)

    def restart(self) -> None:
        self.stop(remove=False)
        self.start()


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1, default=str)


UPSTREAM_COMMIT = "5e01a5dbf1b7bc0144d9057be706da1ea9f065c3"


def upstream_tree() -> str:
    """hermes-agent at UPSTREAM_COMMIT, unmodified: HERMES_AGENT_SRC, else
    ../shared/upstream/hermes-agent-5e01a5db beside the repository. Without
    it the test skips, except under CI where it fails."""
    path = os.environ.get("HERMES_AGENT_SRC") or os.path.join(
        os.path.dirname(REPO), "shared", "upstream", "hermes-agent-" + UPSTREAM_COMMIT[:8])
    if os.path.isfile(os.path.join(path, "gateway", "run.py")):
        return path
    msg = (f"upstream hermes-agent not found at {path} (set HERMES_AGENT_SRC or put "
           f"../shared/upstream/hermes-agent-{UPSTREAM_COMMIT[:8]} beside the repository)")
    if os.environ.get("CI"):
        raise AssertionError(msg)
    raise unittest.SkipTest(msg)
