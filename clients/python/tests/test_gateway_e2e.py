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
agent:
  restart_drain_timeout: 1
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

    def __init__(self, server: Server, home: str, upstream: str, name: str, wait_ready: bool = True) -> None:
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
        self.seen: List[Dict[str, Any]] = []
        self.consumed: List[Dict[str, Any]] = []
        self.claimed: set = set()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.seq = 0
        self.startup: List[Dict[str, Any]] = []
        if wait_ready:
            self.startup = self.wait_ready()

    def _claim(self, match) -> Optional[Dict[str, Any]]:
        """An event already read that matches and was not claimed yet."""
        for i, ev in enumerate(self.consumed):
            if i not in self.claimed and match(ev):
                self.claimed.add(i)
                return ev
        return None

    def wait_ready(self) -> List[Dict[str, Any]]:
        """Waits for GatewayRunner.start() to return; what happened until then."""
        early = self._claim(lambda ev: ev.get("ev") in ("ready", "error"))
        if early is not None:
            return [early]
        ready = self._until(lambda ev: ev.get("ev") in ("ready", "error"))
        if ready[-1].get("ev") != "ready":
            raise AssertionError(f"gateway did not start: {ready[-1]}\n{self.log_tail()}")
        return ready

    def wait_agent(self, needle: str, timeout: float = OP_TIMEOUT) -> Dict[str, Any]:
        """Waits until the agent is given a message containing needle."""
        early = self._claim(lambda ev: ev.get("ev") == "agent" and needle in ev.get("message", ""))
        if early is not None:
            return early
        got = self._until(lambda ev: ev.get("ev") == "agent" and needle in ev.get("message", ""), timeout)
        if got[-1].get("ev") != "agent":
            raise AssertionError(f"the agent never got {needle!r}: {got}\n{self.log_tail()}")
        self.seen.extend(got)
        return got[-1]

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
            self.consumed.append(ev)
            if ev.get("ev") == "exit" or stop(ev):
                self.claimed.add(len(self.consumed) - 1)
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
        got = self.say(text, chat_id, wait=False, **kw)
        if not any(text in a.get("message", "") for a in got["agent"]):
            self.wait_agent(text)

    def stop(self, restart: bool = False) -> Dict[str, List]:
        out = self.op(op="stop", restart=restart)
        self.proc.wait(OP_TIMEOUT)
        self._release()
        return out

    def kill(self) -> None:
        """The gateway dies without a word (SIGKILL)."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(OP_TIMEOUT)
        self._release()

    def _release(self) -> None:
        for f in (self.proc.stdin, self.err):
            try:
                f.close()
            except OSError:
                pass
        self.reader.join(OP_TIMEOUT)
        self.proc.stdout.close()

    def log_tail(self) -> str:
        try:
            with open(os.path.join(self.home, "gateway.log"), "rb") as f:
                return f.read()[-4000:].decode("utf-8", "replace")
        except OSError:
            return ""

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        elif not self.err.closed:
            self._release()


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
    def new_gateway(cls, name: str, home: Optional[str] = None, server: Optional[Server] = None,
                    wait_ready: bool = True) -> Gateway:
        return Gateway(server or cls.server, home or cls.new_home(), cls.upstream, name, wait_ready)

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

    def test_compression_split_in_a_turn(self):
        # The agent compresses its context mid-turn: AIAgent ends the
        # session and continues in a child; the gateway moves the lane
        # (session_entry.session_id = new; _save()).
        chat = "206"
        sid = self.gw.say("one", chat)["agent"][0]["session_id"]
        turn = self.gw.say("two #compress", chat)
        self.assertEqual(turn["sent"], ["echo: two #compress"])
        after = self.gw.say("three", chat)["agent"][0]
        new = after["session_id"]
        self.assertNotEqual(new, sid)
        self.assertEqual(self.lane(key(chat))["session_id"], new)
        self.assertTail(key(chat), f"lane.session_compressed.v1  session compressed: {sid} → {new}")
        t = self.server.transport()
        try:
            row = t.get(t.path("transcripts", new))
            self.assertEqual(row["parent_session_id"], sid)
            self.assertEqual(t.get(t.path("transcripts", sid))["end_reason"], "compression")
        finally:
            t.close()

    def test_hygiene_compression_moves_the_lane_before_the_turn(self):
        # Eight stored messages (hygiene_hard_message_limit: 8) make the
        # gateway compress the history before running the agent.
        chat = "207"
        sids = {self.gw.say(f"message {i}", chat)["agent"][0]["session_id"] for i in range(4)}
        self.assertEqual(len(sids), 1)
        (sid,) = sids
        turn = self.gw.say("message 4", chat)
        kinds = [a["kind"] for a in turn["agent"]]
        self.assertEqual(kinds, ["compress", "turn"])
        new = turn["agent"][0]["session_id"]
        self.assertNotEqual(new, sid)
        self.assertEqual(turn["agent"][1]["session_id"], new)
        self.assertEqual(turn["sent"], ["echo: message 4"])
        self.assertTail(key(chat), f"session compressed: {sid} → {new}")
        self.assertEqual(self.lane(key(chat))["session_id"], new)

    def test_goal_is_kept_in_hermes(self):
        chat = "208"
        sid = self.gw.say("let us work", chat)["agent"][0]["session_id"]
        out = self.gw.say("/goal ship the release notes", chat)
        self.assertTrue(out["sent"][0].startswith("⊙ Goal set (20-turn budget): ship the release notes"), out["sent"])
        # The goal loop keeps the agent working toward it, turn after turn.
        self.assertTrue(any(a["message"].startswith("[Continuing toward your standing goal]\nGoal: ship the release notes")
                            for a in out["agent"]), out["agent"])
        t = self.server.transport()
        try:
            meta = t.get(t.path("meta", f"goal:{sid}"))
        finally:
            t.close()
        self.assertIn("ship the release notes", meta["value"] or "")
        self.assertIn(f"{sid}  transcript.meta_set.v1", self._transcript_tail(key(chat)))

    def test_telegram_topic_mode_binds_a_topic_to_its_session(self):
        chat = "209"
        self.gw.say("hi", chat)
        out = self.gw.op(op="message", chat_id=chat, text="/topic")
        self.assertTrue(out["sent"], out)
        t = self.server.transport()
        try:
            mode = t.get(t.path("telegram", "chats", chat, "topic-mode"), user_id="u1")
            self.assertTrue(mode["enabled"], mode)
            # A message inside a topic: its own lane, bound to its session.
            first = self.gw.say("inside the topic", chat, thread_id="777")
            sid = first["agent"][0]["session_id"]
            binding = t.get(t.path("telegram", "chats", chat, "topics", "777"))["binding"]
            self.assertEqual(binding["session_id"], sid)
            self.assertEqual(binding["session_key"], key(chat, "777"))
        finally:
            t.close()
        self.assertTail(key(chat, "777"), "lane.session_created.v1")

    # -- scenarios with their own hermes (the manual clock moves) ----------

    def own(self, name: str):
        server = Server(config=HERMES_CONFIG)
        self.addCleanup(server.stop)
        home = self.new_home()
        return server, home

    def start(self, server, home, name, wait_ready=True) -> Gateway:
        gw = self.new_gateway(name, home=home, server=server, wait_ready=wait_ready)
        self.addCleanup(gw.close)
        return gw

    def test_restart_with_a_turn_open_resumes_with_the_note(self):
        server, home = self.own("restart")
        chat = "301"
        gw = self.start(server, home, "restart")
        sid = gw.say("hello", chat)["agent"][0]["session_id"]
        gw.say_nowait("#hang deploy the site", chat)
        gw.op(op="running", session_key=key(chat))
        stop = gw.stop(restart=True)
        self.assertTrue(any("Gateway restarting" in s for s in stop["sent"]), stop["sent"])
        lane = self.lane_of(server, key(chat))
        self.assertTrue(lane["resume_pending"])
        self.assertEqual(lane["resume_reason"], "restart_timeout")
        self.assertIsNone(lane["open_turn_id"])
        text = server.tail(key(chat))
        self.assertIn("lane.turn_interrupted.v1", text)
        # The gateway comes back: it continues the interrupted turn itself,
        # telling the agent why.
        gw2 = self.start(server, home, "restart", wait_ready=False)
        resumed = gw2.wait_agent("interrupted by a gateway restart")
        self.assertEqual(resumed["session_id"], sid)
        gw2.wait_ready()
        after = gw2.say("are you back?", chat)
        self.assertEqual(after["agent"][0]["session_id"], sid)
        lane = self.lane_of(server, key(chat))
        self.assertFalse(lane["resume_pending"])
        self.assertIn("lane.resume_cleared.v1", server.tail(key(chat)))

    def test_three_crashes_in_a_row_suspend_the_stuck_lane(self):
        server, home = self.own("crash")
        chat = "302"
        gw = self.start(server, home, "crash")
        sid = gw.say("hello", chat)["agent"][0]["session_id"]
        gw.say_nowait("#stuck this loops forever", chat)
        gw.kill()
        for crash in (2, 3):
            # Each start recovers the turn the dead run left open and
            # continues it; the agent is stuck again; the gateway dies again.
            gw = self.start(server, home, "crash", wait_ready=False)
            gw.wait_agent("interrupted by a gateway")
            gw.kill()
        text = server.tail(key(chat))
        self.assertEqual(text.count("lane.turn_interrupted.v1"), 2, text)
        gw = self.start(server, home, "crash")
        lane = self.lane_of(server, key(chat))
        self.assertTrue(lane["suspended"], lane)
        self.assertEqual(lane["suspend_reason"], "stuck_loop")
        self.assertIn("stuck_loop", server.tail(key(chat)))
        # No auto-continue of a suspended lane; the next message starts fresh.
        self.assertFalse([e for e in gw.startup if e.get("ev") == "agent"])
        out = gw.say("hello again", chat)
        self.assertTrue(any("Session automatically reset" in s for s in out["sent"]), out["sent"])
        self.assertNotEqual(out["agent"][0]["session_id"], sid)
        self.assertIn("lane.session_auto_reset.v1", server.tail(key(chat)))

    def test_expiry_is_finalized_by_the_gateway_and_the_next_message_starts_fresh(self):
        server, home = self.own("expiry")
        chat = "303"
        gw = self.start(server, home, "expiry")
        sid = gw.say("hello", chat)["agent"][0]["session_id"]
        gw.say("a second turn", chat)
        server.advance("61m")
        gw.op(op="expiry_pass")
        lane = self.lane_of(server, key(chat))
        self.assertTrue(lane["expiry_finalized"], lane)
        self.assertIn("lane.expiry_finalized.v1", server.tail(key(chat)))
        out = gw.say("good morning", chat)
        self.assertTrue(any("Session automatically reset (inactive for 1h)" in s for s in out["sent"]), out["sent"])
        self.assertNotEqual(out["agent"][0]["session_id"], sid)
        self.assertIn("lane.session_auto_reset.v1  ", server.tail(key(chat)))

    def lane_of(self, server, k):
        t = server.transport()
        try:
            return t.get(t.path("sessions", k))
        finally:
            t.close()


if __name__ == "__main__":
    unittest.main()
