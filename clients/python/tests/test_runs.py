"""Gateway runs as the client announces them (hermes_client.runs), against
a real `hermes serve` (manual clock): the gateway restarts alone, hermes
restarts alone, both at once; a clean stop; the stuck-loop count and the
gateway's own stuck-loop suspension agreeing with hermes'; and
GatewayRunner's instrumented start/stop/turn."""

import asyncio
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hermes_harness import Server  # noqa: E402

from hermes_client import HermesConflict, SessionSource, SessionStore  # noqa: E402
from hermes_client.runs import GatewayRun, instrument  # noqa: E402


def dm(chat_id: str) -> SessionSource:
    return SessionSource(platform="telegram", chat_id=chat_id, user_id="u-" + chat_id)


def key_of(chat_id: str) -> str:
    return f"agent:main:telegram:dm:{chat_id}"


class RunsTest(unittest.TestCase):
    def setUp(self):
        self.server = Server()
        self.store = SessionStore(None, None, base_url=self.server.url)
        self.runs = []

    def tearDown(self):
        for r in self.runs:
            r._halt.set()
        self.store.close()
        self.server.stop()

    def run_of(self, gateway: str) -> GatewayRun:
        r = GatewayRun(self.store._http, gateway=gateway)
        self.runs.append(r)
        return r

    def open_turn(self, chat: str, run: GatewayRun) -> str:
        self.store.get_or_create_session(dm(chat))
        return self.store.start_turn(key_of(chat), gateway_run=run.ref())["turn_id"]

    def runs_of(self, gateway: str):
        return self.store._http.get("/gateway-runs", gateway=gateway)["runs"]

    def test_announce_heartbeat_and_clean_stop(self):
        run = self.run_of("life")
        started = run.start()
        self.assertEqual(started["run"]["state"], "running")
        self.assertIsNone(started["previous"])
        self.assertEqual(run.beat()["run"]["run_id"], run.run_id)
        stopped = run.stop()
        self.assertEqual(stopped["run"]["state"], "stopped")
        self.assertEqual(stopped["interrupted"], [])
        self.assertEqual(self.runs_of("life")[0]["state"], "stopped")
        # the next run finds a clean predecessor and recovers nothing
        nxt = self.run_of("life").start()
        self.assertEqual(nxt["previous"]["state"], "stopped")
        self.assertEqual(nxt["interrupted"], [])

    def test_the_gateway_restarts_alone_and_its_open_turn_is_recovered(self):
        a = self.run_of("solo")
        a.start()
        self.open_turn("g1", a)
        a._halt.set()  # the process dies: no stop, no more heartbeats
        b = self.run_of("solo").start()
        self.assertEqual(b["previous"]["run_id"], a.run_id)
        self.assertEqual(b["previous"]["state"], "lost")
        self.assertEqual(b["interrupted"], [key_of("g1")])
        lane = self.store.get_session(key_of("g1"))
        self.assertTrue(lane.resume_pending)
        self.assertEqual(lane.resume_reason, "restart_interrupted")
        types = self.server.types(key_of("g1"))
        self.assertIn("lane.turn_interrupted.v1", types)
        with self.assertRaises(HermesConflict):
            a.beat()  # the lost run cannot renew

    def test_hermes_restarts_alone_and_the_gateway_completes_its_turn(self):
        a = self.run_of("keep")
        a.start()
        turn = self.open_turn("h1", a)
        self.server.restart()
        # hermes' own restart neither waits for nor cuts a gateway run's turn
        lane = self.store.get_session(key_of("h1"))
        self.assertEqual(lane.resume_pending, False)
        self.assertIsNotNone(self.store._http.get(self.store._http.path("sessions", key_of("h1")))["open_turn_id"])
        self.assertEqual(a.beat()["run"]["state"], "running")
        done = self.store.complete_turn(key_of("h1"), turn)
        self.assertFalse(done.resume_pending)
        self.assertNotIn("lane.turn_interrupted.v1", self.server.types(key_of("h1")))

    def test_both_restart_at_once(self):
        a = self.run_of("both")
        a.start()
        self.open_turn("b1", a)
        a._halt.set()
        self.server.restart()
        b = self.run_of("both").start()
        self.assertEqual(b["interrupted"], [key_of("b1")])
        self.assertTrue(self.store.get_session(key_of("b1")).resume_pending)

    def test_clean_stop_cuts_the_turns_still_open(self):
        a = self.run_of("drain")
        a.start()
        self.open_turn("d1", a)
        stopped = a.stop(restart=True)
        self.assertEqual(stopped["interrupted"], [key_of("d1")])
        lane = self.store.get_session(key_of("d1"))
        self.assertTrue(lane.resume_pending)
        self.assertEqual(lane.resume_reason, "restart_timeout")

    def test_three_cut_runs_suspend_the_lane_and_the_gateway_never_doubles_it(self):
        for _ in range(3):
            r = self.run_of("loop")
            r.start()
            self.open_turn("s1", r)
            r._halt.set()
        fourth = self.run_of("loop").start()
        self.assertEqual(fourth["suspended"], [key_of("s1")])
        self.store._refresh_all()  # what the instrumented GatewayRunner.start does after announcing
        entry = self.store._entries.get(key_of("s1"))
        self.assertTrue(entry.suspended)
        # Hermes' start-up (_suspend_stuck_loop_sessions) skips it: already
        # suspended; the one suspension event is hermes'.
        types = self.server.types(key_of("s1"))
        self.assertEqual(types.count("lane.suspended.v2"), 1)
        # On a lane hermes does not count as stuck the gateway's own stuck-
        # loop suspension is refused, loudly, and the entry shows hermes' state.
        other = self.store.get_or_create_session(dm("s2"))
        other.suspended = True
        with self.assertRaises(HermesConflict) as cm:
            self.store._save()
        self.assertIn("suspended", str(cm.exception))
        self.assertFalse(self.store._entries.get(key_of("s2")).suspended)
        self.assertNotIn("lane.suspended.v2", self.server.types(key_of("s2")))


class FakeRunner:
    """The three methods of GatewayRunner that instrument() wraps, with a
    client store: enough to see what the wrappers tell hermes."""

    def __init__(self, store):
        self.session_store = store
        self._draining = False
        self._restart_requested = False
        self.outcome = {"final_response": "ok", "completed": True}

    async def start(self):
        return True

    async def stop(self, *, restart=False, detached_restart=False, service_restart=False):
        self._restart_requested = restart

    async def _run_agent(self, message, context_prompt, history, source, session_id, session_key=None,
                         run_generation=None, _interrupt_depth=0, **kw):
        if message == "nested" and _interrupt_depth == 0:
            await self._run_agent(message="inner", context_prompt="", history=[], source=source,
                                  session_id=session_id, session_key=session_key, _interrupt_depth=1)
        return dict(self.outcome)


instrument(FakeRunner)


class InstrumentTest(unittest.TestCase):
    def setUp(self):
        os.environ["HERMES_GATEWAY"] = "fake-runner"
        self.server = Server()
        self.store = SessionStore(None, None, base_url=self.server.url)

    def tearDown(self):
        os.environ.pop("HERMES_GATEWAY", None)
        run = getattr(self.store, "_gateway_run", None)
        if run is not None:
            run._halt.set()
        self.store.close()
        self.server.stop()

    def test_start_turns_and_stop(self):
        runner = FakeRunner(self.store)
        asyncio.run(runner.start())
        run = self.store._gateway_run
        self.assertEqual(run.gateway, "fake-runner")
        self.store.get_or_create_session(dm("i1"))
        asyncio.run(runner._run_agent(message="hi", context_prompt="", history=[], source=dm("i1"),
                                      session_id="x", session_key=key_of("i1")))
        types = self.server.types(key_of("i1"))
        self.assertEqual(types[-2:], ["lane.turn_started.v1", "lane.turn_completed.v1"])
        # a queued follow-up runs inside the outer turn: one turn
        asyncio.run(runner._run_agent(message="nested", context_prompt="", history=[], source=dm("i1"),
                                      session_id="x", session_key=key_of("i1")))
        types = self.server.types(key_of("i1"))
        self.assertEqual(types.count("lane.turn_started.v1"), 2)
        # a turn the drain interrupts stays open for the run's stop to cut
        runner._draining = True
        runner.outcome = {"final_response": None, "interrupted": True}
        asyncio.run(runner._run_agent(message="cut", context_prompt="", history=[], source=dm("i1"),
                                      session_id="x", session_key=key_of("i1")))
        self.assertIsNotNone(self.store._http.get(self.store._http.path("sessions", key_of("i1")))["open_turn_id"])
        asyncio.run(runner.stop(restart=True))
        self.assertEqual(run.stopped["interrupted"], [key_of("i1")])
        lane = self.store.get_session(key_of("i1"))
        self.assertEqual(lane.resume_reason, "restart_timeout")

    def test_a_failed_turn_is_completed_as_failed(self):
        runner = FakeRunner(self.store)
        asyncio.run(runner.start())
        self.store.get_or_create_session(dm("i2"))
        self.store.mark_resume_pending(key_of("i2"), "restart_timeout")
        runner.outcome = {"final_response": None, "failed": True, "error": "429"}
        asyncio.run(runner._run_agent(message="x", context_prompt="", history=[], source=dm("i2"),
                                      session_id="x", session_key=key_of("i2")))
        lane = self.store.get_session(key_of("i2"))
        self.assertTrue(lane.resume_pending)  # a failed turn keeps the mark, as Hermes does
        self.assertEqual(self.server.types(key_of("i2"))[-1], "lane.turn_completed.v1")


if __name__ == "__main__":
    unittest.main()
