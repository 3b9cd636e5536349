"""`python3 -m hermes_client install` into a fresh virtual environment that
holds upstream's gateway code on its path: with HERMES_URL set, Hermes'
names are the client's; without it, Hermes' own; `uninstall` restores."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hermes_harness import CLIENT_ROOT, upstream_tree  # noqa: E402

PROBE = """
import json
from gateway.session import SessionStore, SessionEntry, SessionSource
from hermes_state import SessionDB
import gateway.run as run
print(json.dumps({
    "SessionStore": SessionStore.__module__, "SessionEntry": SessionEntry.__module__,
    "SessionSource": SessionSource.__module__, "SessionDB": SessionDB.__module__,
    "runner_store": run.SessionStore.__module__,
    "instrumented": bool(getattr(run.GatewayRunner, "_hermes_client_instrumented", False)),
}))
"""


class InstallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.upstream = upstream_tree()
        cls.dir = tempfile.mkdtemp(prefix="hermes-venv-")
        cls.venv = os.path.join(cls.dir, "venv")
        # Upstream's imports (PyYAML, httpx, …) are Debian packages of the
        # interpreter running the tests: the venv sees them.
        out = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", cls.venv],
                             capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            msg = f"python3 -m venv failed (apt-get install python3-venv): {out.stderr.strip()}"
            if os.environ.get("CI"):
                raise AssertionError(msg)
            raise unittest.SkipTest(msg)
        cls.python = os.path.join(cls.venv, "bin", "python")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def run_py(self, args, cwd, hermes_url=None, check=True):
        env = {k: v for k, v in os.environ.items() if k not in ("HERMES_URL", "PYTHONPATH")}
        env["PYTHONPATH"] = self.upstream
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        if hermes_url:
            env["HERMES_URL"] = hermes_url
        out = subprocess.run([self.python] + args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
        if check and out.returncode != 0:
            self.fail(f"{args} failed ({out.returncode}): {out.stderr}")
        return out

    def probe(self, hermes_url=None):
        out = self.run_py(["-c", PROBE], cwd=self.dir, hermes_url=hermes_url)
        return json.loads(out.stdout.strip().splitlines()[-1])

    def test_install_status_uninstall(self):
        # given a fresh venv, Hermes' own classes whatever HERMES_URL says
        self.assertEqual(self.probe("http://127.0.0.1:9")["SessionStore"], "gateway.session")
        # when the hook is installed
        self.run_py(["-m", "hermes_client", "install"], cwd=CLIENT_ROOT)
        site = self.run_py(["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           cwd=self.dir).stdout.strip()
        self.assertTrue(os.path.exists(os.path.join(site, "hermes_client-hook.pth")))
        # then with HERMES_URL set every name is the client's, and the
        # runner is instrumented,
        got = self.probe("http://127.0.0.1:9")
        self.assertEqual(got, {
            "SessionStore": "hermes_client.session", "SessionEntry": "hermes_client.session",
            "SessionSource": "hermes_client.session", "SessionDB": "hermes_client.state",
            "runner_store": "hermes_client.session", "instrumented": True})
        # and without it Hermes' own.
        got = self.probe(None)
        self.assertEqual((got["SessionStore"], got["SessionDB"], got["instrumented"]),
                         ("gateway.session", "hermes_state", False))
        status = self.run_py(["-m", "hermes_client", "status"], cwd=self.dir, hermes_url="http://127.0.0.1:9")
        self.assertIn("gateway.session.SessionStore is hermes_client.session.SessionStore", status.stdout)
        # when uninstalled, Hermes' own again even with HERMES_URL set
        self.run_py(["-m", "hermes_client", "uninstall"], cwd=self.dir)
        self.assertFalse(os.path.exists(os.path.join(site, "hermes_client-hook.pth")))
        self.assertFalse(os.path.exists(os.path.join(site, "hermes_client")))
        self.assertEqual(self.probe("http://127.0.0.1:9")["SessionStore"], "gateway.session")
        status = self.run_py(["-m", "hermes_client", "status"], cwd=CLIENT_ROOT, check=False)
        self.assertEqual(status.returncode, 1)
        self.assertIn("absent", status.stdout)

    def test_a_broken_hook_never_stops_the_interpreter(self):
        self.run_py(["-m", "hermes_client", "install"], cwd=CLIENT_ROOT)
        site = self.run_py(["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           cwd=self.dir).stdout.strip()
        try:
            shutil.rmtree(os.path.join(site, "hermes_client"))
            out = self.run_py(["-c", "print('alive')"], cwd=self.dir, hermes_url="http://127.0.0.1:9")
            self.assertEqual(out.stdout.strip(), "alive")
            self.assertIn("hermes_client hook not loaded", out.stderr)
        finally:
            self.run_py(["-m", "hermes_client", "uninstall"], cwd=CLIENT_ROOT)


if __name__ == "__main__":
    unittest.main()
