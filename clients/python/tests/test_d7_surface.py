"""The SessionStore surface of Hermes at d7f5acb9 over a real
`hermes serve` (hermes_harness): the new SessionSource and SessionEntry
fields and the 14 methods, each checked against what hermes' log shows."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hermes_harness import Server  # noqa: E402

from hermes_client import SessionDB, SessionSource, SessionStore  # noqa: E402


def setUpModule():
    global SERVER
    SERVER = Server()


def tearDownModule():
    SERVER.stop()


def dm(chat_id: str) -> SessionSource:
    return SessionSource(platform="telegram", chat_id=chat_id, user_id="u-" + chat_id, user_name="Ann")


def key_of(chat_id: str) -> str:
    return f"agent:main:telegram:dm:{chat_id}"


class SourceFieldsTest(unittest.TestCase):
    def setUp(self):
        self.store = SessionStore(None, None, base_url=SERVER.url)

    def tearDown(self):
        self.store.close()

    def test_scope_alias_profile_and_auto_thread_reach_hermes(self):
        # given a Slack channel source with guild_id only (an older peer),
        # when it is resolved, then scope_id mirrors it, the key carries
        # the workspace, and the origin comes back with every new field.
        src = SessionSource(platform="slack", chat_id="C1", chat_type="channel", user_id="U1",
                            guild_id="T9", profile="coder", auto_thread_created=True,
                            auto_thread_initial_name="first words", prospective_thread_id="1723.1")
        self.assertEqual(src.scope_id, "T9")
        e = self.store.get_or_create_session(src)
        self.assertEqual(e.session_key, "agent:main:slack:thread:T9:C1:1723.1")
        o = e.origin
        self.assertEqual((o.scope_id, o.guild_id, o.profile, o.auto_thread_created,
                          o.auto_thread_initial_name, o.prospective_thread_id),
                         ("T9", "T9", "coder", True, "first words", "1723.1"))
        self.assertEqual(o.to_dict()["scope_id"], "T9")
        self.assertEqual(o.to_dict()["guild_id"], "T9")
        # the thread's follow-up continues the lane
        follow = SessionSource(platform="slack", chat_id="C1", chat_type="thread", thread_id="1723.1",
                               user_id="U2", scope_id="T9")
        self.assertEqual(self.store.get_or_create_session(follow).session_id, e.session_id)


class EntryStateTest(unittest.TestCase):
    def setUp(self):
        self.store = SessionStore(None, None, base_url=SERVER.url)

    def tearDown(self):
        self.store.close()

    def test_model_override_persists_without_credentials_and_goes_with_the_session(self):
        e = self.store.get_or_create_session(dm("mo1"))
        self.store.set_model_override(e.session_key, {"model": "gpt-5", "provider": "openai",
                                                      "api_key": "sk-secret", "api_mode": "chat"})
        want = {"model": "gpt-5", "provider": "openai"}
        self.assertEqual(self.store.get_model_override(e.session_key), want)
        self.assertEqual(e.model_override, want)
        self.assertNotIn("sk-secret", str(SERVER.events(e.session_key)))
        self.assertEqual(SERVER.types(e.session_key).count("lane.model_override_set.v1"), 1)
        # the same again: no event; a new store (a gateway restart) sees it
        self.store.set_model_override(e.session_key, {"model": "gpt-5", "provider": "openai"})
        self.assertEqual(SERVER.types(e.session_key).count("lane.model_override_set.v1"), 1)
        fresh = SessionStore(None, None, base_url=SERVER.url)
        try:
            self.assertEqual(fresh.get_model_override(e.session_key), want)
            fresh._ensure_loaded()
            self.assertEqual(fresh._entries[e.session_key].model_override, want)
        finally:
            fresh.close()
        # /new starts without it
        self.store.reset_session(e.session_key)
        self.assertIsNone(self.store.get_model_override(e.session_key))
        self.assertIsNone(self.store.get_model_override(key_of("nobody")))

    def test_session_metadata_is_an_event_and_not_activity(self):
        e = self.store.get_or_create_session(dm("md1"))
        before = e.updated_at
        SERVER.advance("1m")
        self.assertTrue(self.store.set_session_metadata(e.session_key, "watermark", {"ts": "1.5", "n": 2}))
        self.assertTrue(self.store.set_session_metadata(e.session_key, "gone", None))
        self.assertEqual(self.store.get_session_metadata(e.session_key, "watermark"), {"ts": "1.5", "n": 2})
        self.assertIsNone(self.store.get_session_metadata(e.session_key, "gone", "default"))
        self.assertEqual(self.store.get_session_metadata(e.session_key, "missing", "default"), "default")
        self.assertEqual(self.store.lookup_by_session_key(e.session_key).updated_at, before)
        self.assertEqual(SERVER.types(e.session_key).count("lane.entry_metadata_set.v1"), 2)
        self.assertFalse(self.store.set_session_metadata(key_of("nobody"), "k", 1))
        # a change in place is saved as its PUT
        live = self.store._entries[e.session_key]
        live.metadata["watermark"] = {"ts": "2.0", "n": 3}
        self.store._save()
        self.assertEqual(self.store.get_session_metadata(e.session_key, "watermark"), {"ts": "2.0", "n": 3})
        self.assertEqual(SERVER.types(e.session_key).count("lane.entry_metadata_set.v1"), 3)


class TurnMarkersTest(unittest.TestCase):
    def setUp(self):
        self.store = SessionStore(None, None, base_url=SERVER.url)

    def tearDown(self):
        self.store.close()

    def test_mark_and_clear_are_hermes_turns_with_compare_and_swap(self):
        e = self.store.get_or_create_session(dm("tm1"))
        t1 = self.store.mark_turn_active(e.session_key)
        self.assertEqual(self.store._entries[e.session_key].active_turn_token, t1)
        self.assertIsNotNone(self.store._entries[e.session_key].active_turn_started_at)
        t2 = self.store.mark_turn_active(e.session_key)
        self.assertNotEqual(t1, t2)
        self.assertFalse(self.store.clear_turn_active(e.session_key, t1))  # a stale unwind
        self.assertTrue(self.store.clear_turn_active(e.session_key, t2))
        self.assertIsNone(self.store._entries[e.session_key].active_turn_token)
        self.assertEqual(SERVER.types(e.session_key)[-1], "lane.turn_completed.v1")
        self.assertIsNone(self.store.mark_turn_active(key_of("nobody")))

    def test_recover_interrupted_turns_resumes_fresh_markers_only(self):
        fresh = self.store.get_or_create_session(dm("tm2")).session_key
        stale = self.store.get_or_create_session(dm("tm3")).session_key
        self.store.mark_turn_active(stale)
        SERVER.advance("2h")
        self.store.mark_turn_active(fresh)
        # a new process (the old one died with both markers set)
        after = SessionStore(None, None, base_url=SERVER.url)
        try:
            self.assertEqual(after.recover_interrupted_turns(max_age_seconds=3600), 1)
            f, s = after._entries[fresh], after._entries[stale]
            self.assertEqual((f.resume_pending, f.resume_reason, f.active_turn_token), (True, "restart_interrupted", None))
            self.assertEqual((s.resume_pending, s.active_turn_token), (False, None))
            self.assertEqual(after.recover_interrupted_turns(), 0)
        finally:
            after.close()

    def test_discard_active_turn_markers_after_a_clean_stop(self):
        key = self.store.get_or_create_session(dm("tm4")).session_key
        self.store.mark_turn_active(key)
        after = SessionStore(None, None, base_url=SERVER.url)
        try:
            self.assertEqual(after.discard_active_turn_markers(), 1)
            self.assertEqual((after._entries[key].active_turn_token, after._entries[key].resume_pending), (None, False))
            self.assertEqual(after.discard_active_turn_markers(), 0)
        finally:
            after.close()


class SmallMethodsTest(unittest.TestCase):
    def setUp(self):
        self.store = SessionStore(None, None, base_url=SERVER.url)

    def tearDown(self):
        self.store.close()

    def test_peek_lookup_finalizable_and_platform_ids(self):
        e = self.store.get_or_create_session(dm("sm1"))
        self.assertEqual(self.store.peek_session_id(e.session_key), e.session_id)
        self.assertIs(self.store.lookup_by_session_key(e.session_key), e)
        self.assertIsNone(self.store.peek_session_id(key_of("nobody")))
        self.assertIsNone(self.store.lookup_by_session_key(""))
        self.assertTrue(self.store.is_session_finalizable(e))  # the default policy expires sessions
        self.assertFalse(self.store.has_platform_message_id(e.session_id, "m1"))

    def test_set_expiry_finalized_clears_the_override(self):
        e = self.store.get_or_create_session(dm("sm2"))
        self.store.set_model_override(e.session_key, {"model": "m"})
        SERVER.advance("25h")  # past the default policy's boundary
        self.store.set_expiry_finalized(e)
        got = self.store.lookup_by_session_key(e.session_key)
        self.assertTrue(got.expiry_finalized)
        self.assertIsNone(self.store.get_model_override(e.session_key))
        self.assertIn("lane.expiry_finalized.v1", SERVER.types(e.session_key))

    def test_advance_compression_session_is_a_compare_and_swap(self):
        e = self.store.get_or_create_session(dm("sm3"))
        old = e.session_id
        db = self.store.db
        db.create_session(session_id="20990101_000000_cccccccc", source="telegram", parent_session_id=old)
        self.assertIsNone(self.store.advance_compression_session(e.session_key, "20990101_000000_dddddddd",
                                                                 "20990101_000000_cccccccc"))
        moved = self.store.advance_compression_session(e.session_key, old, "20990101_000000_cccccccc")
        self.assertEqual(moved.session_id, "20990101_000000_cccccccc")
        self.assertIn("lane.session_compressed.v1", SERVER.types(e.session_key))
        # already there: the entry, nothing new
        n = len(SERVER.events(e.session_key))
        self.assertIs(self.store.advance_compression_session(e.session_key, old, "20990101_000000_cccccccc"), moved)
        self.assertEqual(len(SERVER.events(e.session_key)), n)


class HygieneStreakTest(unittest.TestCase):
    def test_streaks_survive_a_restart_and_reset(self):
        db = SessionDB(base_url=SERVER.url)
        key = key_of("hy1")
        self.assertEqual(db.increment_hygiene_failure_streak(key), 1)
        self.assertEqual(db.increment_hygiene_failure_streak(key), 2)
        again = SessionDB(base_url=SERVER.url)  # a restarted gateway
        self.assertEqual(again.increment_hygiene_failure_streak(key), 3)
        again.reset_hygiene_failure_streak(key)
        self.assertEqual(db.increment_hygiene_failure_streak(key), 1)
        self.assertEqual(db.increment_hygiene_failure_streak(key_of("hy2")), 1)


if __name__ == "__main__":
    unittest.main()
