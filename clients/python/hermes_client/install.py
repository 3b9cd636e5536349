"""``python3 -m hermes_client install | uninstall | status``: the hook that
makes an unmodified Hermes gateway use hermes.

``install`` writes into the site-packages of the Python environment Hermes
runs in (the interpreter running the command, or ``--python``):

- ``hermes_client/``: a copy of this package (left out when the package is
  already importable from that site-packages),
- ``hermes_client-hook.pth``: one line that imports
  :mod:`hermes_client._hook` at every interpreter start.

A ``.pth`` file rather than ``sitecustomize``: an environment has one
``sitecustomize`` module (Debian's Python ships its own, and other tools
write theirs), so taking it would shadow or be shadowed; ``.pth`` files
are read side by side, one per package, and removing ours removes the hook
and nothing else. The hook does nothing unless ``HERMES_URL`` is set.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

PTH_NAME = "hermes_client-hook.pth"
MARKER = "INSTALLED_BY_HERMES_CLIENT"
# The .pth line: site.py executes lines that start with "import"; a
# missing or broken package must never stop the interpreter.
PTH_LINE = ("import sys; exec('try:\\n import hermes_client._hook\\nexcept Exception as e:\\n "
            "sys.stderr.write(\"hermes_client hook not loaded: %s\\\\n\" % e)')\n")

HERE = Path(__file__).resolve().parent


def _target_paths(python: Optional[str]) -> Dict[str, str]:
    code = "import json, sys, sysconfig; print(json.dumps({'purelib': sysconfig.get_paths()['purelib'], " \
           "'executable': sys.executable, 'version': '%d.%d' % sys.version_info[:2]}))"
    if python is None or os.path.realpath(python) == os.path.realpath(sys.executable):
        import sysconfig
        return {"purelib": sysconfig.get_paths()["purelib"], "executable": sys.executable,
                "version": "%d.%d" % sys.version_info[:2]}
    out = subprocess.run([python, "-I", "-c", code], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise SystemExit(f"hermes_client: cannot run {python}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def _package_files() -> List[Path]:
    return sorted(p for p in HERE.iterdir() if p.suffix == ".py")


def install(python: Optional[str] = None) -> int:
    t = _target_paths(python)
    site = Path(t["purelib"])
    site.mkdir(parents=True, exist_ok=True)
    dest = site / "hermes_client"
    copied = False
    if dest.resolve() != HERE:
        if dest.exists() and not (dest / MARKER).exists():
            raise SystemExit(f"hermes_client: {dest} exists and was not installed by this command; "
                             "remove it or use that copy")
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir()
        for f in _package_files():
            shutil.copyfile(f, dest / f.name)
            os.chmod(dest / f.name, 0o644)
        (dest / MARKER).write_text(f"copied from {HERE}\n")
        copied = True
    pth = site / PTH_NAME
    pth.write_text(PTH_LINE)
    os.chmod(pth, 0o644)
    print(f"hermes_client: hook installed for {t['executable']} (Python {t['version']})")
    print(f"  {pth}")
    if copied:
        print(f"  {dest}/ (a copy of the client)")
    print("  active whenever HERMES_URL is set; restart the gateway to use hermes")
    return 0


def uninstall(python: Optional[str] = None) -> int:
    t = _target_paths(python)
    site = Path(t["purelib"])
    removed = []
    pth = site / PTH_NAME
    if pth.exists():
        pth.unlink()
        removed.append(str(pth))
    dest = site / "hermes_client"
    if (dest / MARKER).exists():
        shutil.rmtree(dest)
        removed.append(str(dest) + "/")
    if removed:
        print("hermes_client: hook removed: " + ", ".join(removed))
    else:
        print(f"hermes_client: no hook installed for {t['executable']}")
    return 0


_PROBE = """
import json, os
out = {"hermes_url": os.environ.get("HERMES_URL") or None}
try:
    import gateway.session as gs
    out["SessionStore"] = gs.SessionStore.__module__
except Exception as e:
    out["SessionStore"] = None
    out["gateway_error"] = "%s: %s" % (type(e).__name__, e)
try:
    import hermes_state as hs
    out["SessionDB"] = hs.SessionDB.__module__
except Exception as e:
    out["SessionDB"] = None
print(json.dumps(out))
"""


def status(python: Optional[str] = None) -> int:
    t = _target_paths(python)
    site = Path(t["purelib"])
    pth = site / PTH_NAME
    dest = site / "hermes_client"
    print(f"interpreter: {t['executable']} (Python {t['version']})")
    print(f"hook file:   {pth} ({'present' if pth.exists() else 'absent'})")
    if (dest / MARKER).exists():
        print(f"client:      {dest} (copied by install)")
    elif dest.exists():
        print(f"client:      {dest}")
    else:
        print("client:      not in that site-packages")
    probe = subprocess.run([t["executable"], "-c", _PROBE], capture_output=True, text=True, timeout=60)
    if probe.returncode == 0:
        got = json.loads(probe.stdout.strip().splitlines()[-1])
        print(f"HERMES_URL:  {got['hermes_url'] or 'not set (Hermes uses its own files)'}")
        if got.get("SessionStore"):
            print(f"gateway.session.SessionStore is {got['SessionStore']}.SessionStore")
            print(f"hermes_state.SessionDB is {got['SessionDB']}.SessionDB")
        else:
            print(f"gateway.session not importable from here ({got.get('gateway_error')}); "
                  "run status from Hermes' directory")
    return 0 if pth.exists() else 1


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m hermes_client",
                                 description="Make an unmodified Hermes gateway use hermes (HERMES_URL).")
    ap.add_argument("command", choices=("install", "uninstall", "status"))
    ap.add_argument("--python", help="the interpreter of Hermes' environment (default: this one)")
    args = ap.parse_args(argv)
    return {"install": install, "uninstall": uninstall, "status": status}[args.command](args.python)


if __name__ == "__main__":
    sys.exit(main())
