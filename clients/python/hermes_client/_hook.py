"""The import hook of ``python3 -m hermes_client install``.

Loaded at interpreter start by the ``hermes_client-hook.pth`` file the
installer writes into the environment's site-packages. It adds a finder to
``sys.meta_path`` that lets Hermes' own modules load as they are and then,
when ``HERMES_URL`` is set at that moment, puts the client's classes in
their place:

- ``gateway.session``: ``SessionStore``, ``SessionEntry``, ``SessionSource``
- ``hermes_state``: ``SessionDB``
- ``gateway.run``: ``GatewayRunner``'s start, stop and agent turn announce
  the gateway's runs and turns to hermes (:mod:`hermes_client.runs`)

Without ``HERMES_URL`` nothing is touched and Hermes runs on its own files.
No file of Hermes is changed. Importing this module is cheap: the client is
imported only when one of those modules loads with ``HERMES_URL`` set.
"""

from __future__ import annotations

import os
import sys

TARGETS = ("gateway.session", "hermes_state", "gateway.run")

# What each target module had before the client's classes replaced them,
# by module name (for `status` and for tests).
ORIGINALS: dict = {}


def enabled() -> bool:
    """Whether the client takes Hermes' place (HERMES_URL is set)."""
    return bool(os.environ.get("HERMES_URL"))


def patch(name: str, module) -> None:
    """Puts the client's classes into a loaded Hermes module."""
    if name == "gateway.session":
        from . import session as cs
        ORIGINALS[name] = {n: getattr(module, n, None) for n in ("SessionStore", "SessionEntry", "SessionSource")}
        module.SessionStore = cs.SessionStore
        module.SessionEntry = cs.SessionEntry
        module.SessionSource = cs.SessionSource
    elif name == "hermes_state":
        from . import state as st
        ORIGINALS[name] = {"SessionDB": getattr(module, "SessionDB", None)}
        module.SessionDB = st.SessionDB
    elif name == "gateway.run":
        from . import runs
        # A gateway.run loaded before the hook (activate() after import)
        # holds Hermes' classes under its own names.
        from . import session as cs
        from . import state as st
        for n, mine in (("SessionStore", cs.SessionStore), ("SessionEntry", cs.SessionEntry),
                        ("SessionSource", cs.SessionSource), ("SessionDB", st.SessionDB)):
            theirs = getattr(module, n, None)
            if isinstance(theirs, type) and theirs is not mine and theirs.__module__ in ("gateway.session", "hermes_state"):
                setattr(module, n, mine)
        runner = getattr(module, "GatewayRunner", None)
        if runner is not None:
            ORIGINALS[name] = {"GatewayRunner": runner}
            runs.instrument(runner)
    module.__hermes_client__ = True


class _Loader:
    """Hermes' own loader, then the patch."""

    def __init__(self, name: str, loader) -> None:
        self._name = name
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        patch(self._name, module)

    def __getattr__(self, attr):
        # get_source, get_filename, is_package, … as Hermes' loader has them.
        return getattr(self._loader, attr)


class Finder:
    """Finds Hermes' module as the other finders would, and wraps its
    loader when the client is to take over."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in TARGETS or not enabled():
            return None
        for finder in sys.meta_path:
            if finder is self or isinstance(finder, Finder):
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(fullname, spec.loader)
        return spec


def activate() -> None:
    """Installs the finder (once). Modules already loaded are patched now."""
    if not any(isinstance(f, Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, Finder())
    if enabled():
        for name in TARGETS:
            mod = sys.modules.get(name)
            if mod is not None and not getattr(mod, "__hermes_client__", False):
                patch(name, mod)


activate()
