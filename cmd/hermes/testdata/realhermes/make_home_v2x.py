"""Write a Hermes home of schema v25 or v26 with Hermes' own code.

    /usr/bin/python3 make_home_v2x.py UPSTREAM HOME [--messages N]

UPSTREAM is a hermes-agent tree (b9aa9289 writes schema v25, d7f5acb9 schema
v26; `git archive <commit> | tar -x -C <dir>` of the hermes-agent mirror);
HOME is created. Its gateway/session.py, hermes_state.py, gateway/config.py
and tools/async_delegation.py are imported unmodified and driven as a
gateway drives them: SessionStore.get_or_create_session for each chat,
SessionDB.append_message for the transcript, update_system_prompt,
set_session_title / set_auto_title, update_token_counts (which fills
session_model_usage), set_session_pinned / set_session_archived /
set_session_hidden, reset_session, mark_resume_pending, mark_turn_active and
try_acquire_session_turn_lease left unreleased (a turn in flight when the
gateway stopped), increment_hygiene_failure_streak, async_delegation's
_persist_dispatch (what dispatch_async_delegation records before it runs a
subagent), and utils.atomic_json_write for .restart_failure_counts as
GatewayRunner writes it. No SQL or JSON is written by hand.

The first lanes are written with gateway.write_sessions_json on (Hermes'
default: the routing index goes to both state.db's gateway_routing and
sessions/sessions.json); a second SessionStore with it off then marks one lane
resume-pending, so sessions.json is stale for that key and the import must
take gateway_routing's row, as Hermes' loader does.

The JSONL export of every session is written to HOME/export.jsonl with
hermes_cli.session_export.render_sessions_export(SessionDB.export_all()),
what `hermes sessions export FILE` writes (b9aa9289).

With --messages N (N > 0) it writes only a large home for the throughput
measurement: 100-message sessions, one lane each, until N messages.

The homes checked in beside this script were made with:

    T25=$(mktemp -d) T26=$(mktemp -d) H=$(mktemp -d)
    git --git-dir=<mirror> archive b9aa9289 | tar -x -C "$T25"
    git --git-dir=<mirror> archive d7f5acb9 | tar -x -C "$T26"
    /usr/bin/python3 make_home_v2x.py "$T25" "$H/hermes-home-v25"
    /usr/bin/python3 make_home_v2x.py "$T26" "$H/hermes-home-v26"
    then copy state.db, sessions/sessions.json, .restart_failure_counts,
    config.yaml and export.jsonl of each into testdata/realhermes/v25 and v26
    (Hermes also creates empty cache, log and skill directories: left out)

(Debian's python3 with python3-yaml and python3-httpx, as for make_home.py.)
The routing rows' scope is the sessions directory the gateway resolved,
the home's path at generation (the checked-in homes were written under a
temporary directory, and their rows keep that path as Hermes wrote it),
which the import's target never is: the tests read the checked-in homes
as homes moved elsewhere.
"""
import json
import os
import sys
import time
from pathlib import Path


def main():
    upstream, home = sys.argv[1], Path(sys.argv[2])
    big = 0
    if len(sys.argv) > 4 and sys.argv[3] == "--messages":
        big = int(sys.argv[4])
    home.mkdir(parents=True, exist_ok=True)
    os.environ["HERMES_HOME"] = str(home)
    sys.path.insert(0, upstream)
    from gateway.config import GatewayConfig, Platform
    from gateway.session import SessionSource, SessionStore
    from hermes_state import SessionDB
    import hermes_state_common

    version = hermes_state_common.SCHEMA_VERSION
    if big:
        write_big(home, big, GatewayConfig, Platform, SessionSource, SessionStore, SessionDB)
        return

    from utils import atomic_json_write
    from tools import async_delegation

    cfg = GatewayConfig(write_sessions_json=True)
    store = SessionStore(home / "sessions", cfg)
    db = SessionDB()

    def lane(**fields):
        fields["platform"] = Platform(fields["platform"])
        return store.get_or_create_session(SessionSource(**fields))

    prompt = "You are Hermes, a helpful assistant.\nBe brief."

    # 1. A Telegram DM: a tool-using turn, a title, a deduplicated system
    #    prompt, token usage by model.
    tg = lane(platform="telegram", chat_id="42", chat_type="dm", user_id="42", user_name="Alice")
    db.update_system_prompt(tg.session_id, prompt)
    db.append_message(tg.session_id, "user", "How do I fix the docker-compose networking?", platform_message_id="tg-1001")
    db.append_message(tg.session_id, "assistant", None,
                      tool_calls=[{"id": "call_1", "type": "function",
                                   "function": {"name": "terminal", "arguments": "{\"command\": \"docker network ls\"}"}}],
                      reasoning="Check the networks first.", finish_reason="tool_calls", token_count=31)
    db.append_message(tg.session_id, "tool", "bridge host none", tool_call_id="call_1", tool_name="terminal")
    db.append_message(tg.session_id, "assistant", "Put both services on one user-defined bridge network.",
                      finish_reason="stop", token_count=12)
    db.set_session_title(tg.session_id, "Docker networking")
    db.update_token_counts(tg.session_id, input_tokens=812, output_tokens=96, model="anthropic/claude-sonnet-4",
                           estimated_cost_usd=0.0042, billing_provider="openrouter", api_call_count=2)

    # 2. A Discord guild channel (scope_id), the same system prompt (one
    #    system_prompts row for both), pinned.
    dc = lane(platform="discord", chat_id="g1-chan", chat_type="group", user_id="u7", user_name="Bob",
              chat_name="#general", scope_id="guild-991")
    db.update_system_prompt(dc.session_id, prompt)
    db.append_message(dc.session_id, "user", "记忆断裂 — what did we decide yesterday?")
    db.append_message(dc.session_id, "assistant", "We chose the blue-green rollout.", finish_reason="stop")
    db.set_session_pinned(dc.session_id, True)

    # 3. A Slack thread reset with /new: the old session ends (archived),
    #    the lane moves to a new one.
    sl = lane(platform="slack", chat_id="C1", chat_type="thread", thread_id="1712.55", user_id="U1")
    db.append_message(sl.session_id, "user", "first thread question about kubernetes")
    old_slack = sl.session_id
    sl = store.reset_session(sl.session_key)
    db.set_session_archived(old_slack, True)
    db.append_message(sl.session_id, "user", "a fresh start on the rollout plan")

    # 4. A WhatsApp DM whose turn was in flight when the gateway stopped:
    #    its turn lease is never released.
    wa = lane(platform="whatsapp", chat_id="4915112345678", chat_type="dm", user_id="4915112345678")
    db.append_message(wa.session_id, "user", "summarise the quarterly report please")
    if version >= 26:
        store.mark_turn_active(wa.session_key)
        db.try_acquire_session_turn_lease(wa.session_id, "gateway:%d:turn" % os.getpid())
    else:
        db.append_message(wa.session_id, "assistant", "Working on it.")

    # 5. A lane with a hygiene failure streak (v26) and an async delegation.
    sg = lane(platform="signal", chat_id="+15550001", chat_type="dm", user_id="+15550001")
    db.append_message(sg.session_id, "user", "delegate the flight search")
    if version >= 26:
        db.increment_hygiene_failure_streak(sg.session_key)
        db.increment_hygiene_failure_streak(sg.session_key)
        db.set_session_hidden(sg.session_id, True)
        db.set_auto_title(sg.session_id, "Flight search", source=db.TITLE_SOURCE_LLM)
    async_delegation._persist_dispatch({
        "delegation_id": "deleg-0001", "session_key": sg.session_key, "parent_session_id": sg.session_id,
        "dispatched_at": time.time(), "goal": "find flights to Lisbon", "origin_session_id": sg.session_id,
    })

    # The stuck-loop counter, as GatewayRunner._increment_restart_failure_counts.
    atomic_json_write(home / ".restart_failure_counts", {tg.session_key: 1}, indent=None)

    # A later gateway with write_sessions_json off: only gateway_routing
    # learns that the Telegram lane is resume-pending.
    later = SessionStore(home / "sessions", GatewayConfig(write_sessions_json=False))
    later.mark_resume_pending(tg.session_key, "restart_timeout")

    # The user's reset policy: v26's home opts into idle resets, v25's keeps
    # Hermes' default (none since July 2026).
    if version >= 26:
        import yaml
        (home / "config.yaml").write_text(yaml.safe_dump({"session_reset": {"mode": "idle", "idle_minutes": 720}}),
                                          encoding="utf-8")

    from hermes_cli.session_export import render_sessions_export
    (home / "export.jsonl").write_text(render_sessions_export(db.export_all()), encoding="utf-8")
    db.close()
    for s in (store, later):
        if getattr(s, "_db", None) is not None:
            s._db.close()
    print(json.dumps({"schema": version, "keys": [tg.session_key, dc.session_key, sl.session_key,
                                                   wa.session_key, sg.session_key]}))


def write_big(home, n, GatewayConfig, Platform, SessionSource, SessionStore, SessionDB):
    """n messages in 100-message sessions, one lane each, through the same
    public methods (append_messages_batch where the commit has it)."""
    store = SessionStore(home / "sessions", GatewayConfig(write_sessions_json=False))
    db = SessionDB()
    per = 100
    for i in range((n + per - 1) // per):
        e = store.get_or_create_session(SessionSource(platform=Platform("telegram"), chat_id=str(100000 + i),
                                                      chat_type="dm", user_id=str(100000 + i)))
        rows = [{"role": "user" if j % 2 == 0 else "assistant",
                 "content": "message %d of session %d about deployment number %d" % (j, i, i * per + j)}
                for j in range(min(per, n - i * per))]
        batch = getattr(db, "append_messages_batch", None)
        if batch is not None:
            batch(e.session_id, rows)
        else:
            for r in rows:
                db.append_message(e.session_id, r["role"], r["content"])
    db.close()
    if getattr(store, "_db", None) is not None:
        store._db.close()
    print(json.dumps({"messages": n}))


if __name__ == "__main__":
    main()
