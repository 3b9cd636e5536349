"""The client against a real `hermes serve` on loopback (a temp home, the
manual test clock). Run: python3 -m unittest discover -s clients/python/tests
with HERMES_BIN pointing at a built binary (make test-python does both)."""

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from hermes_client import (  # noqa: E402
    HermesConflict,
    HermesUnavailable,
    SessionDB,
    SessionSource,
    SessionStore,
)
from hermes_client._http import Transport  # noqa: E402

REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`hermes serve` in a temp home, stopped with SIGTERM."""

    def __init__(self) -> None:
        self.bin = os.environ.get("HERMES_BIN") or os.path.join(REPO, "bin", "hermes")
        if not os.path.exists(self.bin):
            raise unittest.SkipTest(f"no hermes binary at {self.bin} (make build)")
        self.home = tempfile.mkdtemp(prefix="hermes-pyclient-")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(self.home, "serve.log"), "wb")
        env = dict(os.environ)
        env.pop("HERMES_API_TOKEN", None)
        self.proc = subprocess.Popen(
            [self.bin, "serve", "--home", self.home, "--addr", f"127.0.0.1:{self.port}", "--clock=manual"],
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
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("hermes serve did not become ready")

    def advance(self, duration: str) -> None:
        Transport(self.url).post("/clock", {"advance": duration})

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.home, ignore_errors=True)


def setUpModule():
    global SERVER
    SERVER = Server()
    # SessionDB.sanitize_title is a static method: it finds hermes as a
    # gateway configures it, from the environment.
    os.environ["HERMES_URL"] = SERVER.url


def tearDownModule():
    SERVER.stop()


def dm(chat_id: str, **kw) -> SessionSource:
    return SessionSource(platform="telegram", chat_id=chat_id, user_id="u-" + chat_id, user_name="Alice", **kw)


class StoreTest(unittest.TestCase):
    def setUp(self):
        self.store = SessionStore(None, None, base_url=SERVER.url)
        self.db = SessionDB(base_url=SERVER.url)

    def tearDown(self):
        self.store.close()
        self.db.close()

    def test_get_or_create_is_stable(self):
        a = self.store.get_or_create_session(dm("stable"))
        b = self.store.get_or_create_session(dm("stable"))
        self.assertEqual(a.session_key, "agent:main:telegram:dm:stable")
        self.assertEqual(a.session_id, b.session_id)
        self.assertEqual(a.origin.user_name, "Alice")
        forced = self.store.get_or_create_session(dm("stable"), force_new=True)
        self.assertNotEqual(forced.session_id, a.session_id)

    def test_suspend_resume_and_lookups(self):
        e = self.store.get_or_create_session(dm("susp"))
        self.assertTrue(self.store.mark_resume_pending(e.session_key))
        self.assertTrue(self.store.lookup_by_session_id(e.session_id).resume_pending)
        self.assertTrue(self.store.clear_resume_pending(e.session_key))
        self.assertFalse(self.store.clear_resume_pending(e.session_key))
        self.assertTrue(self.store.suspend_session(e.session_key))
        again = self.store.get_or_create_session(dm("susp"))
        self.assertNotEqual(again.session_id, e.session_id)
        self.assertTrue(again.was_auto_reset)
        self.assertEqual(again.auto_reset_reason, "suspended")
        self.assertFalse(self.store.suspend_session("agent:main:telegram:dm:nobody"))
        self.assertIsNone(self.store.reset_session("agent:main:telegram:dm:nobody"))
        self.assertIsNone(self.store.lookup_by_session_id("nope"))
        keys = [x.session_key for x in self.store.list_sessions()]
        self.assertIn(e.session_key, keys)

    def test_prune_disabled_for_non_positive_ages(self):
        self.store.get_or_create_session(dm("prune"))
        self.assertEqual(self.store.prune_old_entries(0), 0)
        self.assertEqual(self.store.prune_old_entries(-1), 0)

    def test_transcript_search_and_rewind(self):
        e = self.store.get_or_create_session(dm("tx"))
        self.store.append_to_transcript(e.session_id, {"role": "user", "content": "TODO fix the deployment script"})
        self.store.append_to_transcript(e.session_id, {"role": "assistant", "content": "On it."})
        conv = self.store.load_transcript(e.session_id)
        self.assertEqual([m["role"] for m in conv], ["user", "assistant"])
        self.assertIsInstance(conv[0]["timestamp"], float)
        hits = self.db.search_messages("TODO: fix")
        self.assertIn(e.session_id, [h["session_id"] for h in hits])
        res = self.store.rewind_session(e.session_id, 1)
        self.assertEqual(res["target_text"], "TODO fix the deployment script")
        self.assertEqual(self.store.load_transcript(e.session_id), [])

    def test_sessiondb_methods(self):
        db = self.db
        self.assertEqual(db.create_session("py_s1", "cli", model="m1"), "py_s1")
        db.create_session("py_s2", "cron")
        db.append_message("py_s1", "user", "first question here")
        mid = db.append_message("py_s1", "assistant", "answer", tool_calls=[{"id": "c1"}])
        self.assertIsInstance(mid, int)
        self.assertEqual(db.message_count("py_s1"), 2)
        self.assertEqual(db.resolve_session_id("py_s1"), "py_s1")
        self.assertIsNone(db.resolve_session_id("py_s"))  # ambiguous
        self.assertIsNone(db.resolve_session_id("py%"))   # wildcard is literal
        self.assertTrue(db.set_session_title("py_s1", "  My   title "))
        self.assertEqual(db.get_session_title("py_s1"), "My title")
        self.assertEqual(db.get_session_by_title("My title")["id"], "py_s1")
        with self.assertRaises(ValueError):
            db.set_session_title("py_s2", "My title")
        with self.assertRaises(ValueError):
            SessionDB.sanitize_title("x" * 101)
        rows = db.list_sessions_rich(source="cli")
        self.assertEqual(rows[0]["preview"], "first question here")
        self.assertTrue(db.set_session_archived("py_s2", True))
        self.assertEqual(db.session_count(source="cron"), 0)
        self.assertEqual(db.session_count(source="cron", include_archived=True), 1)
        db.update_session_model("py_s2", "m2")
        self.assertEqual(db.get_session("py_s2")["model"], "m2")
        db.end_session("py_s2", "done")
        db.reopen_session("py_s2")
        self.assertIsNone(db.get_session("py_s2")["ended_at"])
        self.assertEqual(db.delete_sessions(["py_s2", "py_missing"]), 1)
        self.assertIsNone(db.get_session("py_s2"))

    def test_threads_share_a_store(self):
        errors = []

        def worker(i):
            try:
                for j in range(5):
                    e = self.store.get_or_create_session(dm(f"thr-{i}"))
                    self.store.append_to_transcript(e.session_id, {"role": "user", "content": f"m{j}"})
            except Exception as exc:  # pragma: no cover
                errors.append(exc)

        ts = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errors, [])
        e = self.store.get_or_create_session(dm("thr-0"))
        self.assertEqual(len(self.store.load_transcript(e.session_id)), 5)

    def test_server_down_is_a_clear_error(self):
        store = SessionStore(None, None, base_url=f"http://127.0.0.1:{free_port()}", timeout=2)
        with self.assertRaises(HermesUnavailable) as cm:
            store.get_or_create_session(dm("down"))
        self.assertIn("not reachable", str(cm.exception))
        self.assertIsInstance(cm.exception, ConnectionError)


class GatewaySurfaceTest(unittest.TestCase):
    """SessionDB's state_meta, Telegram topics, handoffs, anchored reads and
    auto-prune, with Hermes' shapes."""

    def setUp(self):
        self.db = SessionDB(base_url=SERVER.url)

    def tearDown(self):
        self.db.close()

    def test_meta(self):
        self.assertIsNone(self.db.get_meta("py:meta:missing"))
        self.db.set_meta("py:meta:k", "v1")
        self.db.set_meta("py:meta:k", "v2")
        self.assertEqual(self.db.get_meta("py:meta:k"), "v2")

    def test_telegram_topics(self):
        db = self.db
        db.create_session("py_topic_s1", "telegram", user_id="u9")
        db.create_session("py_topic_s2", "telegram", user_id="u9")
        db.append_message("py_topic_s2", "user", "an older question")
        self.assertFalse(db.is_telegram_topic_mode_enabled(chat_id="900", user_id="u9"))
        db.enable_telegram_topic_mode(chat_id="900", user_id="u9", has_topics_enabled=True)
        self.assertTrue(db.is_telegram_topic_mode_enabled(chat_id="900", user_id="u9"))
        db.bind_telegram_topic(chat_id="900", thread_id="11", user_id="u9",
                               session_key="agent:main:telegram:dm:900:11", session_id="py_topic_s1")
        b = db.get_telegram_topic_binding(chat_id="900", thread_id="11")
        self.assertEqual((b["session_id"], b["managed_mode"]), ("py_topic_s1", "auto"))
        self.assertEqual(db.get_telegram_topic_binding_by_session(session_id="py_topic_s1")["thread_id"], "11")
        self.assertTrue(db.is_telegram_session_linked_to_topic(session_id="py_topic_s1"))
        with self.assertRaises(ValueError):  # one topic per session
            db.bind_telegram_topic(chat_id="900", thread_id="12", user_id="u9",
                                   session_key="agent:main:telegram:dm:900:12", session_id="py_topic_s1")
        unlinked = [r["id"] for r in db.list_unlinked_telegram_sessions_for_user(chat_id="900", user_id="u9")]
        self.assertIn("py_topic_s2", unlinked)
        self.assertNotIn("py_topic_s1", unlinked)
        self.assertEqual([r["thread_id"] for r in db.list_telegram_topic_bindings_for_chat(chat_id="900")], ["11"])
        db.disable_telegram_topic_mode(chat_id="900")
        self.assertFalse(db.is_telegram_topic_mode_enabled(chat_id="900", user_id="u9"))
        self.assertEqual(db.list_telegram_topic_bindings_for_chat(chat_id="900"), [])

    def test_handoffs(self):
        db = self.db
        db.create_session("py_hand_1", "cli")
        self.assertTrue(db.request_handoff("py_hand_1", "telegram"))
        self.assertFalse(db.request_handoff("py_hand_1", "telegram"))  # already pending
        self.assertIn("py_hand_1", [r["id"] for r in db.list_pending_handoffs()])
        self.assertTrue(db.claim_handoff("py_hand_1"))
        self.assertFalse(db.claim_handoff("py_hand_1"))
        db.fail_handoff("py_hand_1", "x" * 900)
        st = db.get_handoff_state("py_hand_1")
        self.assertEqual((st["state"], st["platform"], len(st["error"])), ("failed", "telegram", 500))
        self.assertIsNone(db.get_handoff_state("py_no_such_session"))
        db.complete_handoff("py_no_such_session")  # silent, as in Hermes

    def test_messages_around_and_anchored_view(self):
        db = self.db
        db.create_session("py_anchor", "cli")
        ids = [db.append_message("py_anchor", "user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(10)]
        got = db.get_messages_around("py_anchor", ids[5], window=2)
        self.assertEqual([m["content"] for m in got["window"]], ["m3", "m4", "m5", "m6", "m7"])
        self.assertEqual((got["messages_before"], got["messages_after"]), (2, 2))
        self.assertEqual(db.get_messages_around("py_anchor", 10 ** 9, window=2),
                         {"window": [], "messages_before": 0, "messages_after": 0})
        view = db.get_anchored_view("py_anchor", ids[5], window=1, bookend=2)
        self.assertEqual([m["content"] for m in view["window"]], ["m4", "m5", "m6"])
        self.assertEqual([m["content"] for m in view["bookend_start"]], ["m0", "m1"])
        self.assertEqual([m["content"] for m in view["bookend_end"]], ["m8", "m9"])

    def test_auto_prune(self):
        first = self.db.maybe_auto_prune_and_vacuum(retention_days=90, min_interval_hours=24)
        self.assertEqual(set(first) - {"error"}, {"skipped", "pruned", "vacuumed"})
        again = self.db.maybe_auto_prune_and_vacuum(retention_days=90, min_interval_hours=24)
        self.assertTrue(again["skipped"])


class GatewayTurnTest(unittest.TestCase):
    """One message handled the way gateway/run.py handles it."""

    def test_gateway_turn(self):
        store = SessionStore(None, None, base_url=SERVER.url)
        src = dm("turn", chat_name="Alice")
        entry = store.get_or_create_session(src)                        # resolve
        turn = store.start_turn(entry.session_key)                     # turn start
        sid = entry.session_id
        store.append_to_transcript(sid, {"role": "user", "content": "How do I fix the docker-compose networking?"})
        store.append_to_transcript(sid, {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}]})
        store.append_to_transcript(sid, {"role": "tool", "content": "networks: [] ", "tool_call_id": "call_1",
                                         "tool_name": "terminal"})
        store.append_to_transcript(sid, {"role": "assistant", "content": "Put both services on one bridge network."})
        done = store.complete_turn(entry.session_key, turn["turn_id"], input_tokens=812, output_tokens=96,
                                   estimated_cost_usd=0.0042, last_prompt_tokens=812)
        self.assertEqual(done.input_tokens, 812)
        self.assertEqual(done.session_id, sid)
        hits = store.db.search_messages("docker-compose")
        self.assertEqual([h["session_id"] for h in hits], [sid])
        ctx = store.session_context(entry.session_key)
        self.assertIn("telegram", ctx["prompt"].lower())
        conv = store.load_transcript(sid)
        self.assertEqual([m["role"] for m in conv], ["user", "assistant", "tool", "assistant"])
        self.assertEqual(conv[2]["tool_call_id"], "call_1")
        store.close()


class TurnFenceTest(unittest.TestCase):
    """The messages of a turn carry its turn id: once another process
    closed that turn (here a completion without the client), hermes refuses
    them and stores nothing; after the client's own completion messages go
    unfenced again."""

    def test_messages_of_a_closed_turn_are_refused(self):
        store = SessionStore(None, None, base_url=SERVER.url)
        other = SessionStore(None, None, base_url=SERVER.url)
        entry = store.get_or_create_session(dm("fence"))
        sid = entry.session_id
        turn = store.start_turn(entry.session_key)["turn_id"]
        store.append_to_transcript(sid, {"role": "user", "content": "first"})
        # given the turn is closed behind this store's back
        other.complete_turn(entry.session_key, turn)
        # when this store appends the rest of its reply, then hermes
        # refuses it (the store logs it, as Hermes logs a failed append)
        with self.assertLogs("hermes_client", level="WARNING") as logs:
            store.append_to_transcript(sid, {"role": "assistant", "content": "late"})
        self.assertIn("turn_not_open", "".join(logs.output))
        self.assertEqual([m["content"] for m in store.load_transcript(sid)], ["first"])
        with self.assertRaises(HermesConflict):
            store.db.append_message(sid, "assistant", "late", turn_id=turn)
        # and a new turn of this store is fenced by its own id, then freed
        turn2 = store.start_turn(entry.session_key)["turn_id"]
        store.append_to_transcript(sid, {"role": "assistant", "content": "second"})
        store.complete_turn(entry.session_key, turn2)
        store.append_to_transcript(sid, {"role": "assistant", "content": "after"})
        self.assertEqual([m["content"] for m in store.load_transcript(sid)], ["first", "second", "after"])
        other.close()
        store.close()


class LatencyTest(unittest.TestCase):
    """Client call latency (printed, never asserted: the machine is shared)."""

    def test_latency(self):
        n = int(os.environ.get("HERMES_LATENCY_N", "200"))
        store = SessionStore(None, None, base_url=SERVER.url)
        src = dm("latency")
        entry = store.get_or_create_session(src)
        out = {}
        for name, call in (
            ("get_or_create_session", lambda: store.get_or_create_session(src)),
            ("append_message", lambda: store.db.append_message(entry.session_id, "user", "a message of some length")),
        ):
            samples = []
            for _ in range(n):
                t0 = time.perf_counter()
                call()
                samples.append((time.perf_counter() - t0) * 1000)
            samples.sort()
            out[name] = (statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))])
        for name, (p50, p99) in out.items():
            sys.stderr.write(f"\nlatency {name}: p50 {p50:.3f} ms, p99 {p99:.3f} ms (n={n})")
        store.close()


if __name__ == "__main__":
    unittest.main()
