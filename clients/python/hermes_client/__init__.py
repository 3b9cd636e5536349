"""hermes_client: Hermes' SessionStore and SessionDB over `hermes serve`.

    from hermes_client import SessionStore, SessionDB, SessionSource

Standard library only. Base URL and token come from the constructors'
``base_url`` / ``token`` or from ``HERMES_URL`` / ``HERMES_API_TOKEN``.
"""

import threading

from ._http import Transport
from .errors import (
    HermesConflict,
    HermesError,
    HermesInvalidArgument,
    HermesNotFound,
    HermesUnavailable,
    HermesUnsupportedChange,
)
from .session import Platform, SessionEntry, SessionSource, SessionStore, build_session_key
from .state import SessionDB

__all__ = [
    "HermesConflict", "HermesError", "HermesInvalidArgument", "HermesNotFound", "HermesUnavailable",
    "HermesUnsupportedChange",
    "Platform", "SessionDB", "SessionEntry", "SessionSource", "SessionStore", "Transport",
    "build_session_key",
]

_default_lock = threading.Lock()
_default = None


def _default_transport() -> Transport:
    """A transport from the environment, for SessionDB's static methods."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Transport()
        return _default
