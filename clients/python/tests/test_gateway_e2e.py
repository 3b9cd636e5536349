"""Hermes' real GatewayRunner (upstream hermes-agent at UPSTREAM_COMMIT,
unmodified) on a real `hermes serve`, through the client, with a fake
Telegram adapter and a fake agent (gateway_driver.py). Each step asserts
what the user sees and what `hermes events tail <key>` shows.

Upstream is found as ../shared/upstream/hermes-agent-5e01a5db beside the
repository (or HERMES_AGENT_SRC); its imports come from Debian's python3-*
packages (.ci/run installs them). Without it the test skips, except under
CI, where it fails."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from typing import Any, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hermes_harness import HERE, Server, upstream_tree  # noqa: E402

HERMES_CONFIG = """\
session_reset:
  mode: idle
  idle_minutes: 60
"""

# The gateway's own config.yaml (HERMES_HOME of the gateway process): the
# same reset policy, a model that is never called (the agent is a fake; the
# endpoint is a closed loopback port), and hygiene compression from 8
# messages so a short conversation triggers it.
GATEWAY_CONFIG = HERMES_CONFIG + """\
model:
  default: fake-model
  provider: custom
  base_url: http://127.0.0.1:9/v1
  context_length: 100000
compression:
  hygiene_hard_message_limit: 8
"""

OP_TIMEOUT = 90.0


def require_gateway_imports(python: str) -> None:
    """Upstream's gateway imports (yaml, httpx, dotenv, requests) must be
    there for the interpreter; under CI their absence fails."""
    probe = subprocess.run([python, "-c", "import yaml, httpx, dotenv, requests"], capture_output=True, text=True)
    if probe.returncode != 0:
        msg = ("upstream gateway imports missing for " + python + " (apt-get install python3-yaml python3-httpx "
               "python3-dotenv python3-requests): " + probe.stderr.strip().splitlines()[-1])
        if os.environ.get("CI"):
            raise AssertionError(msg)
        raise unittest.SkipTest(msg)


class Gateway:
    """One gateway process (gateway_driver.py) on a gateway home."""

    def __init__(self, server: Server, home: str, upstream: str, name: str) -> None:
        self.server, self.home, self.upstream, self.name = server, home, upstream, name
        env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
        env.update({
            "HERMES_URL": server.url, "HERMES_HOME": home, "HERMES_GATEWAY": name,
            "GATEWAY_ALLOW_ALL_USERS": "true", "TELEGRAM_HOME_CHANNEL": "1",
            "OPENAI_API_KEY": "fake-key-never-sent", "PYTHONDONTWRITEBYTECODE": "1", "TZ": "UTC",
        })
        self.err = open(os.path.join(home, "driver.stderr"), "ab")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "gateway_driver.py"), upstream, home],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, env=env, text=True, bufsize=1)
        self.events: "queue.Queue[Dict[str, Any]]" = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.seq = 0
        ready = self._until(lambda ev: ev.get("ev") in ("ready", "error"))
        if ready[-1].get("ev") != "ready":
            raise AssertionError(f"gateway did not start: {ready[-1]}\n{self.log_tail()}")
        self.startup = ready

    def _read(self) -> None:
        for line in self.proc.stdout:
            line = line.strip()
            if line:
                self.events.put(json.loads(line))
        self.events.put({"ev": "exit"})

    def _until(self, stop, timeout: float = OP_TIMEOUT) -> List[Dict[str, Any]]:
        got = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"gateway {self.name}: timed out; got {got}\n{self.log_tail()}")
            try:
                ev = self.events.get(timeout=left)
            except queue.Empty:
                continue
            got.append(ev)
            if ev.get("ev") == "exit" or stop(ev):
                return got

    def op(self, **cmd) -> Dict[str, List]:
        """Sends one op and returns what happened until it was done:
        ``sent`` (texts the user saw) and ``agent`` (what the agent got)."""
        self.seq += 1
        cmd["id"] = self.seq
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        got = self._until(lambda ev: ev.get("id") == self.seq and ev.get("ev") in ("done", "error"))
        if got[-1].get("ev") != "done":
            raise AssertionError(f"op {cmd} failed: {got[-1]}\n{self.log_tail()}")
        return {"sent": [e["text"] for e in got if e.get("ev") == "sent"],
                "agent": [e for e in got if e.get("ev") == "agent"], "all": got}

    def say(self, text: str, chat_id: str, **kw) -> Dict[str, List]:
        return self.op(op="message", chat_id=chat_id, text=text, **kw)

    def say_nowait(self, text: str, chat_id: str, **kw) -> None:
        """Sends a message without waiting for its turn to end; returns once
        the agent has it."""
        self.say(text, chat_id, wait=False, **kw)
        self._until(lambda ev: ev.get("ev") == "agent" and text in ev.get("message", ""))

    def stop(self, restart: bool = False) -> Dict[str, List]:
        out = self.op(op="stop", restart=restart)
        self.proc.wait(OP_TIMEOUT)
        self.err.close()
        return out

    def kill(self) -> None:
        """The gateway dies without a word (SIGKILL)."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(OP_TIMEOUT)
        self.err.close()

    def log_tail(self) -> str:
        try:
            with open(os.path.join(self.home, "gateway.log"), "rb") as f:
                return f.read()[-4000:].decode("utf-8", "replace")
        except OSError:
            return ""

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()


def key(chat_id: str, thread_id: Optional[str] = None) -> str:
    base = f"agent:main:telegram:dm:{chat_id}"
    return f"{base}:{thread_id}" if thread_id else base


class GatewayE2E(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.upstream = upstream_tree()
        require_gateway_imports(sys.executable)
        cls.server = Server(config=HERMES_CONFIG)
        cls.tmp = tempfile.mkdtemp(prefix="hermes-gw-")
        cls.homes = 0
        cls.gw = cls.new_gateway("shared")

    @classmethod
    def tearDownClass(cls):
        gw = getattr(cls, "gw", None)
        if gw is not None:
            gw.close()
        if getattr(cls, "server", None) is not None:
            cls.server.stop()
        shutil.rmtree(getattr(cls, "tmp", ""), ignore_errors=True)

    @classmethod
    def new_home(cls) -> str:
        cls.homes += 1
        home = os.path.join(cls.tmp, f"gw{cls.homes}")
        os.makedirs(home)
        with open(os.path.join(home, "config.yaml"), "w") as f:
            f.write(GATEWAY_CONFIG)
        return home

    @classmethod
    def new_gateway(cls, name: str, home: Optional[str] = None) -> Gateway:
        return Gateway(cls.server, home or cls.new_home(), cls.upstream, name)

    def lane(self, k: str) -> Dict[str, Any]:
        t = self.server.transport()
        try:
            return t.get(t.path("sessions", k))
        finally:
            t.close()

    def tail(self, k: str) -> List[str]:
        return self.server.tail(k).splitlines()

    def assertTail(self, k: str, *needles: str) -> List[str]:
        lines = self.tail(k)
        text = "\n".join(lines)
        for n in needles:
            self.assertIn(n, text, f"`hermes events tail {k}` lacks {n!r}:\n{text}")
        return lines

    # -- steps -------------------------------------------------------------

    def test_two_turns_keep_one_session_and_its_history(self):
        chat = "201"
        first = self.gw.say("hello there", chat)
        self.assertEqual(first["sent"], ["echo: hello there"])
        sid = first["agent"][0]["session_id"]
        self.assertEqual(first["agent"][0]["history"], 0)
        second = self.gw.say("and a second question", chat)
        self.assertEqual(second["sent"], ["echo: and a second question"])
        self.assertEqual(second["agent"][0]["session_id"], sid)
        self.assertEqual(second["agent"][0]["history"], 2)  # the first turn, from hermes
        lines = self.assertTail(key(chat), "lane.session_created.v1", f"new session {sid}")
        self.assertEqual(sum("lane.session_created.v1" in ln for ln in lines), 1)
        self.assertEqual(self.lane(key(chat))["session_id"], sid)

    def test_new_and_reset_start_fresh_sessions(self):
        chat = "202"
        sid1 = self.gw.say("remember the number 7", chat)["agent"][0]["session_id"]
        confirm = self.gw.say("/new", chat)["sent"]
        self.assertIn("Confirm /new", confirm[0])
        done = self.gw.say("/approve", chat)["sent"]
        self.assertTrue(any("Session reset" in s for s in done), done)
        after = self.gw.say("what number?", chat)["agent"][0]
        sid2 = after["session_id"]
        self.assertNotEqual(sid2, sid1)
        self.assertEqual(after["history"], 0)
        self.assertTail(key(chat), f"/new: {sid2} replaced {sid1}")
        self.gw.say("/reset", chat)
        self.gw.say("/approve", chat)
        sid3 = self.gw.say("again", chat)["agent"][0]["session_id"]
        self.assertNotIn(sid3, (sid1, sid2))
        self.assertTail(key(chat), f"/new: {sid3} replaced {sid2}")

    def test_stop_then_a_message_continues_the_session(self):
        chat = "203"
        sid = self.gw.say("start something", chat)["agent"][0]["session_id"]
        self.gw.say_nowait("#hang run a long task", chat)
        stopped = self.gw.say("/stop", chat)["sent"]
        self.assertEqual(stopped, ["⚡ Stopped. You can continue this session."])
        after = self.gw.say("after the stop", chat)
        self.assertEqual(after["sent"], ["echo: after the stop"])
        self.assertEqual(after["agent"][0]["session_id"], sid)
        self.assertFalse(self.lane(key(chat))["suspended"])

    def test_title(self):
        chat = "204"
        sid = self.gw.say("plan a trip", chat)["agent"][0]["session_id"]
        out = self.gw.say("/title Trip to Lisbon", chat)["sent"]
        self.assertEqual(out, ["✏️ Session title set: **Trip to Lisbon**"])
        t = self.server.transport()
        try:
            self.assertEqual(t.get(t.path("transcripts", sid))["title"], "Trip to Lisbon")
        finally:
            t.close()
        self.assertIn(f'{sid}  transcript.title_set.v1  title "Trip to Lisbon"', self._transcript_tail(key(chat)))

    def _transcript_tail(self, k: str) -> str:
        out = subprocess.run([self.server.bin, "events", "tail", k, "--transcripts", "--home", self.server.home],
                             capture_output=True, text=True, timeout=60)
        return out.stdout

    def test_undo_rewinds_the_last_exchange(self):
        chat = "205"
        self.gw.say("first message", chat)
        sid = self.gw.say("second message", chat)["agent"][0]["session_id"]
        self.gw.say("/undo", chat)
        out = self.gw.say("/approve", chat)["sent"]
        self.assertEqual(len(out), 1, out)
        self.assertIn("Undid 1 turn(s) (2 message(s))", out[0])
        self.assertIn('Backed up to: "second message"', out[0])
        nxt = self.gw.say("third message", chat)["agent"][0]
        self.assertEqual(nxt["session_id"], sid)
        self.assertEqual(nxt["history"], 2)  # the first exchange only
        self.assertIn(f"{sid}  transcript.rewound.v1  rewound 1 turns", self._transcript_tail(key(chat)))


if __name__ == "__main__":
    unittest.main()
