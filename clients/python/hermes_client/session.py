"""Hermes' gateway SessionStore interface (gateway/session.py), backed by
`hermes serve`.

The lane state (which session a chat is on, resets, suspends, resume marks)
lives in hermes' event log. The store keeps what Hermes' gateway reads and
changes in place: ``_entries`` holds live :class:`SessionEntry` objects
loaded from hermes, ``_lock`` is a real lock, and ``_save()`` turns what the
caller changed on those objects since they were loaded into hermes commands
(see :meth:`SessionStore._save`).
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import logging
import threading
import weakref
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from ._http import Transport
from .errors import HermesConflict, HermesError, HermesNotFound, HermesUnsupportedChange

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


def _to_platform(value: Optional[str], strict: bool = False) -> Any:
    """A platform name as the Platform enum in use. Unknown names stay
    plain strings (hermes keys lanes on any name), except with ``strict``
    inside a Hermes gateway, where Hermes' own enum refuses them."""
    if not value:
        return None
    cls = platform_type()
    try:
        return cls(value)
    except ValueError:
        if strict and cls is not Platform:
            raise
        return value


def _parse_time(value: Optional[str]) -> Optional[datetime]:
    """An RFC 3339 time of hermes as Hermes keeps it: naive local time."""
    if not value:
        return None
    if isinstance(value, datetime):
        return value
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


_SOURCE_TEXT = ("chat_name", "chat_type", "user_id", "user_name", "thread_id", "chat_topic",
                "user_id_alt", "chat_id_alt", "parent_chat_id", "message_id", "profile",
                "auto_thread_initial_name", "prospective_thread_id")


@dataclass
class SessionSource:
    """Where a message came from (Hermes' SessionSource at d7f5acb9, same
    fields): ``scope_id`` is the scope (a Discord guild, a Slack
    workspace), ``guild_id`` its alias, kept equal as Hermes keeps them."""

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
    scope_id: Optional[str] = None
    guild_id: Optional[str] = None
    parent_chat_id: Optional[str] = None
    message_id: Optional[str] = None
    role_authorized: bool = False
    profile: Optional[str] = None
    profile_route_rejected: bool = field(default=False, repr=False, compare=False)
    auto_thread_created: bool = False
    auto_thread_initial_name: Optional[str] = None
    prospective_thread_id: Optional[str] = None
    # Process-local, as in Hermes: never sent nor stored.
    delivered_via_upstream_relay: bool = False

    def __post_init__(self) -> None:
        if self.scope_id is None and self.guild_id is not None:
            self.scope_id = self.guild_id
        elif self.scope_id is not None:
            self.guild_id = self.scope_id

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
        for name in ("user_id_alt", "chat_id_alt"):
            if getattr(self, name):
                d[name] = getattr(self, name)
        scope = self.scope_id if self.scope_id is not None else self.guild_id
        if scope:
            d["scope_id"] = scope
            d["guild_id"] = scope
        for name in ("parent_chat_id", "message_id", "profile"):
            if getattr(self, name):
                d[name] = getattr(self, name)
        if self.auto_thread_created:
            d["auto_thread_created"] = True
        for name in ("auto_thread_initial_name", "prospective_thread_id"):
            if getattr(self, name):
                d[name] = getattr(self, name)
        return d

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "SessionSource":
        """Hermes' sessions.json form. Inside a Hermes gateway an unknown
        platform name raises ValueError, as Hermes' own class does."""
        return cls._build(data, strict=True)

    @classmethod
    def _build(cls, data: Dict[str, Any], strict: bool) -> "SessionSource":
        return cls(
            platform=_to_platform(data["platform"], strict=strict),
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
            scope_id=data.get("scope_id", data.get("guild_id")) or None,
            parent_chat_id=data.get("parent_chat_id") or None,
            message_id=data.get("message_id") or None,
            role_authorized=bool(data.get("role_authorized", False)),
            profile=data.get("profile") or None,
            auto_thread_created=bool(data.get("auto_thread_created", False)),
            auto_thread_initial_name=data.get("auto_thread_initial_name") or None,
            prospective_thread_id=data.get("prospective_thread_id") or None,
        )

    def to_wire(self) -> Dict[str, Any]:
        """The SessionSource of the hermes API (absent fields left out)."""
        return _source_wire(self)


def _source_wire(src: Any) -> Dict[str, Any]:
    """Any SessionSource-shaped object (the client's or Hermes' own, of
    any release) as the hermes API takes it. The scope goes as scope_id
    alone (scope_id, else the guild_id of an older Hermes)."""
    chat_id = getattr(src, "chat_id", "")
    d: Dict[str, Any] = {"platform": _platform_value(getattr(src, "platform", "")),
                         "chat_id": "" if chat_id is None else str(chat_id)}
    for name in _SOURCE_TEXT:
        v = getattr(src, name, None)
        if v is not None and v != "":
            d[name] = str(v)
    scope = getattr(src, "scope_id", None) or getattr(src, "guild_id", None)
    if scope:
        d["scope_id"] = str(scope)
    for name in ("is_bot", "role_authorized", "auto_thread_created"):
        if getattr(src, name, False):
            d[name] = True
    return d


class _Mark:
    """What a live entry carries to tell its store it was changed in place.
    Copies and pickles of the entry do not carry it."""

    __slots__ = ("store", "key")

    def __init__(self, store: "SessionStore", key: str) -> None:
        self.store = weakref.ref(store)
        self.key = key

    def __call__(self) -> None:
        store = self.store()
        if store is not None:
            store._dirty.add(self.key)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        return (_no_mark, ())


def _no_mark():
    return None


@dataclass
class SessionEntry:
    """A lane: a session key and its current session (Hermes' SessionEntry).

    ``version`` is hermes' stream version of the lane when the entry was
    read. An entry held in a store's ``_entries`` tells the store when one
    of its fields is assigned, so ``_save()`` knows what to send.
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
    # Hermes' fields since d7f5acb9. metadata and model_override are the
    # session's entry state in hermes; prev_session_id is hermes'
    # previous_session_id (the session this one replaced); the active-turn
    # marker is hermes' open turn (its id is the token).
    metadata: Dict[str, Any] = field(default_factory=dict)
    prev_session_id: Optional[str] = None
    active_turn_token: Optional[str] = None
    active_turn_started_at: Optional[datetime] = None
    model_override: Optional[Dict[str, str]] = None
    version: int = 0

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        mark = self.__dict__.get("_hermes_mark")
        if mark is not None and name in _TRACKED_SET:
            mark()

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_hermes_mark", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)

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
            "metadata": self.metadata,
            "active_turn_token": self.active_turn_token,
            "active_turn_started_at": self.active_turn_started_at.isoformat() if self.active_turn_started_at else None,
            "prev_session_id": self.prev_session_id,
        }
        if self.model_override:
            result["model_override"] = sanitize_model_override(self.model_override)
        if self.origin:
            result["origin"] = self.origin.to_dict()
        return result

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "SessionEntry":
        """Reads Hermes' sessions.json form or hermes' API form."""
        origin = SessionSource._build(data["origin"], strict=False) if data.get("origin") else None
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
            metadata=dict(data.get("metadata") or {}),
            prev_session_id=data.get("prev_session_id", data.get("previous_session_id")),
            active_turn_token=data.get("active_turn_token", data.get("open_turn_id")) or None,
            active_turn_started_at=_parse_time(data.get("active_turn_started_at", data.get("turn_started_at"))),
            model_override=sanitize_model_override(data.get("model_override")),
            version=data.get("version", 0),
        )


# The keys of a /model override that are persisted (Hermes'
# PERSISTABLE_MODEL_OVERRIDE_KEYS): never a credential.
PERSISTABLE_MODEL_OVERRIDE_KEYS = ("model", "provider", "base_url")


def sanitize_model_override(override: Optional[Dict[str, Any]]) -> Optional[Dict[str, str]]:
    """The persistable part of an override (Hermes' function of that
    name): None when nothing is left."""
    if not isinstance(override, dict):
        return None
    cleaned = {k: str(v) for k, v in override.items()
               if k in PERSISTABLE_MODEL_OVERRIDE_KEYS and v not in (None, "")}
    return cleaned or None


# The source fields a session key is made of (hermes' BuildSessionKey).
_KEY_FIELDS = ("platform", "chat_id", "chat_type", "user_id", "user_id_alt", "thread_id", "scope_id",
               "profile", "prospective_thread_id")

# The fields a change in place of which _save() looks at (all but version).
_TRACKED = tuple(f.name for f in dataclasses.fields(SessionEntry) if f.name != "version")
_TRACKED_SET = frozenset(_TRACKED)


def _snapshot(e: Any) -> Dict[str, Any]:
    """The comparable value of every tracked field of an entry."""
    out: Dict[str, Any] = {}
    for name in _TRACKED:
        v = getattr(e, name, None)
        if name == "origin":
            v = _source_wire(v) if v is not None else None
        elif name == "platform":
            v = _platform_value(v) if v else None
        elif name in ("metadata", "model_override") and isinstance(v, dict):
            # Compared by value: the caller may change the dict in place.
            v = copy.deepcopy(v)
        out[name] = v
    return out


def build_session_key(source: SessionSource, group_sessions_per_user: bool = True,
                      thread_sessions_per_user: bool = False, profile: Optional[str] = None) -> str:
    """The session key of a source by hermes' rules (Hermes' at
    d7f5acb9), computed here: the Slack workspace after the chat type,
    ``profile`` as the namespace, a prospective thread keyed as the
    thread. WhatsApp identifiers are not canonicalised: the store asks
    hermes (``SessionStore._generate_session_key``), which reads the
    bridge's mapping files."""
    platform = _platform_value(source.platform)
    ns = "agent:main" if not profile or profile == "default" else f"agent:{profile}"
    scope = getattr(source, "scope_id", None) or getattr(source, "guild_id", None)
    scope = str(scope) if platform == "slack" and scope else None
    participant = source.user_id_alt or source.user_id
    if source.chat_type == "dm":
        parts = [ns, platform, "dm"] + ([scope] if scope else [])
        ident = source.chat_id or participant
        if ident:
            parts.append(str(ident))
        if source.thread_id:
            parts.append(source.thread_id)
        return ":".join(parts)
    prospective = getattr(source, "prospective_thread_id", None)
    thread = source.thread_id or prospective
    chat_type = "thread" if prospective and not source.thread_id else source.chat_type
    parts = [ns, platform, chat_type] + ([scope] if scope else [])
    if source.chat_id:
        parts.append(source.chat_id)
    if thread:
        parts.append(thread)
    isolate = group_sessions_per_user
    if thread and not thread_sessions_per_user:
        isolate = False
    if isolate and participant:
        parts.append(str(participant))
    return ":".join(parts)


def _entry(data: Dict[str, Any]) -> SessionEntry:
    return SessionEntry.from_dict(data)


class _EntryIndex(dict):
    """``SessionStore._entries``: a dict of live entries, session key to
    SessionEntry, that reads through to hermes on a miss (``get``, ``in``,
    ``[]``) and tells the store which keys the caller replaced or removed.
    The store itself writes through the plain dict methods."""

    def __init__(self, store: "SessionStore", data: Optional[Dict[str, SessionEntry]] = None) -> None:
        super().__init__()
        self._store = weakref.ref(store)
        if data:
            for k, v in data.items():
                dict.__setitem__(self, k, v)

    # -- reads through to hermes ------------------------------------------

    def _fetch(self, key: Any) -> Optional[SessionEntry]:
        store = self._store()
        if store is None or not isinstance(key, str):
            return None
        return store._read_through(key)

    def get(self, key, default=None):
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        got = self._fetch(key)
        return default if got is None else got

    def __contains__(self, key) -> bool:
        return dict.__contains__(self, key) or self._fetch(key) is not None

    def __getitem__(self, key):
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        got = self._fetch(key)
        if got is None:
            raise KeyError(key)
        return got

    # -- changes by the caller --------------------------------------------

    def _changed(self, keys: Iterable[Any]) -> None:
        store = self._store()
        if store is not None:
            for k in keys:
                store._dirty.add(k)

    def __setitem__(self, key, value) -> None:
        dict.__setitem__(self, key, value)
        self._changed([key])

    def __delitem__(self, key) -> None:
        dict.__delitem__(self, key)
        self._changed([key])

    def pop(self, key, *default):
        had = dict.__contains__(self, key)
        out = dict.pop(self, key, *default)
        if had:
            self._changed([key])
        return out

    def popitem(self):
        k, v = dict.popitem(self)
        self._changed([k])
        return k, v

    def clear(self) -> None:
        keys = list(dict.keys(self))
        dict.clear(self)
        self._changed(keys)

    def setdefault(self, key, default=None):
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        self[key] = default
        return default

    def update(self, *args, **kwargs) -> None:
        other = dict(*args, **kwargs)
        for k, v in other.items():
            dict.__setitem__(self, k, v)
        self._changed(other.keys())

    def __reduce__(self):
        return (dict, (dict(self),))


@dataclass
class _Known:
    """What hermes last said about a lane: the entry's tracked fields and
    the lane's stream version."""

    snap: Dict[str, Any]
    version: int


# A lane command of _save(): method, path segments after the key, body,
# and the fields it settles.
_Command = Tuple[str, Tuple[str, ...], Optional[Dict[str, Any]], Tuple[str, ...]]


class SessionStore:
    """Hermes' SessionStore over `hermes serve`.

    The signature of Hermes' constructor is kept (``sessions_dir`` and
    ``config`` are accepted; the reset policy, key rules and the
    sessions.json export are hermes' configuration). ``base_url``, ``token``
    and ``timeout`` default to ``HERMES_URL``, ``HERMES_API_TOKEN`` and
    ``HERMES_TIMEOUT`` (else http://127.0.0.1:8642, no token, 10 s).

    Thread-safe: each thread uses its own keep-alive connection; no lock is
    held across a request except ``_save``'s own (which serialises saves so
    two callers never send the same change twice) and ``_lock`` while the
    first load lists the lanes, as Hermes' loader holds it.
    """

    def __init__(self, sessions_dir: Optional[Path] = None, config: Any = None,
                 has_active_processes_fn: Optional[Callable[[str], bool]] = None, *,
                 base_url: Optional[str] = None, token: Optional[str] = None,
                 timeout: Optional[float] = None, transport: Optional[Transport] = None) -> None:
        self.sessions_dir = sessions_dir
        self.config = config
        self._has_active_processes_fn = has_active_processes_fn
        self._http = transport or Transport(base_url, token, timeout)
        # Hermes' in-memory index and its lock. _lock guards the keys of
        # _entries (never held by the store across a request, except by the
        # first load); _save_lock guards _known and serialises saves. Order:
        # _lock before _save_lock, never the reverse.
        self._lock = threading.RLock()
        self._save_lock = threading.RLock()
        self._loaded = False
        self._known: Dict[str, _Known] = {}
        self._dirty: set = set()
        self._conflicts: List[HermesConflict] = []
        self._reported: Dict[str, bool] = {}
        self._key_route = True
        self._keys: Dict[tuple, str] = {}
        self._expiry_route = True
        self._entries = _EntryIndex(self)
        # The turns this process holds per lane (active-turn markers and the
        # instrumented runner's), under _turn_lock.
        self._turn_lock = threading.Lock()
        self._turns: Dict[str, Dict[str, Any]] = {}
        from .state import SessionDB
        self._db = SessionDB(transport=self._http)

    @property
    def db(self):
        """The SessionDB over the same connection."""
        return self._db

    def close(self) -> None:
        self._http.close()

    def _path(self, key: str, *rest: str) -> str:
        return self._http.path("sessions", key, *rest)

    # -- the live index ----------------------------------------------------

    def _index(self) -> _EntryIndex:
        """_entries, re-wrapped if the caller assigned a plain dict to it."""
        idx = self._entries
        if not isinstance(idx, _EntryIndex):
            idx = _EntryIndex(self, dict(idx))
            self._dirty.update(dict.keys(idx))
            self._dirty.update(self._known.keys())
            self._entries = idx
        return idx

    def _track(self, key: str, entry: SessionEntry, version: int) -> None:
        """Records hermes' view of a lane and lets the entry mark itself
        changed. Caller holds _save_lock."""
        self._known[key] = _Known(_snapshot(entry), version)
        object.__setattr__(entry, "_hermes_mark", _Mark(self, key))
        object.__setattr__(entry, "version", version)

    def _adopt(self, data: Dict[str, Any], applied: Iterable[str] = ()) -> SessionEntry:
        """Merges a lane hermes answered into _entries and returns the live
        entry. A new session on the lane (reset, auto-reset, /resume, a
        first message) is a new object, as Hermes makes one; otherwise the
        entry held is updated in place, keeping the caller's changes not
        saved yet."""
        key = data["session_key"]
        while True:
            idx = self._index()
            if dict.__contains__(idx, key):
                with self._save_lock:
                    if dict.__contains__(idx, key):
                        return self._merge_locked(key, data, tuple(applied))
            else:
                with self._lock:
                    if not dict.__contains__(idx, key):
                        return self._insert_locked(key, data)

    def _insert_locked(self, key: str, data: Dict[str, Any]) -> SessionEntry:
        """A lane not in _entries yet. Caller holds _lock."""
        entry = _entry(data)
        with self._save_lock:
            self._track(key, entry, int(data.get("version", 0)))
            dict.__setitem__(self._index(), key, entry)
            self._dirty.discard(key)
        return entry

    def _merge_locked(self, key: str, data: Dict[str, Any], applied: Tuple[str, ...] = ()) -> SessionEntry:
        """Caller holds _save_lock and key is in _entries."""
        idx = self._index()
        cur = dict.__getitem__(idx, key)
        version = int(data.get("version", 0))
        known = self._known.get(key)
        fresh = _entry(data)
        if known is not None and version and version < known.version:
            return cur  # an older answer than what the store holds
        snap = _snapshot(fresh)
        local = _snapshot(cur)
        if known is None:
            # The caller put this object in _entries: hermes' view wins for
            # every field the caller did not change from hermes' value.
            known = _Known(dict(local), 0)
        if snap["session_id"] != local["session_id"] and snap["session_id"] != known.snap["session_id"]:
            # Another session on the lane: a new object. A session id the
            # caller had moved (a compression split not saved yet) is lost
            # with the old session; the next _save reports it.
            if local["session_id"] != known.snap["session_id"]:
                self._conflicts.append(HermesConflict(
                    f"SessionStore._save: lane {key} moved from {known.snap['session_id']} to "
                    f"{snap['session_id']} before the change of SessionEntry.session_id to "
                    f"{local['session_id']} was saved; it was not applied",
                    409, "conflict"))
            self._track(key, fresh, version)
            dict.__setitem__(idx, key, fresh)
            self._dirty.discard(key)
            return fresh
        pending = False
        for name in _TRACKED:
            if local[name] == known.snap[name] or name in applied or local[name] == snap[name]:
                if local[name] != snap[name]:
                    object.__setattr__(cur, name, getattr(fresh, name))
            else:
                pending = True
        self._known[key] = _Known(snap, version)
        object.__setattr__(cur, "version", version)
        if "_hermes_mark" not in cur.__dict__:
            object.__setattr__(cur, "_hermes_mark", _Mark(self, key))
        if pending:
            self._dirty.add(key)
        else:
            self._dirty.discard(key)
        return cur

    def _forget(self, keys: Iterable[str]) -> None:
        """Drops lanes hermes no longer routes (pruned) from _entries."""
        with self._lock:
            with self._save_lock:
                idx = self._index()
                for k in keys:
                    dict.pop(idx, k, None)
                    self._known.pop(k, None)
                    self._dirty.discard(k)

    def _read_through(self, key: str) -> Optional[SessionEntry]:
        """_entries' answer for a key it does not hold: hermes' lane, if
        any (a lane another process created, or one not loaded yet)."""
        with self._save_lock:
            if key in self._known and not dict.__contains__(self._index(), key):
                return None  # the caller removed it; _save() reports that
        try:
            data = self._http.get(self._path(key))
        except HermesNotFound:
            return None
        return self._adopt(data)

    def _ensure_loaded(self) -> None:
        """Loads the lanes from hermes once, as Hermes loads sessions.json."""
        with self._lock:
            self._ensure_loaded_locked()

    def _ensure_loaded_locked(self) -> None:
        """_ensure_loaded with _lock held by the caller."""
        if self._loaded:
            return
        res = self._http.get("/sessions")
        idx = self._index()
        with self._save_lock:
            seen = set()
            for data in res.get("sessions") or []:
                key = data["session_key"]
                seen.add(key)
                if dict.__contains__(idx, key):
                    self._merge_locked(key, data)
                else:
                    self._insert_locked(key, data)
            # A reload after the caller emptied _entries (Hermes' tests
            # simulate a restart so) starts from hermes' lanes.
            for k in list(self._known):
                if k not in seen and not dict.__contains__(idx, k):
                    self._known.pop(k, None)
                    self._dirty.discard(k)
        self._loaded = True

    def _refresh_all(self) -> None:
        """Re-reads every lane into _entries (after a sweep changed many)."""
        res = self._http.get("/sessions")
        for data in res.get("sessions") or []:
            self._adopt(data)

    # -- _save: in-place changes to hermes commands ------------------------

    def _save(self) -> None:
        """Sends hermes what the caller changed in place on the entries of
        ``_entries`` since they were loaded or last saved, one command per
        change, each an event with its reason:

        ======================================  ====================================
        change                                  command
        ======================================  ====================================
        ``session_id`` moved (compression)      POST …/compression-split
        ``is_fresh_reset`` True → False         POST …/fresh-reset/consume
        ``was_auto_reset``/reason cleared       POST …/notice/ack
        ``suspended`` False → True              POST …/suspend (reason stuck_loop)
        ``expiry_finalized`` False → True       POST …/expiry-finalized
        ``resume_pending``/``resume_reason``    POST / DELETE …/resume-pending
        ``last_prompt_tokens``                  POST …/touch
        ``updated_at`` moved forwards           POST …/touch
        ======================================  ====================================

        Any other change (``created_at``, token sums, ``origin``, an entry
        added to or removed from ``_entries`` that hermes does not have, a
        flag set back, …) raises :class:`HermesUnsupportedChange` naming the
        field; nothing is sent and the field is put back to hermes' value.
        Each command carries the value the caller saw (the previous session
        id): a lane another process moved meanwhile is re-read and the
        change re-applied when it still makes sense, else
        :class:`HermesConflict` is raised and the entry shows hermes' state.
        Safe to call from several threads; it holds no lock of the caller.
        """
        self._save_changes(full=True)

    def _begin(self) -> None:
        """What every store method does first, as Hermes' do: load the
        index once, then save what the caller changed in place."""
        if not self._loaded:
            self._ensure_loaded()
        self._flush()

    def _flush(self) -> None:
        """Saves what the caller changed in place before a store method
        reads or changes a lane (Hermes' methods save the whole index)."""
        if self._dirty or self._conflicts or not isinstance(self._entries, _EntryIndex):
            self._save_changes(full=False)

    def _save_changes(self, full: bool) -> None:
        with self._save_lock:
            idx = self._index()
            if full:
                keys = set(dict.keys(idx)) | set(self._known)
            else:
                keys = set(self._dirty)
            self._dirty.difference_update(keys)
            conflicts, self._conflicts = self._conflicts, []
            plans: List[Tuple[str, List[_Command]]] = []
            unsupported: List[Tuple[str, str, str]] = []
            for key in sorted(k for k in keys if isinstance(k, str)):
                plan = self._plan_lane(idx, key, unsupported)
                if plan:
                    plans.append((key, plan))
            if unsupported:
                # Nothing is sent: the changes hermes can take stay pending.
                for key, _ in plans:
                    self._dirty.add(key)
                key, field, why = unsupported[0]
                more = f" (and {len(unsupported) - 1} more: " + ", ".join(
                    f"{k} {f}" for k, f, _ in unsupported[1:]) + ")" if len(unsupported) > 1 else ""
                raise HermesUnsupportedChange(
                    f"SessionStore._save: lane {key}: {why}; hermes has no command for it, so nothing "
                    f"was sent and SessionEntry.{field} is back at hermes' value{more}",
                    session_key=key, field=field)
            for key, plan in plans:
                try:
                    self._apply_lane(key, plan)
                except HermesConflict as e:
                    conflicts.append(e)
            if conflicts:
                raise conflicts[0]

    def _plan_lane(self, idx: _EntryIndex, key: str, unsupported: List[Tuple[str, str, str]]) -> List[_Command]:
        """The commands for one lane's changes; unsupported ones are put
        back on the entry and listed. Caller holds _save_lock."""
        entry = dict.get(idx, key)
        known = self._known.get(key)
        if entry is None and known is None:
            return []
        if entry is None:
            if not self._loaded and not dict.__len__(idx):
                return []
            unsupported.append((key, "session_key",
                                "the entry was removed from _entries (hermes drops a routing entry only by "
                                "its age, prune_old_entries)"))
            self._known.pop(key, None)
            return []
        if known is None:
            # An entry the caller made: adopt hermes' lane when it has the
            # same session, else it cannot be expressed.
            try:
                data = self._http.get(self._path(key))
            except HermesNotFound:
                data = None
            if data is None or data.get("session_id") != entry.session_id:
                dict.pop(idx, key, None)
                unsupported.append((key, "session_key",
                                    "an entry added to _entries that hermes does not have (lanes are created "
                                    "by get_or_create_session)"))
                return []
            self._known[key] = _Known(_snapshot(_entry(data)), int(data.get("version", 0)))
            known = self._known[key]
            object.__setattr__(entry, "_hermes_mark", _Mark(self, key))
        base, now = known.snap, _snapshot(entry)
        changed = [f for f in _TRACKED if base[f] != now[f]]
        if not changed:
            return []
        cmds: List[_Command] = []
        done = set()

        def bad(field: str, why: str) -> None:
            object.__setattr__(entry, field, _field_value(field, base[field], entry))
            unsupported.append((key, field, why))
            done.add(field)

        old_sid = base["session_id"]
        if "is_fresh_reset" in changed:
            done.add("is_fresh_reset")
            if base["is_fresh_reset"] and not now["is_fresh_reset"]:
                cmds.append(("POST", ("fresh-reset", "consume"), {"session_id": old_sid}, ("is_fresh_reset",)))
            else:
                bad("is_fresh_reset", "is_fresh_reset set to True (only /new or /reset sets it)")
        if "was_auto_reset" in changed or "auto_reset_reason" in changed:
            done.update(("was_auto_reset", "auto_reset_reason"))
            if not now["was_auto_reset"] and now["auto_reset_reason"] is None:
                cmds.append(("POST", ("notice", "ack"), {"session_id": old_sid},
                             ("was_auto_reset", "auto_reset_reason")))
            else:
                field = "was_auto_reset" if "was_auto_reset" in changed else "auto_reset_reason"
                bad(field, f"{field} set (only hermes' automatic reset sets it)")
                if field == "was_auto_reset" and "auto_reset_reason" in changed:
                    object.__setattr__(entry, "auto_reset_reason", base["auto_reset_reason"])
        if "session_id" in changed:
            done.add("session_id")
            if now["session_id"]:
                cmds.append(("POST", ("compression-split",),
                             {"session_id": now["session_id"], "previous_session_id": old_sid}, ("session_id",)))
            else:
                bad("session_id", "session_id emptied")
        if "expiry_finalized" in changed:
            done.add("expiry_finalized")
            if now["expiry_finalized"]:
                cmds.append(("POST", ("expiry-finalized",),
                             {"session_id": now["session_id"] or old_sid, "forced": False}, ("expiry_finalized",)))
            else:
                bad("expiry_finalized", "expiry_finalized set back to False")
        if "suspended" in changed:
            done.add("suspended")
            if now["suspended"]:
                cmds.append(("POST", ("suspend",), {"reason": "stuck_loop"}, ("suspended",)))
            else:
                bad("suspended", "suspended set back to False (a suspended lane is reset by its next message)")
        resume = [f for f in ("resume_pending", "resume_reason", "last_resume_marked_at") if f in changed]
        if resume:
            done.update(resume)
            fields = ("resume_pending", "resume_reason", "last_resume_marked_at")
            if now["resume_pending"] and ("resume_pending" in changed or "resume_reason" in changed):
                cmds.append(("POST", ("resume-pending",), {"reason": now["resume_reason"] or "restart_timeout"},
                             fields))
            elif not now["resume_pending"] and base["resume_pending"]:
                cmds.append(("DELETE", ("resume-pending",), None, fields))
            elif not now["resume_pending"] and not base["resume_pending"] and \
                    now["resume_reason"] is None and now["last_resume_marked_at"] is None:
                pass
            else:
                bad(resume[0], f"{resume[0]} changed without a resume mark being set or cleared")
        touch: Optional[Dict[str, Any]] = None
        if "last_prompt_tokens" in changed:
            done.add("last_prompt_tokens")
            v = now["last_prompt_tokens"]
            if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
                touch = {"last_prompt_tokens": v}
            else:
                bad("last_prompt_tokens", f"last_prompt_tokens set to {v!r}")
        if "updated_at" in changed:
            done.add("updated_at")
            if isinstance(now["updated_at"], datetime) and now["updated_at"] > base["updated_at"]:
                touch = touch if touch is not None else {}
            else:
                bad("updated_at", "updated_at moved backwards (hermes stamps activity with its own clock)")
        if touch is not None:
            cmds.append(("POST", ("touch",), touch, ("last_prompt_tokens", "updated_at")))
        if "metadata" in changed:
            done.add("metadata")
            old_md, new_md = base["metadata"] or {}, now["metadata"]
            if not isinstance(new_md, dict) or any(not isinstance(k, str) for k in new_md):
                bad("metadata", "metadata set to something other than a dict of string keys")
            elif any(k not in new_md for k in old_md):
                bad("metadata", "a metadata key removed (hermes sets values: set it to None instead)")
            else:
                for k in sorted(new_md):
                    if k not in old_md or old_md[k] != new_md[k]:
                        cmds.append(("PUT", ("metadata", k), {"value": new_md[k]}, ("metadata",)))
        if "model_override" in changed:
            done.add("model_override")
            cmds.append(("PUT", ("model-override",),
                         {"model_override": sanitize_model_override(now["model_override"])}, ("model_override",)))
        for f in changed:
            if f not in done:
                bad(f, f"{f} changed in place")
        return cmds

    def _apply_lane(self, key: str, plan: List[_Command]) -> None:
        """Sends one lane's commands in order. Each carries what the caller
        saw, so it applies to a lane another process changed meanwhile when
        it still makes sense. A refusal (409) re-reads the lane: a change
        hermes already shows is done; otherwise the entry is put back to
        hermes' state and HermesConflict raised. Caller holds _save_lock."""
        for method, rest, body, fields in plan:
            try:
                data = self._lane_command(method, key, rest, body)
            except (HermesConflict, HermesNotFound) as refused:
                try:
                    current = self._http.get(self._path(key))
                except HermesNotFound:
                    current = None
                entry = dict.get(self._index(), key)
                if current is not None and entry is not None and \
                        _snapshot(_entry(current))[fields[0]] == _snapshot(entry)[fields[0]]:
                    self._merge_locked(key, current, fields)
                    continue
                self._revert(key, fields)
                if current is not None:
                    self._merge_locked(key, current, fields)
                why = refused.message if isinstance(refused, HermesConflict) else "the lane no longer exists"
                raise HermesConflict(
                    f"SessionStore._save: lane {key}: hermes refused the change of SessionEntry.{fields[0]} "
                    f"({why}); the entry now shows hermes' state", 409, "conflict") from None
            self._merge_locked(key, data, fields)

    def _revert(self, key: str, fields: Iterable[str]) -> None:
        """Puts fields of a live entry back to hermes' last known values."""
        entry = dict.get(self._index(), key)
        known = self._known.get(key)
        if entry is None or known is None:
            return
        for f in fields:
            object.__setattr__(entry, f, _field_value(f, known.snap[f], entry))

    def _lane_command(self, method: str, key: str, rest: Tuple[str, ...], body: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        res = self._http.request(method, self._path(key, *rest), body if body is not None else ({} if method != "DELETE" else None))[1]
        if isinstance(res, dict) and "entry" in res and "session_key" not in res:
            return res["entry"]
        return res

    # -- hermes' answers to Hermes' private questions -----------------------

    def _generate_session_key(self, source: SessionSource) -> str:
        """hermes' session key for a source (its key rules and WhatsApp
        canonicalisation), as Hermes' build_session_key computes it."""
        wire = _source_wire(source)
        cache_key = None
        if wire.get("platform") != "whatsapp":
            # The key is a function of the source and hermes' key rules:
            # asked once per distinct source. WhatsApp's depends on the
            # bridge's mapping files, which change: asked every time.
            cache_key = tuple(wire.get(k) for k in _KEY_FIELDS)
            hit = self._keys.get(cache_key)
            if hit is not None:
                return hit
        if self._key_route:
            try:
                got = self._http.post("/sessions/key", {"source": wire})["session_key"]
                if cache_key is not None:
                    if len(self._keys) >= 4096:
                        self._keys.clear()
                    self._keys[cache_key] = got
                return got
            except HermesError as e:
                if not (e.status == 405 or (e.status == 404 and "no route" in e.message)):
                    raise
                self._key_route = False
                logger.warning("hermes at %s has no POST /v1/sessions/key; session keys are computed "
                               "locally (WhatsApp identifiers not canonicalised)", self._http.base_url)
        return self._key(source)

    def _key(self, source: SessionSource) -> str:
        """The key computed here: by Hermes' own build_session_key inside a
        Hermes gateway (it canonicalises WhatsApp ids from the bridge's
        files), else by this module's."""
        try:
            from gateway.session import build_session_key as hermes_key  # type: ignore
        except Exception:
            hermes_key = None
        if hermes_key is not None:
            rules = {"group_sessions_per_user": getattr(self.config, "group_sessions_per_user", True),
                     "thread_sessions_per_user": getattr(self.config, "thread_sessions_per_user", False)}
            profile = self._resolve_profile_for_key(source)
            try:
                if profile is not None:
                    return hermes_key(source, profile=profile, **rules)
                return hermes_key(source, **rules)
            except Exception:
                pass
        return self._local_key(source)

    def _local_key(self, source: SessionSource) -> str:
        return build_session_key(
            source,
            group_sessions_per_user=getattr(self.config, "group_sessions_per_user", True),
            thread_sessions_per_user=getattr(self.config, "thread_sessions_per_user", False),
            profile=self._resolve_profile_for_key(source),
        )

    def _expiry(self, session_key: str) -> Dict[str, Any]:
        """hermes' reset-policy verdict on a lane now: ``{"expired", "reason"}``.

        Read from ``GET …/expiry`` when hermes has it, else from the lane
        timeline's forecast of its next automatic reset (the same rule
        hermes' resolve applies), judged at hermes' clock."""
        if self._expiry_route:
            try:
                return self._http.get(self._path(session_key, "expiry"))
            except HermesError as e:
                if not (e.status == 405 or (e.status == 404 and "no route" in e.message)):
                    raise
                self._expiry_route = False
        lane = self._http.get(self._path(session_key))
        version = int(lane.get("version") or 1)
        res = self._http.get(self._path(session_key, "timeline"), from_version=version, limit=1)
        items = res.get("items") or []
        if not items:
            return {"expired": False, "reason": None}
        nxt = items[-1].get("next_reset") or {}
        reason, at, now = nxt.get("reason"), _parse_time(nxt.get("at")), _parse_time(res.get("now"))
        if reason in ("idle", "daily") and at is not None and now is not None and at <= now:
            return {"expired": True, "reason": reason}
        return {"expired": False, "reason": None}

    def _is_session_expired(self, entry: SessionEntry) -> bool:
        """Whether hermes' reset policy has expired the entry's session (the
        expiry watcher's question). A lane with live background processes
        never is, as in Hermes."""
        if self._processes_busy(entry.session_key):
            return False
        try:
            return bool(self._expiry(entry.session_key).get("expired"))
        except HermesNotFound:
            return False

    def _should_reset(self, entry: SessionEntry, source: SessionSource) -> Optional[str]:
        """The auto-reset reason hermes' policy gives the entry now ("idle",
        "daily") or None."""
        key = entry.session_key or self._generate_session_key(source)
        if self._processes_busy(key):
            return None
        try:
            res = self._expiry(key)
        except HermesNotFound:
            return None
        return res.get("reason") if res.get("expired") else None

    def _processes_busy(self, key: str) -> bool:
        fn = self._has_active_processes_fn
        if fn is None:
            return False
        try:
            busy = bool(fn(key))
        except Exception as exc:
            logger.debug("has_active_processes_fn raised for %s: %s", key, exc)
            return False
        self._tell_processes(key, busy)
        return busy

    def _report_processes(self, key: str) -> None:
        """Tells hermes whether the lane has live processes, as the gateway's
        callback says (hermes never resets, expires or prunes such a lane)."""
        self._processes_busy(key)

    def _tell_processes(self, key: str, busy: bool) -> None:
        if self._reported.get(key) is busy:
            return
        try:
            self._http.put(self._path(key, "active-processes"), {"count": 1 if busy else 0})
            self._reported[key] = busy
        except HermesNotFound:
            if busy:
                return
            self._reported[key] = busy

    # -- SessionStore ----------------------------------------------------

    def has_any_sessions(self) -> bool:
        if self._db is None:
            # Hermes' fallback without a database: the index.
            return len(self._entries) > 1
        return self._db.session_count() > 1

    def get_or_create_session(self, source: SessionSource, force_new: bool = False,
                              touch_activity: bool = True) -> SessionEntry:
        """touch_activity=False (Hermes d7f5acb9: an internal turn that must
        not make the lane look active) returns the live lane as it is when
        hermes would neither reset it nor create one; otherwise it resolves
        as a message does (hermes' resolve records the activity)."""
        if not touch_activity and not force_new:
            entry = self._quiet_lookup(source)
            if entry is not None:
                return entry
        return self.resolve(source, force_new)["entry"]

    def _quiet_lookup(self, source: SessionSource) -> Optional[SessionEntry]:
        """The lane of source when a resolve would keep its session, else
        None."""
        self._begin()
        key = self._generate_session_key(source)
        entry = self._entries.get(key)
        if entry is None or entry.suspended:
            return None
        try:
            if self._should_reset(entry, source) is not None:
                return None
        except HermesError:
            return None
        return entry

    def resolve(self, source: SessionSource, force_new: bool = False) -> Dict[str, Any]:
        """get_or_create_session with hermes' whole answer: ``entry``
        (the live SessionEntry), ``created`` and ``reset_reason``."""
        self._begin()
        if self._has_active_processes_fn is not None:
            self._report_processes(self._generate_session_key(source))
        res = self._http.post("/sessions/resolve", {"source": _source_wire(source), "force_new": bool(force_new)})
        res["entry"] = self._adopt(res["entry"])
        return res

    def update_session(self, session_key: str, last_prompt_tokens: int = None,
                       touch_activity: bool = True) -> None:
        """touch_activity=False with no token count changes nothing; with
        one, hermes records it as a touch (its touch moves updated_at: the
        difference is in docs/COMPATIBILITY.md)."""
        if not touch_activity and last_prompt_tokens is None:
            return
        self._begin()
        body = {} if last_prompt_tokens is None else {"last_prompt_tokens": int(last_prompt_tokens)}
        try:
            self._adopt(self._http.post(self._path(session_key, "touch"), body))
        except HermesNotFound:
            pass

    def suspend_session(self, session_key: str) -> bool:
        self._begin()
        try:
            self._adopt(self._http.post(self._path(session_key, "suspend")))
            return True
        except HermesNotFound:
            return False

    def mark_resume_pending(self, session_key: str, reason: str = "restart_timeout") -> bool:
        self._begin()
        try:
            res = self._http.post(self._path(session_key, "resume-pending"), {"reason": reason})
        except HermesNotFound:
            return False
        self._adopt(res["entry"])
        return bool(res.get("marked"))

    def clear_resume_pending(self, session_key: str) -> bool:
        self._begin()
        try:
            res = self._http.delete(self._path(session_key, "resume-pending"))
        except HermesNotFound:
            return False
        self._adopt(res["entry"])
        return bool(res.get("cleared"))

    def prune_old_entries(self, max_age_days: int) -> int:
        if max_age_days is None or max_age_days <= 0:
            return 0
        self._begin()
        if self._has_active_processes_fn is not None:
            for e in self.list_sessions():
                self._report_processes(e.session_key)
        res = self._http.post("/maintenance/prune-entries", {"max_age_days": int(max_age_days)})
        pruned = res.get("pruned") or []
        self._forget(pruned)
        return len(pruned)

    def suspend_recently_active(self, max_age_seconds: int = 120) -> int:
        self._begin()
        res = self._http.post("/recovery/suspend-recently-active", {"max_age_seconds": int(max_age_seconds)})
        # Hermes' start-up reads _entries right after this (the stuck-loop
        # check): they show every lane as hermes has it now.
        self._refresh_all()
        return len(res.get("marked") or [])

    def reset_session(self, session_key: str, display_name: Optional[str] = None) -> Optional[SessionEntry]:
        self._begin()
        body = {} if display_name is None else {"display_name": display_name}
        try:
            return self._adopt(self._http.post(self._path(session_key, "reset"), body))
        except HermesNotFound:
            return None

    def switch_session(self, session_key: str, target_session_id: str) -> Optional[SessionEntry]:
        self._begin()
        try:
            return self._adopt(self._http.post(self._path(session_key, "switch"), {"session_id": target_session_id}))
        except HermesNotFound:
            return None

    def list_sessions(self, active_minutes: Optional[int] = None) -> List[SessionEntry]:
        self._begin()
        res = self._http.get("/sessions", active_minutes=active_minutes)
        out = [self._adopt(e) for e in res.get("sessions") or []]
        out.sort(key=lambda e: e.updated_at, reverse=True)
        return out

    def lookup_by_session_id(self, session_id: str) -> Optional[SessionEntry]:
        if not session_id:
            return None
        self._begin()
        try:
            return self._adopt(self._http.get("/sessions", session_id=session_id))
        except HermesNotFound:
            return None

    def get_session(self, session_key: str) -> Optional[SessionEntry]:
        """The lane of session_key, or None (not in Hermes' class)."""
        try:
            return self._adopt(self._http.get(self._path(session_key)))
        except HermesNotFound:
            return None

    def append_to_transcript(self, session_id: str, message: Dict[str, Any], skip_db: bool = False) -> None:
        if skip_db or self._db is None:
            return
        role = message.get("role", "unknown")
        assistant = role == "assistant"
        turn_id = self._open_turns().get(session_id)
        try:
            self._db.append_message(
                turn_id=turn_id,
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

    def rewrite_transcript(self, session_id: str, messages: List[Dict[str, Any]],
                           active_only: bool = False) -> bool:
        """Replaces the transcript; True when the write landed (Hermes
        d7f5acb9's answer, which /compress and hygiene check). hermes
        replaces every message: active_only (keep Hermes' soft-archived
        rows) is accepted and not distinguished (docs/COMPATIBILITY.md)."""
        if self._db is None:
            return True
        try:
            self._db.replace_messages(session_id, messages)
            return True
        except HermesError as e:
            logger.warning("hermes: rewrite of %s failed: %s", session_id, e)
            return False

    def load_transcript(self, session_id: str) -> List[Dict[str, Any]]:
        if self._db is None:
            return []
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
        if not res.get("rewound_count") and not res.get("turns_undone"):
            return None
        return {"rewound_count": res.get("rewound_count", 0), "turns_undone": res.get("turns_undone", 0),
                "target_text": res.get("target_text", "")}

    # -- Hermes' SessionStore since d7f5acb9 --------------------------------

    def _resolve_profile_for_key(self, source: Optional[SessionSource] = None) -> Optional[str]:
        """The profile namespace of session keys, or None when profiles
        are not multiplexed (Hermes' rule; hermes' keys follow hermes'
        own ``multiplex_profiles``, which should say the same)."""
        if not getattr(self.config, "multiplex_profiles", False):
            return None
        if source is not None and getattr(source, "profile", None):
            return source.profile
        try:
            from hermes_cli.profiles import get_active_profile_name  # type: ignore
            return get_active_profile_name() or "default"
        except Exception:
            return None

    def _record_gateway_session_peer(self, session_id: str, session_key: str, source: Any,
                                     display_name: Optional[str] = None,
                                     include_compression_ancestors: bool = False) -> None:
        """Hermes writes the routing peer into its session row; in hermes
        the lane is the routing, so there is nothing to write."""
        return None

    def _is_session_ended_in_db(self, session_id: str) -> bool:
        if self._db is None or not session_id:
            return False
        try:
            row = self._db.get_session(session_id)
        except HermesError:
            return False
        return bool(row is not None and row.get("end_reason") is not None)

    def lookup_by_session_key(self, session_key: str) -> Optional[SessionEntry]:
        """The live entry of an exact session key, or None."""
        if not session_key:
            return None
        self._begin()
        return self._entries.get(session_key)

    def peek_session_id(self, session_key: str) -> Optional[str]:
        """The session id a key routes to now, or None; creates nothing."""
        entry = self.lookup_by_session_key(session_key)
        return getattr(entry, "session_id", None) if entry else None

    def get_model_override(self, session_key: str) -> Optional[Dict[str, str]]:
        """The session's persisted /model override, or None."""
        self._begin()
        try:
            res = self._http.get(self._path(session_key, "model-override"))
        except HermesNotFound:
            return None
        override = res.get("model_override")
        return dict(override) if override else None

    def set_model_override(self, session_key: str, override: Optional[Dict[str, Any]]) -> None:
        """Persists (or, with None or nothing persistable, clears) the
        session's /model override: only model, provider and base_url, never
        a credential. An event of the lane (lane.model_override_set)."""
        self._begin()
        try:
            self._adopt(self._http.put(self._path(session_key, "model-override"),
                                       {"model_override": sanitize_model_override(override)}))
        except HermesNotFound:
            return None

    def get_session_metadata(self, session_key: str, key: str, default: Any = None) -> Any:
        """A metadata value of the lane's current session, or default."""
        self._begin()
        try:
            res = self._http.get(self._path(session_key, "metadata"))
        except HermesNotFound:
            return default
        return (res.get("metadata") or {}).get(key, default)

    def set_session_metadata(self, session_key: str, key: str, value: Any) -> bool:
        """Persists one small JSON value on the lane's current session (an
        event, lane.entry_metadata_set; not activity). False when the lane
        does not exist."""
        self._begin()
        try:
            self._adopt(self._http.put(self._path(session_key, "metadata", key), {"value": value}))
        except HermesNotFound:
            return False
        return True

    def has_platform_message_id(self, session_id: str, platform_message_id: str) -> bool:
        """hermes does not keep a message's platform id (docs/COMPATIBILITY.md):
        always False, as Hermes answers without a database, so the gateway's
        retry dedupe never skips a message."""
        return False

    def is_session_finalizable(self, entry: SessionEntry) -> bool:
        """Whether hermes' reset policy of the entry's lane ever expires it
        (its mode is not ``none``); False when hermes cannot tell."""
        key = getattr(entry, "session_key", None)
        if not key:
            return False
        try:
            res = self._expiry(key)
        except HermesError:
            return False
        return bool(res.get("finalizable", False))

    def set_expiry_finalized(self, entry: SessionEntry, *, clear_model_override: bool = True) -> None:
        """The expiry watcher finalized the entry's session (hermes' record
        of it: lane.expiry_finalized); by default the session's /model
        override goes too, as in Hermes. hermes refuses to finalize a
        session its policy does not find expired: logged, as Hermes logs a
        failed write."""
        self._begin()
        key = entry.session_key
        try:
            data = self._http.post(self._path(key, "expiry-finalized"),
                                   {"session_id": entry.session_id, "forced": False})
            self._adopt(data)
            object.__setattr__(entry, "expiry_finalized", bool(data.get("expiry_finalized", True)))
        except HermesNotFound:
            return None
        except HermesConflict as e:
            logger.warning("hermes: set_expiry_finalized(%s): %s", key, e)
        if clear_model_override:
            self.set_model_override(key, None)
            object.__setattr__(entry, "model_override", None)

    def advance_compression_session(self, session_key: str, expected_session_id: str,
                                    target_session_id: str) -> Optional[SessionEntry]:
        """Moves the lane from expected_session_id to its compression
        continuation target_session_id (a compare-and-swap): the entry, or
        None when the lane moved elsewhere meanwhile."""
        if not session_key or not expected_session_id or not target_session_id:
            return None
        self._begin()
        entry = self._entries.get(session_key)
        if entry is None:
            return None
        if entry.session_id == target_session_id:
            return entry
        if entry.session_id != expected_session_id:
            return None
        try:
            data = self._http.post(self._path(session_key, "compression-split"),
                                   {"session_id": target_session_id, "previous_session_id": expected_session_id})
        except (HermesConflict, HermesNotFound):
            return None
        return self._adopt(data)

    # Hermes' active-turn markers are hermes' turns: the token is the turn
    # id. The instrumented GatewayRunner (runs.py) opens the same turn for
    # its _run_agent, so a marker and the runner share one turn per lane;
    # it completes when both let go (left open when the drain cut it).

    def _hold_turn(self, session_key: str, holder: str) -> Optional[str]:
        """Joins the turn this process holds on the lane, else starts one
        (of the announced gateway run, if any); None when the lane does not
        exist. holder is "marker" or "runner"; a marker already held is
        replaced by a new turn, as Hermes replaces its token."""
        replaced = None
        with self._turn_lock:
            h = self._turns.get(session_key)
            if h is not None and not (holder == "marker" and h["marker"] and not h["runner"]):
                h[holder] = True
                return h["id"]
            if h is not None:
                replaced = self._turns.pop(session_key)["id"]
        if replaced is not None:
            # hermes refuses a turn start on a lane whose turn is open
            # (409 busy): the replaced marker's turn ends first.
            try:
                self.complete_turn(session_key, replaced)
            except HermesNotFound:
                pass
        run = getattr(self, "_gateway_run", None)
        try:
            res = self.start_turn(session_key, gateway_run=run.ref() if run is not None else None)
        except HermesNotFound:
            return None
        with self._turn_lock:
            self._turns[session_key] = {"id": res["turn_id"], "marker": holder == "marker",
                                        "runner": holder == "runner", "failed": False, "keep_open": False}
        return res["turn_id"]

    def _release_turn(self, session_key: str, turn_id: str, holder: str, failed: bool = False,
                      keep_open: bool = False) -> bool:
        """Lets go of the turn; the last holder completes it. False when
        this process holds another turn (or none) there."""
        with self._turn_lock:
            h = self._turns.get(session_key)
            if h is None or h["id"] != turn_id or not h[holder]:
                return False
            h[holder] = False
            h["failed"] = h["failed"] or failed
            h["keep_open"] = h["keep_open"] or keep_open
            if h["marker"] or h["runner"]:
                return True
            del self._turns[session_key]
        if not h["keep_open"]:
            try:
                self.complete_turn(session_key, turn_id, failed=h["failed"])
            except HermesNotFound:
                pass
        return True

    def mark_turn_active(self, session_key: str) -> Optional[str]:
        """Opens (or joins) the lane's turn on hermes and returns its id as
        the marker's token; None when the lane does not exist."""
        self._begin()
        token = self._hold_turn(session_key, "marker")
        if token is not None:
            entry = dict.get(self._index(), session_key)
            if entry is not None:
                self._refresh(session_key)
        return token

    def clear_turn_active(self, session_key: str, token: str) -> bool:
        """Compare-and-swap: completes the marker's turn when token is the
        lane's open turn; False when the lane is gone or another turn owns
        it."""
        self._begin()
        if self._release_turn(session_key, token, "marker"):
            self._refresh(session_key)
            return True
        # A marker of another store (a restarted process): hermes' open
        # turn decides.
        try:
            data = self._http.get(self._path(session_key))
        except HermesNotFound:
            return False
        if not token or data.get("open_turn_id") != token:
            self._adopt(data)
            return False
        try:
            self.complete_turn(session_key, token)
        except (HermesConflict, HermesNotFound):
            return False
        return True

    def recover_interrupted_turns(self, max_age_seconds: int = 60 * 60) -> int:
        """Crash recovery of the turns no gateway run holds (markers a dead
        process left): a fresh one is interrupted and its lane marked
        resume-pending (restart_interrupted), an older one closed without
        it. Returns the lanes newly marked."""
        self._begin()
        res = self._http.post("/recovery/loose-turns", {"max_age_seconds": max(0, int(max_age_seconds))})
        self._refresh_all()
        return len(res.get("resumed") or [])

    def discard_active_turn_markers(self) -> int:
        """After a clean stop: closes every turn no gateway run holds
        without continuing it. Returns how many it closed."""
        self._begin()
        res = self._http.post("/recovery/loose-turns", {"discard": True})
        with self._turn_lock:
            self._turns.clear()
        self._refresh_all()
        return len(res.get("closed") or [])

    def _refresh(self, session_key: str) -> None:
        try:
            self._adopt(self._http.get(self._path(session_key)))
        except HermesNotFound:
            pass

    # -- what gateway/run.py tells hermes besides (hermes API) ------------

    def start_turn(self, session_key: str, gateway_run: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
        """A turn starts on the lane: ``{"turn_id", "entry"}``. With
        ``gateway_run`` (``{"gateway", "run_id"}``) the turn belongs to that
        gateway run: its end (a clean stop or a lost lease) cuts the turn."""
        self._flush()
        body: Dict[str, Any] = {}
        if gateway_run:
            body["gateway_run"] = dict(gateway_run)
        res = self._http.post(self._path(session_key, "turns", "start"), body)
        res["entry"] = self._adopt(res["entry"])
        self._open_turns()[res["entry"].session_id] = res["turn_id"]
        return res

    def _open_turns(self) -> Dict[str, str]:
        """The turn this process opened on each session id: its transcript
        messages carry it, so hermes refuses them once the turn was taken
        over (docs/API.md, Turn fencing)."""
        return self.__dict__.setdefault("_hermes_open_turns", {})

    def complete_turn(self, session_key: str, turn_id: Optional[str] = None, *, input_tokens: int = 0,
                      output_tokens: int = 0, cache_read_tokens: int = 0, cache_write_tokens: int = 0,
                      estimated_cost_usd: float = 0.0, cost_status: Optional[str] = None,
                      last_prompt_tokens: Optional[int] = None, failed: bool = False) -> SessionEntry:
        """The turn ended: token and cost deltas; a successful turn clears
        resume_pending."""
        self._flush()
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
        turns = self._open_turns()
        if turn_id is None:
            held = dict.get(self._entries, session_key)
            turn_id = turns.get(getattr(held, "session_id", None))
        for sid in [sid for sid, t in turns.items() if t == turn_id]:
            del turns[sid]
        return self._adopt(self._http.post(self._path(session_key, "turns"), body))

    def session_context(self, session_key: str) -> Dict[str, Any]:
        """``{"prompt", "notice", "note"}``: the context prompt, the reset
        notice owed to the user and the note for the agent."""
        return self._http.get(self._path(session_key, "context"))

    def acknowledge_notice(self, session_key: str) -> None:
        self._adopt(self._http.post(self._path(session_key, "notice", "ack")))

    def resumable(self) -> List[SessionEntry]:
        """Lanes to auto-continue after a restart."""
        return [self._adopt(e) for e in self._http.get("/recovery/resumable").get("sessions") or []]


def _field_value(field: str, snap_value: Any, entry: SessionEntry) -> Any:
    """A tracked field's value as an entry holds it, from its snapshot
    form (origin and platform are stored compared by value)."""
    if field == "origin":
        return SessionSource._build(snap_value, strict=False) if snap_value else None
    if field == "platform":
        return _to_platform(snap_value)
    if field == "metadata":
        return copy.deepcopy(snap_value) if snap_value is not None else {}
    if field == "model_override":
        return copy.deepcopy(snap_value)
    return snap_value
