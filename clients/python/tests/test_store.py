"""SessionStore's in-memory index as Hermes' gateway uses it: live entries
in _entries, _ensure_loaded, _lock, and _save() turning in-place changes
into hermes commands. Against a real `hermes serve` (hermes_harness)."""

import os
import sys
import threading
import unittest
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hermes_harness import Server  # noqa: E402

from hermes_client import (  # noqa: E402
    HermesConflict,
    HermesUnsupportedChange,
    SessionEntry,
    SessionSource,
    SessionStore,
)


def setUpModule():
    global SERVER
    SERVER = Server()
    os.environ["HERMES_URL"] = SERVER.url


def tearDownModule():
    SERVER.stop()


def dm(chat_id: str) -> SessionSource:
    return SessionSource(platform="telegram", chat_id=chat_id, user_id="u-" + chat_id, user_name="Ann")


def key_of(chat_id: str) -> str:
    return f"agent:main:telegram:dm:{chat_id}"


class LiveEntriesTest(unittest.TestCase):
    def setUp(self):
        self.store = SessionStore(None, None, base_url=SERVER.url)

    def tearDown(self):
        self.store.close()

    def test_get_or_create_returns_the_entry_held_in_entries(self):
        # given a lane, when it is resolved twice, then both answers are
        # the one object _entries holds, updated in place.
        a = self.store.get_or_create_session(dm("live1"))
        self.assertIs(self.store._entries[key_of("live1")], a)
        before = a.updated_at
        SERVER.advance("1s")
        b = self.store.get_or_create_session(dm("live1"))
        self.assertIs(a, b)
        self.assertGreater(b.updated_at, before)
        self.assertEqual(b.version, len(SERVER.events(key_of("live1"))))

    def test_reset_makes_a_new_object_and_the_old_one_keeps_its_session(self):
        # /new snapshots _entries.get(key) before reset_session and reads
        # the old session id from it afterwards (gateway/slash_commands.py).
        self.store.get_or_create_session(dm("live2"))
        old = self.store._entries.get(key_of("live2"))
        old_sid = old.session_id
        new = self.store.reset_session(key_of("live2"))
        self.assertIsNot(new, old)
        self.assertEqual(old.session_id, old_sid)
        self.assertNotEqual(new.session_id, old_sid)
        self.assertTrue(new.is_fresh_reset)
        self.assertIs(self.store._entries[key_of("live2")], new)

    def test_entries_read_through_to_hermes(self):
        # given a lane another process created, when this store's _entries
        # is asked for it, then hermes' lane is found (and an unknown key is not).
        other = SessionStore(None, None, base_url=SERVER.url)
        made = other.get_or_create_session(dm("elsewhere"))
        other.close()
        self.store._ensure_loaded()
        got = self.store._entries.get(key_of("elsewhere"))
        self.assertIsNotNone(got)
        self.assertEqual(got.session_id, made.session_id)
        self.assertIn(key_of("elsewhere"), self.store._entries)
        self.assertIsNone(self.store._entries.get(key_of("nobody-here")))
        self.assertNotIn(key_of("nobody-here"), self.store._entries)

    def test_ensure_loaded_lists_every_lane_once_and_a_cleared_index_reloads(self):
        self.store.get_or_create_session(dm("load1"))
        fresh = SessionStore(None, None, base_url=SERVER.url)
        try:
            with fresh._lock:
                fresh._ensure_loaded_locked()
            self.assertIn(key_of("load1"), dict(fresh._entries))
            sid = fresh._entries[key_of("load1")].session_id
            # Hermes' tests simulate a restart so: the next call reloads.
            fresh._loaded = False
            fresh._entries.clear()
            again = fresh.get_or_create_session(dm("load1"))
            self.assertEqual(again.session_id, sid)
            fresh._save()  # the cleared keys are not removals
        finally:
            fresh.close()

    def test_lock_is_a_real_lock(self):
        with self.store._lock:
            self.store._ensure_loaded_locked()
            self.assertIsInstance(list(self.store._entries.values()), list)
        self.assertTrue(hasattr(self.store._lock, "acquire"))


class SaveTest(unittest.TestCase):
    def setUp(self):
        self.store = SessionStore(None, None, base_url=SERVER.url)

    def tearDown(self):
        self.store.close()

    def test_consumed_auto_reset_notice_is_acknowledged(self):
        # given an auto-reset lane (suspended, then a message),
        self.store.get_or_create_session(dm("ack"))
        self.store.suspend_session(key_of("ack"))
        e = self.store.get_or_create_session(dm("ack"))
        self.assertTrue(e.was_auto_reset)
        self.assertEqual(e.auto_reset_reason, "suspended")
        # when the gateway consumes the flags in place and saves,
        e.was_auto_reset = False
        e.auto_reset_reason = None
        self.store._save()
        # then hermes recorded the delivery, and the entry agrees.
        self.assertEqual(SERVER.types(key_of("ack"))[-1], "lane.notice_delivered.v1")
        lane = self.store.get_session(key_of("ack"))
        self.assertFalse(lane.was_auto_reset)
        self.assertIs(lane, e)

    def test_a_change_not_saved_is_sent_by_the_next_store_call(self):
        # Hermes' get_or_create saves the whole index: a flag consumed in
        # place reaches hermes on the next message.
        self.store.get_or_create_session(dm("implicit"))
        self.store.suspend_session(key_of("implicit"))
        e = self.store.get_or_create_session(dm("implicit"))
        e.was_auto_reset = False
        e.auto_reset_reason = None
        again = self.store.get_or_create_session(dm("implicit"))
        self.assertFalse(again.was_auto_reset)
        self.assertIn("lane.notice_delivered.v1", SERVER.types(key_of("implicit")))

    def test_last_prompt_tokens_and_resume_mark(self):
        e = self.store.get_or_create_session(dm("tok"))
        e.last_prompt_tokens = 4321
        e.resume_pending = True
        e.resume_reason = "restart_timeout"
        self.store._save()
        types = SERVER.types(key_of("tok"))
        self.assertEqual(types[-2:], ["lane.resume_marked.v1", "lane.touched.v1"])
        lane = self.store.get_session(key_of("tok"))
        self.assertEqual(lane.last_prompt_tokens, 4321)
        self.assertTrue(lane.resume_pending)
        self.assertEqual(lane.resume_reason, "restart_timeout")
        self.assertIsNotNone(lane.last_resume_marked_at)
        # clearing it in place is a resume_cleared event
        e.resume_pending = False
        e.resume_reason = None
        e.last_resume_marked_at = None
        self.store._save()
        self.assertEqual(SERVER.types(key_of("tok"))[-1], "lane.resume_cleared.v1")

    def test_save_without_changes_sends_nothing(self):
        self.store.get_or_create_session(dm("quiet"))
        n = len(SERVER.events(key_of("quiet")))
        self.store._save()
        self.store._save()
        self.assertEqual(len(SERVER.events(key_of("quiet"))), n)

    def test_unsupported_change_names_the_field_sends_nothing_and_is_put_back(self):
        e = self.store.get_or_create_session(dm("bad"))
        created = e.created_at
        n = len(SERVER.events(key_of("bad")))
        e.created_at = created - timedelta(days=3)
        e.last_prompt_tokens = 7  # expressible, but nothing is sent with a refusal
        with self.assertRaises(HermesUnsupportedChange) as cm:
            self.store._save()
        self.assertEqual(cm.exception.field, "created_at")
        self.assertEqual(cm.exception.session_key, key_of("bad"))
        self.assertIn("created_at", str(cm.exception))
        self.assertEqual(e.created_at, created)
        self.assertEqual(len(SERVER.events(key_of("bad"))), n)
        # the expressible change is still pending and goes with the next save
        self.store._save()
        self.assertEqual(self.store.get_session(key_of("bad")).last_prompt_tokens, 7)

    def test_token_sums_and_origin_are_refused(self):
        e = self.store.get_or_create_session(dm("sums"))
        for field, value in (("input_tokens", 5), ("display_name", "Other"), ("chat_type", "group")):
            with self.subTest(field=field):
                setattr(e, field, value)
                with self.assertRaises(HermesUnsupportedChange) as cm:
                    self.store._save()
                self.assertEqual(cm.exception.field, field)
        e.origin.user_name = "Mallory"
        with self.assertRaises(HermesUnsupportedChange) as cm:
            self.store._save()
        self.assertEqual(cm.exception.field, "origin")
        self.assertEqual(self.store._entries[key_of("sums")].origin.user_name, "Ann")

    def test_removing_or_inventing_an_entry_is_refused(self):
        self.store.get_or_create_session(dm("gone"))
        del self.store._entries[key_of("gone")]
        with self.assertRaises(HermesUnsupportedChange) as cm:
            self.store._save()
        self.assertEqual(cm.exception.field, "session_key")
        self.assertIn("removed", str(cm.exception))
        # the lane is still in hermes and comes back on the next read
        self.assertIsNotNone(self.store.get_session(key_of("gone")))
        fake = SessionEntry(session_key=key_of("invented"), session_id="20300101_000000_deadbeef",
                            created_at=self.store.get_session(key_of("gone")).created_at,
                            updated_at=self.store.get_session(key_of("gone")).updated_at)
        self.store._entries[key_of("invented")] = fake
        with self.assertRaises(HermesUnsupportedChange):
            self.store._save()
        self.assertNotIn(key_of("invented"), dict(self.store._entries))

    def test_flag_set_back_is_refused(self):
        e = self.store.get_or_create_session(dm("back"))
        e.suspended = False  # unchanged: fine
        self.store._save()
        self.store.suspend_session(key_of("back"))
        e = self.store._entries[key_of("back")]
        self.assertTrue(e.suspended)
        e.suspended = False
        with self.assertRaises(HermesUnsupportedChange) as cm:
            self.store._save()
        self.assertEqual(cm.exception.field, "suspended")
        self.assertTrue(e.suspended)

    def test_two_threads_saving_different_lanes_do_not_overwrite_each_other(self):
        keys = [f"par{i}" for i in range(6)]
        entries = {k: self.store.get_or_create_session(dm(k)) for k in keys}
        before = {k: len(SERVER.events(key_of(k))) for k in keys}
        errors = []

        def work(k, n):
            try:
                entries[k].last_prompt_tokens = n
                entries[k].resume_pending = True
                entries[k].resume_reason = "shutdown_timeout"
                self.store._save()
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        ts = [threading.Thread(target=work, args=(k, 100 + i)) for i, k in enumerate(keys)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errors, [])
        for i, k in enumerate(keys):
            lane = self.store.get_session(key_of(k))
            self.assertEqual(lane.last_prompt_tokens, 100 + i)
            self.assertTrue(lane.resume_pending)
            # each change sent exactly once: one mark and one touch
            self.assertEqual(len(SERVER.events(key_of(k))) - before[k], 2, k)

    def test_a_lane_another_process_reset_gets_the_change_on_its_new_session(self):
        # given this store holds an entry, when another process resets the
        # lane and this one then marks resume pending in place and saves,
        # then the mark lands on the lane as hermes has it and _entries
        # shows the new session.
        mine = self.store.get_or_create_session(dm("race"))
        other = SessionStore(None, None, base_url=SERVER.url)
        reset = other.reset_session(key_of("race"))
        other.close()
        mine.resume_pending = True
        mine.resume_reason = "restart_timeout"
        self.store._save()
        now = self.store._entries[key_of("race")]
        self.assertEqual(now.session_id, reset.session_id)
        self.assertTrue(now.resume_pending)


class HermesAnswersTest(unittest.TestCase):
    """The private questions Hermes' gateway asks the store, answered by hermes."""

    def setUp(self):
        self.store = SessionStore(None, None, base_url=SERVER.url)

    def tearDown(self):
        self.store.close()

    def test_generate_session_key_canonicalises_whatsapp(self):
        src = SessionSource(platform="whatsapp", chat_id="15551234567@s.whatsapp.net")
        self.assertEqual(self.store._generate_session_key(src), "agent:main:whatsapp:dm:15551234567")
        grp = SessionSource(platform="telegram", chat_id="-100", chat_type="group", user_id="7")
        self.assertEqual(self.store._generate_session_key(grp), "agent:main:telegram:group:-100:7")
        # asked once per distinct source
        self.assertIn(("telegram", "-100", "group", "7", None, None, None, None, None), self.store._keys)

    def test_is_session_expired_and_should_reset_follow_hermes_clock(self):
        e = self.store.get_or_create_session(dm("exp"))
        self.assertFalse(self.store._is_session_expired(e))
        self.assertIsNone(self.store._should_reset(e, dm("exp")))
        SERVER.advance("25h")
        self.assertTrue(self.store._is_session_expired(e))
        self.assertIn(self.store._should_reset(e, dm("exp")), ("idle", "daily"))
        busy = SessionStore(None, None, has_active_processes_fn=lambda key: True, base_url=SERVER.url)
        try:
            self.assertFalse(busy._is_session_expired(e))  # live processes: never, as in Hermes
        finally:
            busy.close()

    def test_expiry_finalized_in_place(self):
        e = self.store.get_or_create_session(dm("fin"))
        e.expiry_finalized = True
        with self.assertRaises(HermesConflict):  # not expired: hermes refuses
            self.store._save()
        self.assertFalse(e.expiry_finalized)
        SERVER.advance("25h")
        e = self.store._entries[key_of("fin")]
        with self.store._lock:  # as the gateway's expiry watcher does
            e.expiry_finalized = True
            self.store._save()
        self.assertEqual(SERVER.types(key_of("fin"))[-1], "lane.expiry_finalized.v1")
        self.assertTrue(self.store.get_session(key_of("fin")).expiry_finalized)


class CompressionSplitTest(unittest.TestCase):
    """entry.session_id = new; _save(): gateway/run.py after a compression."""

    def setUp(self):
        self.store = SessionStore(None, None, base_url=SERVER.url)
        self.db = self.store.db

    def tearDown(self):
        self.store.close()

    def child_of(self, parent: str, suffix: str) -> str:
        child = parent + suffix
        self.db.end_session(parent, "compression")
        self.db.create_session(child, "telegram", parent_session_id=parent)
        return child

    def test_split_keeps_the_entry_and_moves_the_lane(self):
        e = self.store.get_or_create_session(dm("split"))
        e.last_prompt_tokens = 9
        self.store._save()
        old = e.session_id
        new = self.child_of(old, "_c1")
        e.session_id = new
        self.store._save()
        self.assertIs(self.store._entries[key_of("split")], e)
        ev = SERVER.events(key_of("split"))[-1]
        self.assertEqual(ev["type"], "lane.session_compressed.v1")
        self.assertEqual((ev["data"]["previous_session_id"], ev["data"]["session_id"]), (old, new))
        lane = self.store.get_session(key_of("split"))
        self.assertEqual(lane.session_id, new)
        self.assertEqual(lane.last_prompt_tokens, 9)  # the entry is kept, not reset
        self.assertIn("session compressed", SERVER.tail(key_of("split")))

    def test_a_session_that_is_not_a_compression_child_is_refused(self):
        e = self.store.get_or_create_session(dm("notchild"))
        self.db.create_session("unrelated_session_x", "telegram")
        old = e.session_id
        e.session_id = "unrelated_session_x"
        with self.assertRaises(HermesConflict) as cm:
            self.store._save()
        self.assertIn("session_id", str(cm.exception))
        self.assertEqual(e.session_id, old)
        self.assertNotIn("lane.session_compressed.v1", SERVER.types(key_of("notchild")))

    def test_a_lane_another_process_moved_fails_loudly(self):
        e = self.store.get_or_create_session(dm("moved"))
        old = e.session_id
        other = SessionStore(None, None, base_url=SERVER.url)
        reset = other.reset_session(key_of("moved"))
        other.close()
        e.session_id = self.child_of(old, "_c2")
        with self.assertRaises(HermesConflict):
            self.store._save()
        now = self.store._entries[key_of("moved")]
        self.assertEqual(now.session_id, reset.session_id)
        self.assertNotIn("lane.session_compressed.v1", SERVER.types(key_of("moved")))

    def test_fresh_reset_consumed_in_place(self):
        self.store.get_or_create_session(dm("fresh"))
        new = self.store.reset_session(key_of("fresh"))
        self.assertTrue(new.is_fresh_reset)
        new.is_fresh_reset = False
        self.store._save()
        self.assertEqual(SERVER.types(key_of("fresh"))[-1], "lane.fresh_reset_consumed.v1")
        self.assertFalse(self.store.get_or_create_session(dm("fresh")).is_fresh_reset)


if __name__ == "__main__":
    unittest.main()
