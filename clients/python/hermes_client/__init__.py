"""hermes_client: Hermes' SessionStore and SessionDB over `hermes serve`.

    from hermes_client import SessionStore, SessionDB, SessionSource

Standard library only. Base URL and token come from the constructors'
``base_url`` / ``token`` or from ``HERMES_URL`` / ``HERMES_API_TOKEN``.

The names are loaded on first use, so the import hook of
``python3 -m hermes_client install`` costs an interpreter start almost
nothing when the gateway is not run.
"""

__version__ = "0.2.0"

_NAMES = {
    "HermesConflict": "errors", "HermesError": "errors", "HermesInvalidArgument": "errors",
    "HermesNotFound": "errors", "HermesUnavailable": "errors", "HermesUnsupportedChange": "errors",
    "Platform": "session", "SessionEntry": "session", "SessionSource": "session",
    "SessionStore": "session", "build_session_key": "session",
    "SessionDB": "state", "Transport": "_http", "GatewayRun": "runs",
}

__all__ = sorted(_NAMES)


def __getattr__(name):
    mod = _NAMES.get(name)
    if mod is None:
        raise AttributeError(f"module 'hermes_client' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + __all__)


import _thread  # noqa: E402  (threading would cost every interpreter start ~5 ms)

_default_lock = _thread.allocate_lock()
_default = None


def _default_transport():
    """A transport from the environment, for SessionDB's static methods."""
    global _default
    from ._http import Transport
    with _default_lock:
        if _default is None:
            _default = Transport()
        return _default
