"""Runs Hermes' real GatewayRunner (upstream hermes-agent, unmodified) on
hermes through the client, with a fake Telegram adapter and a fake agent,
driven over stdin/stdout by test_gateway_e2e.py. Only the platform adapter
and the agent (the LLM) are fakes; everything between them is Hermes' own
gateway code with the client's classes in place of Hermes' (the import
hook of `python3 -m hermes_client install`, activated here).

    python3 gateway_driver.py <upstream tree> <gateway home>

Environment: HERMES_URL (hermes serve), HERMES_HOME (the gateway's home).

Input, one JSON object a line:
    {"op": "message", "id": n, "chat_id", "text", "thread_id"?, "wait"?: true}
    {"op": "expiry_pass", "id": n}   one pass of Hermes' expiry watcher
    {"op": "running", "id": n, "session_key"}   until the lane's agent runs
    {"op": "stop", "id": n, "restart"?: false}
Output, one JSON object a line:
    {"ev": "ready", "pid"}            after GatewayRunner.start()
    {"ev": "sent", "chat_id", "thread_id", "text"}   what the user sees
    {"ev": "agent", "session_id", "message", "history", "kind"}   what the agent got
    {"ev": "done", "id"}              the op finished (the gateway is idle)
    {"ev": "error", "id", "error"}
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import threading
import time
import types
import uuid
from datetime import datetime

UPSTREAM, GATEWAY_HOME = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), UPSTREAM]

_out_lock = threading.Lock()


def emit(**ev) -> None:
    with _out_lock:
        sys.stdout.write(json.dumps(ev, default=str) + "\n")
        sys.stdout.flush()


logging.basicConfig(filename=os.path.join(GATEWAY_HOME, "gateway.log"), level=logging.INFO,
                    format="%(asctime)s %(levelname)s %(name)s: %(message)s")

# What no Debian package provides, stubbed here (never in upstream's files).
if "openai" not in sys.modules:
    try:
        import openai  # noqa: F401
    except ImportError:
        stub = types.ModuleType("openai")

        class _Unavailable:
            def __init__(self, *a, **kw):
                raise RuntimeError("the e2e harness has no LLM client; the agent is a fake")

        stub.OpenAI = stub.AsyncOpenAI = _Unavailable
        stub.APIError = stub.APIConnectionError = stub.RateLimitError = type("APIError", (Exception,), {})
        sys.modules["openai"] = stub

import hermes_client._hook  # noqa: E402,F401  (the client takes Hermes' place: HERMES_URL is set)

import gateway.run as gateway_run  # noqa: E402
import run_agent  # noqa: E402
from gateway.config import GatewayConfig, Platform, PlatformConfig, SessionResetPolicy  # noqa: E402
from gateway.platforms.base import BasePlatformAdapter, MessageEvent, SendResult  # noqa: E402
from gateway.session import SessionSource  # noqa: E402


# -- the fake agent --------------------------------------------------------

class FakeAgent:
    """Stands in for run_agent.AIAgent (the LLM). It answers from the text
    it is given, persists its messages to the SessionDB as AIAgent does,
    and on "#compress" splits its session the way AIAgent's context
    compression does (end the old session, open a child, move its id)."""

    def __init__(self, *args, **kwargs):
        self.session_id = kwargs.get("session_id")
        self.platform = kwargs.get("platform") or "telegram"
        self.model = kwargs.get("model") or "fake-model"
        self._session_db = kwargs.get("session_db")
        self._interrupt = threading.Event()
        self.context_compressor = types.SimpleNamespace(
            has_content_to_compress=lambda msgs: True, on_session_start=lambda *a, **k: None,
            last_prompt_tokens=0, compression_count=0)
        self._cached_system_prompt = ""
        self.tools = []

    def __getattr__(self, name):
        # Callbacks and tuning knobs the gateway sets or reads; none matter.
        if name.startswith("__"):
            raise AttributeError(name)
        return None

    def _db(self):
        if self._session_db is None:
            from hermes_state import SessionDB
            self._session_db = SessionDB()
        return self._session_db

    def interrupt(self, reason=None):
        self._interrupt.set()

    def _split(self) -> str:
        db = self._db()
        old = self.session_id
        db.end_session(old, "compression")
        self.session_id = f"{datetime.now().strftime('%Y%m%d_%H%M%S')}_{uuid.uuid4().hex[:6]}"
        db.create_session(session_id=self.session_id, source=self.platform, model=self.model,
                          parent_session_id=old)
        return old

    def _compress_context(self, messages, system_message, *, approx_tokens=None, task_id="default",
                          focus_topic=None, force=False, **_later):  # d7f5acb9 adds commit_fence
        old = self._split()
        summary = {"role": "user", "content": f"[summary of {len(messages)} messages of {old}]"}
        tail = [m for m in messages if m.get("role") in ("user", "assistant")][-2:]
        emit(ev="agent", kind="compress", session_id=self.session_id, previous_session_id=old,
             message="", history=len(messages))
        return [summary] + tail, None

    def run_conversation(self, user_message, system_message=None, conversation_history=None,
                         task_id=None, **kwargs):
        history = list(conversation_history or [])
        text = user_message if isinstance(user_message, str) else json.dumps(user_message)
        emit(ev="agent", kind="turn", session_id=self.session_id, message=text, history=len(history))
        db = self._db()
        user = {"role": "user", "content": text}
        # AIAgent writes the user's message to the SessionDB as its turn
        # starts, the rest as it goes.
        db.append_message(self.session_id, "user", text)
        resuming = text.startswith("[System note:")
        # "#hang": a long tool call, until the gateway interrupts it (or the
        # process dies). "#stuck": the same, and again on every resume of
        # the conversation (a stuck loop), however many resume notes the
        # gateway stored after it (d7f5acb9 keeps each resumed turn's note).
        stuck_before = any("#stuck" in str(m.get("content") or "") for m in history if m.get("role") == "user")
        if "#hang" in text or "#stuck" in text or (resuming and stuck_before):
            while not self._interrupt.wait(0.05):
                pass
            return {"final_response": None, "messages": history + [user], "interrupted": True,
                    "completed": False, "api_calls": 1, "history_offset": len(history),
                    "last_prompt_tokens": 0, "session_id": self.session_id}
        if "#compress" in text:
            self._split()
            history = [{"role": "user", "content": "[compressed summary]"}]
            db.append_message(self.session_id, "user", text)
        reply = "echo: " + (text.strip().splitlines() or [""])[-1][:200]
        assistant = {"role": "assistant", "content": reply}
        db.append_message(self.session_id, "assistant", reply)
        return {"final_response": reply, "messages": history + [user, assistant], "api_calls": 1,
                "completed": True, "history_offset": len(history), "last_prompt_tokens": 100 + len(history),
                "session_id": self.session_id, "input_tokens": 10, "output_tokens": 5}


run_agent.AIAgent = FakeAgent


# -- the fake Telegram adapter ----------------------------------------------

class FakeTelegram(BasePlatformAdapter):
    """A connected Telegram adapter whose sends are printed."""

    def __init__(self, config):
        super().__init__(config, Platform.TELEGRAM)
        self.next_id = 1000
        self.next_topic = 500
        adapter = self

        class Bot:
            """The Bot API calls /topic makes: a bot that allows DM topics."""

            async def get_me(self):
                return types.SimpleNamespace(has_topics_enabled=True, allows_users_to_create_topics=True)

            async def pin_chat_message(self, chat_id, message_id, disable_notification=True):
                emit(ev="pinned", chat_id=str(chat_id), message_id=str(message_id))

        self._bot = Bot()

    async def _create_dm_topic(self, chat_id, name):
        self.next_topic += 1
        emit(ev="topic_created", chat_id=str(chat_id), name=name, thread_id=str(self.next_topic))
        return self.next_topic

    async def connect(self, *args, **kwargs):  # d7f5acb9 passes is_reconnect
        return True

    async def disconnect(self, *args, **kwargs):
        return None

    async def send(self, chat_id, content, reply_to=None, metadata=None, **kwargs):
        thread = (metadata or {}).get("thread_id") or (metadata or {}).get("message_thread_id")
        emit(ev="sent", chat_id=str(chat_id), thread_id=thread, text=content)
        self.next_id += 1
        return SendResult(success=True, message_id=str(self.next_id))

    async def edit_message(self, chat_id, message_id, content, **kwargs):
        emit(ev="sent", chat_id=str(chat_id), thread_id=None, text=content, edit=True)
        return SendResult(success=True, message_id=message_id)

    async def send_typing(self, chat_id, metadata=None):
        return None

    async def get_chat_info(self, chat_id):
        return {"id": chat_id, "type": "private"}


# -- Hermes' expiry watcher, one pass at a time ------------------------------

class _AsyncioForRun(types.ModuleType):
    """gateway.run's `asyncio`, where the expiry watcher's sleeps are
    driven by the test: the watcher GatewayRunner.start() launches waits
    forever, and each "expiry_pass" runs one pass of the watcher's body
    (its first sleep returns at once; the next one ends the pass)."""

    def __init__(self):
        super().__init__("asyncio")
        self.__dict__.update(asyncio.__dict__)
        self.sleep = self._sleep  # over the copy of asyncio.sleep
        self.one_pass = {}

    async def _sleep(self, delay, result=None):
        task = asyncio.current_task()
        coro = task.get_coro() if task is not None else None
        if getattr(coro, "__name__", "") == "_session_expiry_watcher":
            done = self.one_pass.get(task)
            if done is None:
                await asyncio.Event().wait()  # the start()-launched watcher
            if not done["started"]:
                done["started"] = True
                return result
            done["event"].set()
            await asyncio.Event().wait()
        return await asyncio.sleep(delay, result)


_aio = _AsyncioForRun()
gateway_run.asyncio = _aio


async def expiry_pass(runner) -> None:
    ended = asyncio.Event()
    task = asyncio.get_running_loop().create_task(runner._session_expiry_watcher(interval=1))
    _aio.one_pass[task] = {"started": False, "event": ended}
    await ended.wait()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    _aio.one_pass.pop(task, None)


# -- the run ----------------------------------------------------------------

def make_config() -> GatewayConfig:
    policy = SessionResetPolicy(mode="idle", idle_minutes=60, notify=True)
    return GatewayConfig(
        platforms={Platform.TELEGRAM: PlatformConfig(enabled=True, token="fake-token")},
        default_reset_policy=policy,
        sessions_dir=__import__("pathlib").Path(GATEWAY_HOME) / "sessions",
    )


async def idle(runner, adapter, timeout=60.0) -> None:
    """Waits until no agent runs and no message is being handled."""
    deadline = time.monotonic() + timeout
    await asyncio.sleep(0.05)
    while time.monotonic() < deadline:
        busy = bool(runner._running_agents) or bool(getattr(adapter, "_active_sessions", {}))
        tasks = [t for t in getattr(adapter, "_background_tasks", set()) if not t.done()]
        if not busy and not tasks:
            return
        await asyncio.sleep(0.02)
    raise TimeoutError("the gateway did not become idle")


async def main() -> None:
    runner = gateway_run.GatewayRunner(make_config())
    adapters = {}

    def create_adapter(platform, config):
        adapters[platform] = FakeTelegram(config)
        return adapters[platform]

    runner._create_adapter = create_adapter
    ok = await runner.start()
    adapter = adapters.get(Platform.TELEGRAM)
    if adapter is None:
        emit(ev="error", id=0, error=f"no adapter (start returned {ok})")
        return
    emit(ev="ready", pid=os.getpid())
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    msg_id = 0
    while True:
        line = await reader.readline()
        if not line:
            break
        cmd = json.loads(line)
        op, cid = cmd.get("op"), cmd.get("id")
        try:
            if op == "message":
                msg_id += 1
                source = SessionSource(platform=Platform.TELEGRAM, chat_id=str(cmd["chat_id"]),
                                       chat_type=cmd.get("chat_type", "dm"), user_id=cmd.get("user_id", "u1"),
                                       user_name=cmd.get("user_name", "Ann"), thread_id=cmd.get("thread_id"))
                event = MessageEvent(text=cmd["text"], source=source, message_id=str(msg_id))
                await adapter.handle_message(event)
                if cmd.get("wait", True):
                    await idle(runner, adapter)
            elif op == "running":
                # Until the gateway tracks the lane's agent as running (not
                # its pending placeholder): what its shutdown notifies.
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    agent = runner._running_agents.get(cmd["session_key"])
                    if agent is not None and agent is not gateway_run._AGENT_PENDING_SENTINEL:
                        break
                    await asyncio.sleep(0.02)
                else:
                    raise TimeoutError(f"no running agent on {cmd['session_key']}")
            elif op == "expiry_pass":
                await expiry_pass(runner)
            elif op == "stop":
                await runner.stop(restart=bool(cmd.get("restart")))
                emit(ev="done", id=cid)
                return
            else:
                raise ValueError(f"unknown op {op!r}")
            emit(ev="done", id=cid)
        except Exception as e:  # reported to the test, which fails on it
            logging.exception("driver op %s failed", op)
            emit(ev="error", id=cid, error=f"{type(e).__name__}: {e}")


if __name__ == "__main__":
    asyncio.run(main())
