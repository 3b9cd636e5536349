"""Hermes' gateway SessionStore interface (gateway/session.py), backed by
`hermes serve`.

The lane state (which session a chat is on, resets, suspends, resume marks)
lives in hermes' event log; this module only translates calls and answers.
"""

from __future__ import annotations

import enum
import logging
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from ._http import Transport
from .errors import HermesError, HermesNotFound

logger = logging.getLogger(__name__)


class Platform(str, enum.Enum):
    """The platforms hermes knows by name. Inside a Hermes gateway the
    gateway's own ``gateway.config.Platform`` is used instead (see
    :func:`platform_type`)."""

    LOCAL = "local"
    TELEGRAM = "telegram"
    DISCORD = "discord"
    WHATSAPP = "whatsapp"
    SLACK = "slack"
    SIGNAL = "signal"
    MATRIX = "matrix"
    EMAIL = "email"
    SMS = "sms"
    WEBHOOK = "webhook"
    API_SERVER = "api_server"
    HOMEASSISTANT = "homeassistant"
    MATTERMOST = "mattermost"
    DINGTALK = "dingtalk"
    FEISHU = "feishu"
    WECOM = "wecom"
    BLUEBUBBLES = "bluebubbles"
    CRON = "cron"


_platform_lock = threading.Lock()
_platform_cls: Optional[type] = None


def platform_type() -> type:
    """The Platform enum entries carry: Hermes' own when it is importable
    (the client runs inside a Hermes gateway), else this module's."""
    global _platform_cls
    with _platform_lock:
        if _platform_cls is None:
            try:
                from gateway.config import Platform as hermes_platform  # type: ignore
                _platform_cls = hermes_platform
            except Exception:
                _platform_cls = Platform
        return _platform_cls


def _platform_value(p: Any) -> str:
    return p.value if isinstance(p, enum.Enum) else str(p)


def _to_platform(value: Optional[str]) -> Any:
    if not value:
        return None
    cls = platform_type()
    try:
        return cls(value)
    except ValueError:
        return value


def _parse_time(value: Optional[str]) -> Optional[datetime]:
    """An RFC 3339 time of hermes as Hermes keeps it: naive local time."""
    if not value:
        return None
    v = value.strip()
    if v.endswith("Z"):
        v = v[:-1] + "+00:00"
    # Python < 3.11 accepts at most 6 fractional digits.
    if "." in v:
        head, _, rest = v.partition(".")
        frac = ""
        i = 0
        while i < len(rest) and rest[i].isdigit():
            frac += rest[i]
            i += 1
        v = f"{head}.{frac[:6].ljust(6, '0')}{rest[i:]}"
    dt = datetime.fromisoformat(v)
    if dt.tzinfo is not None:
        dt = dt.astimezone().replace(tzinfo=None)
    return dt


def _format_time(dt: datetime) -> str:
    if dt.tzinfo is None:
        dt = dt.astimezone()
    return dt.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


@dataclass
class SessionSource:
    """Where a message came from (Hermes' SessionSource, same fields)."""

    platform: Any
    chat_id: str
    chat_name: Optional[str] = None
    chat_type: str = "dm"
    user_id: Optional[str] = None
    user_name: Optional[str] = None
    thread_id: Optional[str] = None
    chat_topic: Optional[str] = None
    user_id_alt: Optional[str] = None
    chat_id_alt: Optional[str] = None
    is_bot: bool = False
    guild_id: Optional[str] = None
    parent_chat_id: Optional[str] = None
    message_id: Optional[str] = None
    role_authorized: bool = False

    @property
    def description(self) -> str:
        if _platform_value(self.platform) == "local":
            return "CLI terminal"
        parts = []
        if self.chat_type == "dm":
            parts.append(f"DM with {self.user_name or self.user_id or 'user'}")
        elif self.chat_type == "group":
            parts.append(f"group: {self.chat_name or self.chat_id}")
        elif self.chat_type == "channel":
            parts.append(f"channel: {self.chat_name or self.chat_id}")
        else:
            parts.append(self.chat_name or self.chat_id)
        if self.thread_id:
            parts.append(f"thread: {self.thread_id}")
        return ", ".join(parts)

    def to_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {
            "platform": _platform_value(self.platform),
            "chat_id": self.chat_id,
            "chat_name": self.chat_name,
            "chat_type": self.chat_type,
            "user_id": self.user_id,
            "user_name": self.user_name,
            "thread_id": self.thread_id,
            "chat_topic": self.chat_topic,
        }
        for name in ("user_id_alt", "chat_id_alt", "guild_id", "parent_chat_id", "message_id"):
            if getattr(self, name):
                d[name] = getattr(self, name)
        return d

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "SessionSource":
        return cls(
            platform=_to_platform(data["platform"]),
            chat_id=str(data.get("chat_id", "")),
            chat_name=data.get("chat_name") or None,
            chat_type=data.get("chat_type", "dm") or "dm",
            user_id=data.get("user_id") or None,
            user_name=data.get("user_name") or None,
            thread_id=data.get("thread_id") or None,
            chat_topic=data.get("chat_topic") or None,
            user_id_alt=data.get("user_id_alt") or None,
            chat_id_alt=data.get("chat_id_alt") or None,
            is_bot=bool(data.get("is_bot", False)),
            guild_id=data.get("guild_id") or None,
            parent_chat_id=data.get("parent_chat_id") or None,
            message_id=data.get("message_id") or None,
            role_authorized=bool(data.get("role_authorized", False)),
        )

    def to_wire(self) -> Dict[str, Any]:
        """The SessionSource of the hermes API (absent fields left out)."""
        d: Dict[str, Any] = {"platform": _platform_value(self.platform), "chat_id": "" if self.chat_id is None else str(self.chat_id)}
        for name in ("chat_name", "chat_type", "user_id", "user_name", "thread_id", "chat_topic",
                     "user_id_alt", "chat_id_alt", "guild_id", "parent_chat_id", "message_id"):
            v = getattr(self, name)
            if v is not None and v != "":
                d[name] = str(v)
        if self.is_bot:
            d["is_bot"] = True
        if self.role_authorized:
            d["role_authorized"] = True
        return d


@dataclass
class SessionEntry:
    """A lane: a session key and its current session (Hermes' SessionEntry).

    ``version`` is hermes' stream version of the lane after its last event.
    """

    session_key: str
    session_id: str
    created_at: datetime
    updated_at: datetime
    origin: Optional[SessionSource] = None
    display_name: Optional[str] = None
    platform: Any = None
    chat_type: str = "dm"
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    total_tokens: int = 0
    estimated_cost_usd: float = 0.0
    cost_status: str = "unknown"
    last_prompt_tokens: int = 0
    was_auto_reset: bool = False
    auto_reset_reason: Optional[str] = None
    reset_had_activity: bool = False
    is_fresh_reset: bool = False
    expiry_finalized: bool = False
    suspended: bool = False
    resume_pending: bool = False
    resume_reason: Optional[str] = None
    last_resume_marked_at: Optional[datetime] = None
    version: int = 0

    def to_dict(self) -> Dict[str, Any]:
        result = {
            "session_key": self.session_key,
            "session_id": self.session_id,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "display_name": self.display_name,
            "platform": _platform_value(self.platform) if self.platform else None,
            "chat_type": self.chat_type,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "total_tokens": self.total_tokens,
            "last_prompt_tokens": self.last_prompt_tokens,
            "estimated_cost_usd": self.estimated_cost_usd,
            "cost_status": self.cost_status,
            "expiry_finalized": self.expiry_finalized,
            "suspended": self.suspended,
            "resume_pending": self.resume_pending,
            "resume_reason": self.resume_reason,
            "last_resume_marked_at": self.last_resume_marked_at.isoformat() if self.last_resume_marked_at else None,
            "is_fresh_reset": self.is_fresh_reset,
            "was_auto_reset": self.was_auto_reset,
            "auto_reset_reason": self.auto_reset_reason,
            "reset_had_activity": self.reset_had_activity,
        }
        if self.origin:
            result["origin"] = self.origin.to_dict()
        return result

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "SessionEntry":
        """Reads Hermes' sessions.json form or hermes' API form."""
        origin = SessionSource.from_dict(data["origin"]) if data.get("origin") else None
        return cls(
            session_key=data["session_key"],
            session_id=data["session_id"],
            created_at=_parse_time(data["created_at"]),
            updated_at=_parse_time(data["updated_at"]),
            origin=origin,
            display_name=data.get("display_name"),
            platform=_to_platform(data.get("platform")),
            chat_type=data.get("chat_type", "dm"),
            input_tokens=data.get("input_tokens", 0),
            output_tokens=data.get("output_tokens", 0),
            cache_read_tokens=data.get("cache_read_tokens", 0),
            cache_write_tokens=data.get("cache_write_tokens", 0),
            total_tokens=data.get("total_tokens", 0),
            last_prompt_tokens=data.get("last_prompt_tokens", 0),
            estimated_cost_usd=data.get("estimated_cost_usd", 0.0),
            cost_status=data.get("cost_status", "unknown"),
            expiry_finalized=data.get("expiry_finalized", data.get("memory_flushed", False)),
            suspended=data.get("suspended", False),
            resume_pending=data.get("resume_pending", False),
            resume_reason=data.get("resume_reason"),
            last_resume_marked_at=_parse_time(data.get("last_resume_marked_at")),
            is_fresh_reset=data.get("is_fresh_reset", False),
            was_auto_reset=data.get("was_auto_reset", False),
            auto_reset_reason=data.get("auto_reset_reason"),
            reset_had_activity=data.get("reset_had_activity", False),
            version=data.get("version", 0),
        )


def build_session_key(source: SessionSource, group_sessions_per_user: bool = True,
                      thread_sessions_per_user: bool = False) -> str:
    """The session key of a source, by the rules hermes applies (seed 000
    §4). hermes computes the key itself on resolve; this is for callers that
    need it beforehand. WhatsApp identifiers are not canonicalised here."""
    platform = _platform_value(source.platform)
    participant = source.user_id_alt or source.user_id
    if source.chat_type == "dm":
        if source.chat_id:
            base = f"agent:main:{platform}:dm:{source.chat_id}"
            return f"{base}:{source.thread_id}" if source.thread_id else base
        if participant:
            base = f"agent:main:{platform}:dm:{participant}"
            return f"{base}:{source.thread_id}" if source.thread_id else base
        if source.thread_id:
            return f"agent:main:{platform}:dm:{source.thread_id}"
        return f"agent:main:{platform}:dm"
    parts = ["agent:main", platform, source.chat_type]
    if source.chat_id:
        parts.append(source.chat_id)
    if source.thread_id:
        parts.append(source.thread_id)
    isolate = group_sessions_per_user
    if source.thread_id and not thread_sessions_per_user:
        isolate = False
    if isolate and participant:
        parts.append(str(participant))
    return ":".join(parts)


def _entry(data: Dict[str, Any]) -> SessionEntry:
    return SessionEntry.from_dict(data)


class SessionStore:
    """Hermes' SessionStore over `hermes serve`.

    The signature of Hermes' constructor is kept (``sessions_dir`` and
    ``config`` are accepted; the reset policy, key rules and the
    sessions.json export are hermes' configuration). ``base_url``, ``token``
    and ``timeout`` default to ``HERMES_URL``, ``HERMES_API_TOKEN`` and
    ``HERMES_TIMEOUT`` (else http://127.0.0.1:8642, no token, 10 s).
    Thread-safe: each thread uses its own keep-alive connection.
    """

    def __init__(self, sessions_dir: Optional[Path] = None, config: Any = None,
                 has_active_processes_fn: Optional[Callable[[str], bool]] = None, *,
                 base_url: Optional[str] = None, token: Optional[str] = None,
                 timeout: Optional[float] = None, transport: Optional[Transport] = None) -> None:
        self.sessions_dir = sessions_dir
        self.config = config
        self._has_active_processes_fn = has_active_processes_fn
        self._http = transport or Transport(base_url, token, timeout)
        from .state import SessionDB
        self._db = SessionDB(transport=self._http)

    @property
    def db(self):
        """The SessionDB over the same connection."""
        return self._db

    def close(self) -> None:
        self._http.close()

    def _key(self, source: SessionSource) -> str:
        return build_session_key(
            source,
            group_sessions_per_user=getattr(self.config, "group_sessions_per_user", True),
            thread_sessions_per_user=getattr(self.config, "thread_sessions_per_user", False),
        )

    def _report_processes(self, key: str) -> None:
        """Tells hermes whether the lane has live processes, as the gateway's
        callback says (hermes never resets, expires or prunes such a lane)."""
        fn = self._has_active_processes_fn
        if fn is None:
            return
        try:
            busy = bool(fn(key))
        except Exception as exc:
            logger.debug("has_active_processes_fn raised for %s: %s", key, exc)
            return
        try:
            self._http.put(self._http.path("sessions", key, "active-processes"), {"count": 1 if busy else 0})
        except HermesNotFound:
            pass

    # -- SessionStore ----------------------------------------------------

    def has_any_sessions(self) -> bool:
        return self._db.session_count() > 1

    def get_or_create_session(self, source: SessionSource, force_new: bool = False) -> SessionEntry:
        self._report_processes(self._key(source))
        res = self._http.post("/sessions/resolve", {"source": source.to_wire(), "force_new": bool(force_new)})
        return _entry(res["entry"])

    def resolve(self, source: SessionSource, force_new: bool = False) -> Dict[str, Any]:
        """get_or_create_session with hermes' whole answer: ``entry``
        (a SessionEntry), ``created`` and ``reset_reason``."""
        self._report_processes(self._key(source))
        res = self._http.post("/sessions/resolve", {"source": source.to_wire(), "force_new": bool(force_new)})
        res["entry"] = _entry(res["entry"])
        return res

    def update_session(self, session_key: str, last_prompt_tokens: int = None) -> None:
        body = {} if last_prompt_tokens is None else {"last_prompt_tokens": int(last_prompt_tokens)}
        try:
            self._http.post(self._http.path("sessions", session_key, "touch"), body)
        except HermesNotFound:
            pass

    def suspend_session(self, session_key: str) -> bool:
        try:
            self._http.post(self._http.path("sessions", session_key, "suspend"))
            return True
        except HermesNotFound:
            return False

    def mark_resume_pending(self, session_key: str, reason: str = "restart_timeout") -> bool:
        try:
            res = self._http.post(self._http.path("sessions", session_key, "resume-pending"), {"reason": reason})
        except HermesNotFound:
            return False
        return bool(res.get("marked"))

    def clear_resume_pending(self, session_key: str) -> bool:
        try:
            res = self._http.delete(self._http.path("sessions", session_key, "resume-pending"))
        except HermesNotFound:
            return False
        return bool(res.get("cleared"))

    def prune_old_entries(self, max_age_days: int) -> int:
        if max_age_days is None or max_age_days <= 0:
            return 0
        if self._has_active_processes_fn is not None:
            for e in self.list_sessions():
                self._report_processes(e.session_key)
        res = self._http.post("/maintenance/prune-entries", {"max_age_days": int(max_age_days)})
        return len(res.get("pruned") or [])

    def suspend_recently_active(self, max_age_seconds: int = 120) -> int:
        res = self._http.post("/recovery/suspend-recently-active", {"max_age_seconds": int(max_age_seconds)})
        return len(res.get("marked") or [])

    def reset_session(self, session_key: str, display_name: Optional[str] = None) -> Optional[SessionEntry]:
        body = {} if display_name is None else {"display_name": display_name}
        try:
            return _entry(self._http.post(self._http.path("sessions", session_key, "reset"), body))
        except HermesNotFound:
            return None

    def switch_session(self, session_key: str, target_session_id: str) -> Optional[SessionEntry]:
        try:
            return _entry(self._http.post(self._http.path("sessions", session_key, "switch"),
                                          {"session_id": target_session_id}))
        except HermesNotFound:
            return None

    def list_sessions(self, active_minutes: Optional[int] = None) -> List[SessionEntry]:
        res = self._http.get("/sessions", active_minutes=active_minutes)
        return [_entry(e) for e in res.get("sessions") or []]

    def lookup_by_session_id(self, session_id: str) -> Optional[SessionEntry]:
        if not session_id:
            return None
        try:
            return _entry(self._http.get("/sessions", session_id=session_id))
        except HermesNotFound:
            return None

    def get_session(self, session_key: str) -> Optional[SessionEntry]:
        """The lane of session_key, or None (not in Hermes' class)."""
        try:
            return _entry(self._http.get(self._http.path("sessions", session_key)))
        except HermesNotFound:
            return None

    def append_to_transcript(self, session_id: str, message: Dict[str, Any], skip_db: bool = False) -> None:
        if skip_db:
            return
        role = message.get("role", "unknown")
        assistant = role == "assistant"
        try:
            self._db.append_message(
                session_id=session_id,
                role=role,
                content=message.get("content"),
                tool_name=message.get("tool_name"),
                tool_calls=message.get("tool_calls"),
                tool_call_id=message.get("tool_call_id"),
                reasoning=message.get("reasoning") if assistant else None,
                reasoning_content=message.get("reasoning_content") if assistant else None,
                reasoning_details=message.get("reasoning_details") if assistant else None,
                codex_reasoning_items=message.get("codex_reasoning_items") if assistant else None,
                codex_message_items=message.get("codex_message_items") if assistant else None,
                platform_message_id=message.get("platform_message_id") or message.get("message_id"),
                observed=bool(message.get("observed")),
                timestamp=message.get("timestamp"),
            )
        except HermesError as e:
            # Hermes logs and carries on; so does the client, louder.
            logger.warning("hermes: append to %s failed: %s", session_id, e)

    def rewrite_transcript(self, session_id: str, messages: List[Dict[str, Any]]) -> None:
        try:
            self._db.replace_messages(session_id, messages)
        except HermesError as e:
            logger.warning("hermes: rewrite of %s failed: %s", session_id, e)

    def load_transcript(self, session_id: str) -> List[Dict[str, Any]]:
        try:
            return self._db.get_messages_as_conversation(session_id)
        except HermesNotFound:
            return []
        except HermesError as e:
            logger.warning("hermes: load of %s failed: %s", session_id, e)
            return []

    def rewind_session(self, session_id: str, n: int = 1) -> Optional[Dict[str, Any]]:
        if n < 1:
            n = 1
        try:
            res = self._http.post(self._http.path("transcripts", session_id, "rewind"), {"n": min(int(n), 10000)})
        except HermesNotFound:
            return None
        except HermesError as e:
            logger.debug("rewind_session: %s", e)
            return None
        return {"rewound_count": res.get("rewound_count", 0), "turns_undone": res.get("turns_undone", 0),
                "target_text": res.get("target_text", "")}

    # -- what gateway/run.py tells hermes besides (hermes API) ------------

    def start_turn(self, session_key: str) -> Dict[str, Any]:
        """A turn starts on the lane: ``{"turn_id", "entry"}``."""
        res = self._http.post(self._http.path("sessions", session_key, "turns", "start"))
        res["entry"] = _entry(res["entry"])
        return res

    def complete_turn(self, session_key: str, turn_id: Optional[str] = None, *, input_tokens: int = 0,
                      output_tokens: int = 0, cache_read_tokens: int = 0, cache_write_tokens: int = 0,
                      estimated_cost_usd: float = 0.0, cost_status: Optional[str] = None,
                      last_prompt_tokens: Optional[int] = None, failed: bool = False) -> SessionEntry:
        """The turn ended: token and cost deltas; a successful turn clears
        resume_pending."""
        body: Dict[str, Any] = {"input_tokens": int(input_tokens), "output_tokens": int(output_tokens),
                                "cache_read_tokens": int(cache_read_tokens),
                                "cache_write_tokens": int(cache_write_tokens),
                                "estimated_cost_usd": float(estimated_cost_usd), "failed": bool(failed)}
        if turn_id:
            body["turn_id"] = turn_id
        if cost_status:
            body["cost_status"] = cost_status
        if last_prompt_tokens is not None:
            body["last_prompt_tokens"] = int(last_prompt_tokens)
        return _entry(self._http.post(self._http.path("sessions", session_key, "turns"), body))

    def session_context(self, session_key: str) -> Dict[str, Any]:
        """``{"prompt", "notice", "note"}``: the context prompt, the reset
        notice owed to the user and the note for the agent."""
        return self._http.get(self._http.path("sessions", session_key, "context"))

    def acknowledge_notice(self, session_key: str) -> None:
        self._http.post(self._http.path("sessions", session_key, "notice", "ack"))

    def resumable(self) -> List[SessionEntry]:
        """Lanes to auto-continue after a restart."""
        return [_entry(e) for e in self._http.get("/recovery/resumable").get("sessions") or []]
