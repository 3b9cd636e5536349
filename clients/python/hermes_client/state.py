"""Hermes' SessionDB interface (hermes_state.py), backed by `hermes serve`.

state.db is hermes' read model of its event log: every change below is a
command that appends events; every read is a query on the read model (with
read-your-writes). Methods keep Hermes' signatures, return shapes and
exceptions; what hermes does differently is in docs/COMPATIBILITY.md.
"""

from __future__ import annotations

import json
import threading
import logging
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ._http import Transport
from .errors import HermesConflict, HermesError, HermesInvalidArgument, HermesNotFound

logger = logging.getLogger(__name__)

# The message fields hermes stores (its API refuses unknown ones).
_MESSAGE_FIELDS = ("role", "content", "tool_call_id", "tool_calls", "tool_name", "token_count",
                   "finish_reason", "reasoning", "reasoning_content", "reasoning_details",
                   "codex_reasoning_items", "codex_message_items")

MAX_TITLE_LENGTH = 100

# What Hermes' sanitize_title (and hermes') deletes from a title outright.
_INVISIBLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200b-\u200f\u2028-\u202e\u2060-\u2069"
                        "\ufeff\ufffc\ufff9-\ufffb]")


def _strip_invisible(title: Optional[str]) -> Optional[str]:
    return _INVISIBLE.sub("", title) if isinstance(title, str) else title


def _wire_message(msg: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for k in _MESSAGE_FIELDS:
        v = msg.get(k)
        if v is None:
            continue
        if k in ("tool_call_id", "tool_name", "finish_reason") and not isinstance(v, str):
            v = str(v)
        if k == "reasoning_details" and isinstance(v, str):
            # Hermes stores a JSON string as given; hermes keeps JSON values.
            try:
                v = json.loads(v)
            except ValueError:
                pass
        out[k] = v
    if "role" not in out:
        out["role"] = "unknown"
    return out


_HYGIENE_LOCK = threading.Lock()


class SessionDB:
    """Hermes' SessionDB over `hermes serve`.

    ``db_path`` and ``read_only`` are accepted for signature compatibility:
    the data is in hermes, reached at ``base_url`` (default ``HERMES_URL``,
    else http://127.0.0.1:8642) with ``token`` (default ``HERMES_API_TOKEN``).
    """

    # Hermes' FTS-rebuild pacing (d7f5acb9), which its tests and tools set:
    # hermes maintains its own indexes, so they change nothing here.
    _FTS_REBUILD_MIN_PAUSE = 0.0
    _FTS_REBUILD_DUTY_FACTOR = 0.0

    MAX_TITLE_LENGTH = MAX_TITLE_LENGTH

    def __init__(self, db_path: Optional[Path] = None, read_only: bool = False, *,
                 base_url: Optional[str] = None, token: Optional[str] = None,
                 timeout: Optional[float] = None, transport: Optional[Transport] = None) -> None:
        self.db_path = db_path
        self.read_only = read_only
        self._http = transport or Transport(base_url, token, timeout)
        self._fts_enabled = True

    def close(self) -> None:
        self._http.close()

    def _p(self, *segments: str) -> str:
        return self._http.path(*segments)

    # -- sessions --------------------------------------------------------

    def create_session(self, session_id: str, source: str, **kwargs: Any) -> str:
        body: Dict[str, Any] = {"session_id": session_id, "source": source}
        for k in ("user_id", "model", "model_config", "system_prompt", "parent_session_id"):
            v = kwargs.get(k)
            if v is None:
                continue
            if k == "model_config" and not isinstance(v, str):
                v = json.dumps(v)
            body[k] = v
        self._http.post("/transcripts", body)
        return session_id

    def ensure_session(self, session_id: str, source: str = "unknown", model: str = None, **kwargs: Any) -> str:
        return self.create_session(session_id, source, model=model, **kwargs)

    def end_session(self, session_id: str, end_reason: str) -> None:
        try:
            self._http.post(self._p("transcripts", session_id, "end"), {"reason": end_reason})
        except HermesNotFound:
            pass

    def reopen_session(self, session_id: str) -> None:
        try:
            self._http.post(self._p("transcripts", session_id, "reopen"))
        except HermesNotFound:
            pass

    def _patch(self, session_id: str, body: Dict[str, Any]) -> None:
        try:
            self._http.patch(self._p("transcripts", session_id), body)
        except HermesNotFound:
            pass

    def update_session_meta(self, session_id: str, model_config_json: str, model: Optional[str] = None) -> None:
        body: Dict[str, Any] = {"model_config": model_config_json}
        if model is not None:
            body["model"] = model
        self._patch(session_id, body)

    def update_system_prompt(self, session_id: str, system_prompt: str) -> None:
        self._patch(session_id, {"system_prompt": system_prompt})

    def update_session_model(self, session_id: str, model: str) -> None:
        self._patch(session_id, {"model": model})

    def update_token_counts(self, session_id: str, input_tokens: int = 0, output_tokens: int = 0,
                            model: str = None, cache_read_tokens: int = 0, cache_write_tokens: int = 0,
                            reasoning_tokens: int = 0, estimated_cost_usd: Optional[float] = None,
                            actual_cost_usd: Optional[float] = None, cost_status: Optional[str] = None,
                            cost_source: Optional[str] = None, pricing_version: Optional[str] = None,
                            billing_provider: Optional[str] = None, billing_base_url: Optional[str] = None,
                            billing_mode: Optional[str] = None, api_call_count: int = 0,
                            absolute: bool = False) -> None:
        body: Dict[str, Any] = {
            "input_tokens": int(input_tokens or 0), "output_tokens": int(output_tokens or 0),
            "cache_read_tokens": int(cache_read_tokens or 0), "cache_write_tokens": int(cache_write_tokens or 0),
            "reasoning_tokens": int(reasoning_tokens or 0), "api_call_count": int(api_call_count or 0),
        }
        for k, v in (("model", model), ("estimated_cost_usd", estimated_cost_usd),
                     ("actual_cost_usd", actual_cost_usd), ("cost_status", cost_status),
                     ("cost_source", cost_source), ("pricing_version", pricing_version),
                     ("billing_provider", billing_provider), ("billing_base_url", billing_base_url),
                     ("billing_mode", billing_mode)):
            if v is not None:
                body[k] = v
        if absolute:
            raise NotImplementedError(
                "hermes keeps running token totals from the log; absolute=True is not supported "
                "(docs/COMPATIBILITY.md)")
        self._patch(session_id, body)

    def get_session(self, session_id: str) -> Optional[Dict[str, Any]]:
        if not session_id:
            return None
        try:
            return self._http.get(self._p("transcripts", session_id))
        except HermesNotFound:
            return None
        except HermesInvalidArgument:
            return None

    def resolve_session_id(self, session_id_or_prefix: str) -> Optional[str]:
        if not session_id_or_prefix:
            return None
        return self._http.get("/transcripts/resolve", id=session_id_or_prefix).get("session_id")

    @staticmethod
    def sanitize_title(title: Optional[str]) -> Optional[str]:
        """Hermes' title rules, applied by hermes (GET /v1/titles/sanitize):
        None for an empty title, ValueError for one too long. The characters
        both delete outright (ASCII controls, zero-width and directional
        marks) are taken out here first: hermes' door refuses some of them
        (NUL) in a request."""
        title = _strip_invisible(title)
        if not title:
            return None
        from . import _default_transport
        try:
            return _default_transport().get("/titles/sanitize", title=title).get("title")
        except HermesInvalidArgument as e:
            raise ValueError(e.message) from None

    def set_session_title(self, session_id: str, title: str) -> bool:
        title = _strip_invisible(title)
        try:
            self._http.put(self._p("transcripts", session_id, "title"), {"title": title if title is not None else ""})
        except HermesNotFound:
            return False
        except HermesConflict as e:
            raise ValueError(e.message) from None
        except HermesInvalidArgument as e:
            raise ValueError(e.message) from None
        return True

    def get_session_title(self, session_id: str) -> Optional[str]:
        row = self.get_session(session_id)
        return row.get("title") if row else None

    def set_session_archived(self, session_id: str, archived: bool) -> bool:
        try:
            res = self._http.put(self._p("transcripts", session_id, "archived"), {"archived": bool(archived)})
        except HermesNotFound:
            return False
        return bool(res.get("updated"))

    def get_session_by_title(self, title: str) -> Optional[Dict[str, Any]]:
        if not title:
            return None
        try:
            return self._http.get("/titles/session", title=title)
        except (HermesNotFound, HermesInvalidArgument):
            return None

    def resolve_session_by_title(self, title: str) -> Optional[str]:
        if not title:
            return None
        try:
            return self._http.get("/titles/resolve", title=title).get("session_id")
        except (HermesNotFound, HermesInvalidArgument):
            return None

    def get_next_title_in_lineage(self, base_title: str) -> str:
        return self._http.get("/titles/next", title=base_title)["title"]

    def get_compression_tip(self, session_id: str) -> Optional[str]:
        try:
            return self._http.get(self._p("transcripts", session_id, "compression-tip")).get("session_id")
        except (HermesNotFound, HermesInvalidArgument):
            return session_id

    def list_sessions_rich(self, source: str = None, exclude_sources: List[str] = None, limit: int = 20,
                           offset: int = 0, include_children: bool = False, min_message_count: int = 0,
                           project_compression_tips: bool = True, order_by_last_active: bool = False,
                           include_archived: bool = False, archived_only: bool = False,
                           id_query: str = None) -> List[Dict[str, Any]]:
        if limit is not None and limit <= 0:
            return []
        q: Dict[str, Any] = {
            "source": source or None, "exclude_source": ",".join(exclude_sources) if exclude_sources else None,
            "limit": limit, "offset": offset or None, "include_children": include_children or None,
            "min_message_count": min_message_count or None,
            "project_compression_tips": None if project_compression_tips else False,
            "order_by_last_active": order_by_last_active or None,
            "include_archived": include_archived or None, "archived_only": archived_only or None,
            "id_query": (id_query or "").strip() or None,
        }
        return self._http.get("/transcripts", **q).get("sessions") or []

    def search_sessions_by_id(self, query: str, limit: int = 20, include_archived: bool = True) -> List[Dict[str, Any]]:
        needle = (query or "").strip().lower()
        if not needle or limit <= 0:
            return []
        rows = self.list_sessions_rich(limit=max(limit * 4, limit), include_archived=include_archived,
                                       order_by_last_active=True, id_query=needle)

        def score(row: Dict[str, Any]) -> int:
            ids = [str(row.get(k) or "").lower() for k in ("id", "_lineage_root_id")]
            ids = [i for i in ids if i]
            if needle in ids:
                return 0
            if any(i.startswith(needle) for i in ids):
                return 1
            return 2

        ranked = sorted(enumerate(rows), key=lambda it: (score(it[1]), it[0]))
        return [r for _, r in ranked[:limit]]

    def search_sessions(self, source: str = None, limit: int = 20, offset: int = 0) -> List[Dict[str, Any]]:
        return self._http.get("/transcripts", source=source or None, limit=limit, offset=offset or None,
                              include_children=True, include_archived=True, order_by_last_active=True,
                              project_compression_tips=False, plain=True).get("sessions") or []

    def session_count(self, source: str = None, min_message_count: int = 0, include_archived: bool = False,
                      archived_only: bool = False, exclude_children: bool = False,
                      exclude_sources: List[str] = None) -> int:
        return int(self._http.get(
            "/transcripts/count", source=source or None,
            exclude_source=",".join(exclude_sources) if exclude_sources else None,
            min_message_count=min_message_count or None, include_archived=include_archived or None,
            archived_only=archived_only or None, exclude_children=exclude_children or None)["count"])

    def message_count(self, session_id: str = None) -> int:
        return int(self._http.get("/stats/messages", session_id=session_id or None)["count"])

    # -- messages --------------------------------------------------------

    def append_message(self, session_id: str, role: str, content: str = None, tool_name: str = None,
                       tool_calls: Any = None, tool_call_id: str = None, token_count: int = None,
                       finish_reason: str = None, reasoning: str = None, reasoning_content: str = None,
                       reasoning_details: Any = None, codex_reasoning_items: Any = None,
                       codex_message_items: Any = None, platform_message_id: str = None,
                       observed: bool = False, timestamp: Any = None, turn_id: str = None) -> int:
        body = _wire_message({
            "role": role, "content": content, "tool_name": tool_name, "tool_calls": tool_calls,
            "tool_call_id": tool_call_id, "token_count": token_count, "finish_reason": finish_reason,
            "reasoning": reasoning, "reasoning_content": reasoning_content,
            "reasoning_details": reasoning_details, "codex_reasoning_items": codex_reasoning_items,
            "codex_message_items": codex_message_items,
        })
        # turn_id fences the message by its turn: hermes refuses it (409
        # turn_not_open, HermesConflict) once that turn is no longer the
        # lane's open turn (another node adopted it while this process was
        # paused or cut off).
        if turn_id:
            body["turn_id"] = turn_id
        # platform_message_id, observed and an explicit timestamp are not
        # stored by hermes (docs/COMPATIBILITY.md): hermes stamps each
        # message with its own clock so the log's times stay monotonic.
        return int(self._http.post(self._p("transcripts", session_id, "messages"), body)["id"])

    def replace_messages(self, session_id: str, messages: List[Dict[str, Any]]) -> None:
        self._http.put(self._p("transcripts", session_id, "messages"),
                       {"messages": [_wire_message(m) for m in messages]})

    def get_messages(self, session_id: str, include_inactive: bool = False) -> List[Dict[str, Any]]:
        try:
            rows = self._http.get(self._p("transcripts", session_id, "messages"),
                                  include_inactive=include_inactive or None).get("messages") or []
        except (HermesNotFound, HermesInvalidArgument):
            return []
        for r in rows:
            for k in ("reasoning_details", "codex_reasoning_items", "codex_message_items"):
                if isinstance(r.get(k), str):
                    try:
                        r[k] = json.loads(r[k])
                    except ValueError:
                        pass
            r["active"] = 1 if r.get("active", True) else 0
        return rows

    def get_messages_as_conversation(self, session_id: str, include_ancestors: bool = False,
                                     include_inactive: bool = False) -> List[Dict[str, Any]]:
        try:
            return self._http.get(self._p("transcripts", session_id, "messages"), format="conversation",
                                  include_ancestors=include_ancestors or None).get("messages") or []
        except (HermesNotFound, HermesInvalidArgument):
            return []

    def resolve_resume_session_id(self, session_id: str) -> str:
        if not session_id:
            return session_id
        try:
            return self._http.get(self._p("transcripts", session_id, "resume-target")).get("session_id") or session_id
        except HermesError:
            return session_id

    def list_recent_user_messages(self, session_id: str, limit: int = 20,
                                  include_inactive: bool = False) -> List[Dict[str, Any]]:
        rows = [m for m in self.get_messages(session_id, include_inactive=include_inactive) if m.get("role") == "user"]
        rows.sort(key=lambda m: m["id"], reverse=True)
        out = []
        for m in rows[:limit]:
            out.append({"id": m["id"], "content": m.get("content"), "timestamp": m.get("timestamp"),
                        "active": m.get("active", 1)})
        return out

    def rewind_to_message(self, session_id: str, target_message_id: int) -> Dict[str, Any]:
        active = [m for m in self.get_messages(session_id) if m.get("active", 1)]
        target = next((m for m in active if m["id"] == target_message_id), None)
        if target is None or target.get("role") != "user":
            raise ValueError(f"message {target_message_id} is not an active user message of session {session_id}")
        n = sum(1 for m in active if m.get("role") == "user" and m["id"] >= target_message_id)
        res = self._http.post(self._p("transcripts", session_id, "rewind"), {"n": n})
        return {"rewound_count": res.get("rewound_count", 0), "target_message": target}

    # -- search ----------------------------------------------------------

    def search_messages(self, query: str, source_filter: List[str] = None, exclude_sources: List[str] = None,
                        role_filter: List[str] = None, limit: int = 20, offset: int = 0, sort: str = None,
                        include_inactive: bool = False) -> List[Dict[str, Any]]:
        if not query or not query.strip():
            return []
        q: Dict[str, Any] = {"q": query, "limit": max(1, min(int(limit), 500)), "offset": offset or None}
        if source_filter is not None:
            q["source"] = ",".join(source_filter)
        if exclude_sources is not None:
            q["exclude_source"] = ",".join(exclude_sources)
        if role_filter is not None:
            q["role"] = ",".join(role_filter)
        return self._http.get("/search", **q).get("results") or []

    # -- export and cleanup ---------------------------------------------

    def export_session(self, session_id: str) -> Optional[Dict[str, Any]]:
        try:
            return self._http.get(self._p("transcripts", session_id, "export"))
        except (HermesNotFound, HermesInvalidArgument):
            return None

    def export_all(self, source: str = None) -> List[Dict[str, Any]]:
        return self._http.get("/export", source=source or None).get("sessions") or []

    def clear_messages(self, session_id: str) -> None:
        try:
            self._http.post(self._p("transcripts", session_id, "clear"))
        except HermesNotFound:
            pass

    @staticmethod
    def _remove_session_files(sessions_dir: Optional[Path], session_id: str) -> None:
        """Removes the gateway's own on-disk leftovers of a session, as
        Hermes does: ``<id>.json``, ``<id>.jsonl`` and
        ``request_dump_<id>_*.json`` in ``sessions_dir`` (never outside it)."""
        if sessions_dir is None or not session_id or any(c in session_id for c in "/\\\0") or ".." in session_id:
            return
        d = Path(sessions_dir)
        for suffix in (".json", ".jsonl"):
            try:
                (d / f"{session_id}{suffix}").unlink()
            except OSError:
                pass
        try:
            for p in d.glob(f"request_dump_{session_id}_*.json"):
                try:
                    p.unlink()
                except OSError:
                    pass
        except OSError:
            pass

    def delete_session(self, session_id: str, sessions_dir: Optional[Path] = None) -> bool:
        try:
            self._http.delete(self._p("transcripts", session_id))
        except (HermesNotFound, HermesInvalidArgument):
            return False
        self._remove_session_files(sessions_dir, session_id)
        return True

    def delete_session_if_empty(self, session_id: str, sessions_dir: Optional[Path] = None) -> bool:
        """Deletes the session when it has no message, no title and no
        child session, as Hermes does. The checks and the delete are
        separate requests: a message appended between them is deleted with
        the session (Hermes runs both in one transaction)."""
        row = self.get_session(session_id)
        if not row or row.get("message_count", 0) or row.get("title") or self.message_count(session_id):
            return False
        try:
            lineage = self._http.get(self._p("transcripts", session_id, "lineage"))
        except (HermesNotFound, HermesInvalidArgument):
            return False
        if len(lineage.get("descendants") or []) > 1:
            return False
        return self.delete_session(session_id, sessions_dir)

    def delete_sessions(self, session_ids: List[str], sessions_dir: Optional[Path] = None) -> int:
        ids = [s for s in dict.fromkeys(session_ids or []) if s]
        if not ids:
            return 0
        n = int(self._http.post("/transcripts/delete", {"session_ids": ids})["deleted"])
        for sid in ids:
            if self.get_session(sid) is None:
                self._remove_session_files(sessions_dir, sid)
        return n

    def count_empty_sessions(self) -> int:
        return int(self._http.get("/transcripts/count", empty=True)["count"])

    def delete_empty_sessions(self, sessions_dir: Optional[Path] = None) -> int:
        return int(self._http.post("/maintenance/delete-empty-sessions")["deleted"])

    def prune_sessions(self, older_than_days: int = 90, source: str = None,
                       sessions_dir: Optional[Path] = None) -> int:
        body: Dict[str, Any] = {"older_than_days": int(older_than_days)}
        if source:
            body["source"] = source
        return int(self._http.post("/maintenance/prune-sessions", body)["deleted"])

    # -- state_meta (hermes: GET/PUT /v1/meta/{key}, kept in the log) ------

    def get_meta(self, key: str) -> Optional[str]:
        return self._http.get(self._p("meta", key)).get("value")

    def set_meta(self, key: str, value: str) -> None:
        self._http.put(self._p("meta", key), {"value": "" if value is None else str(value)})

    # -- gateway hygiene streaks (Hermes d7f5acb9's gateway_hygiene_state) --

    def increment_hygiene_failure_streak(self, session_key: str) -> int:
        """One more failed session-hygiene compression of the chat; the new
        streak. Kept as the meta value ``hygiene_failure_streak:<key>`` (in
        the log); increments are serialised in this process, not across
        processes (docs/COMPATIBILITY.md)."""
        if not session_key:
            return 1
        meta = "hygiene_failure_streak:" + session_key
        with _HYGIENE_LOCK:
            try:
                streak = int(self.get_meta(meta) or 0) + 1
            except (TypeError, ValueError):
                streak = 1
            self.set_meta(meta, str(streak))
        return streak

    def reset_hygiene_failure_streak(self, session_key: str) -> None:
        """The chat's hygiene compression worked: its streak is 0."""
        if not session_key:
            return
        with _HYGIENE_LOCK:
            meta = "hygiene_failure_streak:" + session_key
            if self.get_meta(meta):
                self.set_meta(meta, "")

    # -- Telegram DM topic mode -------------------------------------------

    def apply_telegram_topic_migration(self) -> None:
        self._http.post("/telegram/topic-migration", {})

    def enable_telegram_topic_mode(self, *, chat_id: str, user_id: str, has_topics_enabled: Optional[bool] = None,
                                   allows_users_to_create_topics: Optional[bool] = None) -> None:
        self._http.put(self._p("telegram", "chats", str(chat_id), "topic-mode"), {
            "user_id": str(user_id), "has_topics_enabled": has_topics_enabled,
            "allows_users_to_create_topics": allows_users_to_create_topics})

    def disable_telegram_topic_mode(self, *, chat_id: str, clear_bindings: bool = True) -> None:
        self._http.request("DELETE", self._p("telegram", "chats", str(chat_id), "topic-mode"),
                           query={"clear_bindings": bool(clear_bindings)})

    def is_telegram_topic_mode_enabled(self, *, chat_id: str, user_id: str) -> bool:
        res = self._http.get(self._p("telegram", "chats", str(chat_id), "topic-mode"), user_id=str(user_id))
        return bool(res.get("enabled"))

    def get_telegram_topic_binding(self, *, chat_id: str, thread_id: str) -> Optional[Dict[str, Any]]:
        return self._http.get(self._p("telegram", "chats", str(chat_id), "topics", str(thread_id))).get("binding")

    def list_telegram_topic_bindings_for_chat(self, *, chat_id: str) -> List[Dict[str, Any]]:
        return self._http.get(self._p("telegram", "chats", str(chat_id), "topics")).get("bindings") or []

    def get_telegram_topic_binding_by_session(self, *, session_id: str) -> Optional[Dict[str, Any]]:
        return self._http.get("/telegram/topic-bindings", session_id=str(session_id)).get("binding")

    def bind_telegram_topic(self, *, chat_id: str, thread_id: str, user_id: str, session_key: str,
                            session_id: str, managed_mode: str = "auto") -> None:
        try:
            self._http.put(self._p("telegram", "chats", str(chat_id), "topics", str(thread_id)), {
                "user_id": str(user_id), "session_key": str(session_key), "session_id": str(session_id),
                "managed_mode": managed_mode})
        except HermesConflict as e:
            raise ValueError(e.message) from None

    def is_telegram_session_linked_to_topic(self, *, session_id: str) -> bool:
        return self.get_telegram_topic_binding_by_session(session_id=session_id) is not None

    def list_unlinked_telegram_sessions_for_user(self, *, chat_id: str, user_id: str,
                                                 limit: int = 10) -> List[Dict[str, Any]]:
        return self._http.get("/telegram/unlinked-sessions", chat_id=str(chat_id), user_id=str(user_id),
                              limit=int(limit)).get("sessions") or []

    # -- handoffs ----------------------------------------------------------

    def request_handoff(self, session_id: str, platform: str) -> bool:
        try:
            return bool(self._http.post(self._p("transcripts", session_id, "handoff"),
                                        {"platform": platform}).get("requested"))
        except (HermesNotFound, HermesInvalidArgument):
            return False

    def get_handoff_state(self, session_id: str) -> Optional[Dict[str, Any]]:
        try:
            res = self._http.get(self._p("transcripts", session_id, "handoff"))
        except (HermesNotFound, HermesInvalidArgument):
            return None
        return {"state": res.get("state"), "platform": res.get("platform"), "error": res.get("error")}

    def list_pending_handoffs(self) -> List[Dict[str, Any]]:
        return self._http.get("/handoffs", state="pending").get("sessions") or []

    def claim_handoff(self, session_id: str) -> bool:
        try:
            return bool(self._http.post(self._p("transcripts", session_id, "handoff", "claim")).get("claimed"))
        except (HermesNotFound, HermesInvalidArgument):
            return False

    def complete_handoff(self, session_id: str) -> None:
        try:
            self._http.post(self._p("transcripts", session_id, "handoff", "complete"))
        except (HermesNotFound, HermesInvalidArgument):
            pass

    def fail_handoff(self, session_id: str, error: str) -> None:
        try:
            self._http.post(self._p("transcripts", session_id, "handoff", "fail"), {"error": str(error)[:500]})
        except (HermesNotFound, HermesInvalidArgument):
            pass

    # -- anchored reads ----------------------------------------------------

    @staticmethod
    def _decode_rows(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        for r in rows:
            if isinstance(r.get("tool_calls"), str):
                try:
                    r["tool_calls"] = json.loads(r["tool_calls"])
                except ValueError:
                    r["tool_calls"] = []
        return rows

    def get_messages_around(self, session_id: str, around_message_id: int, window: int = 5) -> Dict[str, Any]:
        try:
            res = self._http.get(self._p("transcripts", session_id, "messages", "around"),
                                 message_id=int(around_message_id), window=max(0, int(window)))
        except (HermesNotFound, HermesInvalidArgument):
            return {"window": [], "messages_before": 0, "messages_after": 0}
        return {"window": self._decode_rows(res.get("window") or []),
                "messages_before": int(res.get("messages_before", 0)),
                "messages_after": int(res.get("messages_after", 0))}

    def get_anchored_view(self, session_id: str, around_message_id: int, window: int = 5, bookend: int = 3,
                          keep_roles: Optional[Tuple[str, ...]] = ("user", "assistant")) -> Dict[str, Any]:
        q: Dict[str, Any] = {"message_id": int(around_message_id), "window": max(0, int(window)),
                             "bookend": max(0, int(bookend)),
                             "keep_roles": "" if keep_roles is None else ",".join(keep_roles)}
        empty = {"window": [], "messages_before": 0, "messages_after": 0, "bookend_start": [], "bookend_end": []}
        try:
            res = self._http.get(self._p("transcripts", session_id, "messages", "anchored"), **q)
        except (HermesNotFound, HermesInvalidArgument):
            return empty
        return {"window": self._decode_rows(res.get("window") or []),
                "messages_before": int(res.get("messages_before", 0)),
                "messages_after": int(res.get("messages_after", 0)),
                "bookend_start": self._decode_rows(res.get("bookend_start") or []),
                "bookend_end": self._decode_rows(res.get("bookend_end") or [])}

    # -- maintenance -------------------------------------------------------

    def maybe_auto_prune_and_vacuum(self, retention_days: int = 90, min_interval_hours: int = 24,
                                    vacuum: bool = True, sessions_dir: Optional[Path] = None) -> Dict[str, Any]:
        """hermes' automatic prune (gateway.auto_prune_ran.v1). Never raises,
        as Hermes' does not: a failure is the ``error`` of the answer."""
        try:
            res = self._http.post("/maintenance/auto-prune", {
                "retention_days": int(retention_days), "min_interval_hours": int(min_interval_hours),
                "vacuum": bool(vacuum)})
        except HermesError as e:
            logger.warning("state.db auto-maintenance failed: %s", e)
            return {"skipped": False, "pruned": 0, "vacuumed": False, "error": str(e)}
        out = {"skipped": bool(res.get("skipped")), "pruned": int(res.get("pruned", 0)),
               "vacuumed": bool(res.get("vacuumed"))}
        if res.get("error"):
            out["error"] = res["error"]
        return out

    def vacuum(self) -> int:
        raise NotImplementedError("state.db is hermes' read model; hermes maintains it (docs/COMPATIBILITY.md)")

    def optimize_fts(self) -> int:
        raise NotImplementedError("state.db is hermes' read model; hermes maintains it (docs/COMPATIBILITY.md)")
