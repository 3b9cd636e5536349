#!/usr/bin/env python3
"""Runs Hermes' own tests of SessionStore and SessionDB through hermes_client
against real `hermes serve` processes on loopback, and writes the figures
per file (passed / failed / not applicable).

    python3 clients/python/conformance/run.py --mirror <hermes-agent git dir> \
        [--commit 5e01a5dbf1b7bc0144d9057be706da1ea9f065c3] [--hermes-bin bin/hermes] [--out FILE]
    python3 clients/python/conformance/run.py --checkout <hermes-agent work tree> ...

Needs pytest and PyYAML for the interpreter that runs it (on Debian:
`apt-get install python3-pytest python3-yaml`, then run with /usr/bin/python3),
a built hermes (`make build`), and a hermes-agent checkout or git directory
(the public repository is large; any full-history mirror has the commit).
With --mirror the commit's tree is extracted to a temp directory outside
this repository; the test files are run from there, unmodified.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

COMMIT = "5e01a5dbf1b7bc0144d9057be706da1ea9f065c3"
FILES = [
    "tests/gateway/test_session.py",
    "tests/gateway/test_session_store_prune.py",
    "tests/gateway/test_session_reset_notify.py",
    "tests/gateway/test_session_dm_thread_seeding.py",
    "tests/gateway/test_undo_rewind_session.py",
    "tests/test_hermes_state.py",
    "tests/hermes_state/test_resolve_resume_session_id.py",
    "tests/hermes_state/test_session_archiving.py",
    "tests/test_empty_session_hygiene.py",
]
HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkout", help="a hermes-agent work tree at the commit")
    src.add_argument("--mirror", help="a hermes-agent git directory holding the commit")
    ap.add_argument("--commit", default=COMMIT)
    ap.add_argument("--hermes-bin", default=str(REPO / "bin" / "hermes"))
    ap.add_argument("--out", help="also write the table (markdown) here")
    ap.add_argument("-k", help="pytest -k expression (to run a subset)")
    args = ap.parse_args()

    if args.checkout:
        tree = Path(args.checkout).resolve()
        commit = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True,
                                text=True).stdout.strip() or args.commit
    else:
        tree = Path(tempfile.mkdtemp(prefix="hermes-agent-"))
        archive = subprocess.Popen(["git", "--git-dir", args.mirror, "archive", args.commit], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", str(tree)], stdin=archive.stdout, check=True)
        if archive.wait() != 0:
            print(f"git archive {args.commit} failed", file=sys.stderr)
            return 2
        commit = args.commit
    results = Path(tempfile.mkdtemp(prefix="hermes-conf-out-")) / "results.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(HERE.parent), str(tree)])
    env["HERMES_BIN"] = str(Path(args.hermes_bin).resolve())
    env["HERMES_CONFORMANCE_OUT"] = str(results)
    env.pop("HERMES_API_TOKEN", None)
    cmd = [sys.executable, "-m", "pytest", "-p", "hermes_conformance", "-q", "-rN", "-p", "no:cacheprovider",
           "--rootdir", str(tree)] + [str(tree / f) for f in FILES]
    if args.k:
        cmd += ["-k", args.k]
    proc = subprocess.run(cmd, cwd=str(tree), env=env)
    if not results.exists():
        print(f"pytest ended with {proc.returncode} before any result", file=sys.stderr)
        return 2
    rows = json.loads(results.read_text())
    per = collections.OrderedDict((f, collections.Counter()) for f in FILES)
    failures = []
    for r in rows:
        f = r["nodeid"].split("::")[0]
        f = next((x for x in FILES if f.endswith(x)), f)
        per.setdefault(f, collections.Counter())[r["outcome"]] += 1
        if r["outcome"] == "failed":
            failures.append(r)
    lines = [f"hermes-agent commit `{commit}`, hermes `{git_head()}`", "",
             "| file | passed | failed | not applicable | skipped by the test itself |",
             "| --- | ---: | ---: | ---: | ---: |"]
    total = collections.Counter()
    for f, c in per.items():
        total.update(c)
        lines.append(f"| `{f}` | {c['passed']} | {c['failed']} | {c['n/a']} | {c['skipped']} |")
    lines.append(f"| **all** | **{total['passed']}** | **{total['failed']}** | **{total['n/a']}** | **{total['skipped']}** |")
    table = "\n".join(lines)
    print("\n" + table)
    if args.out:
        detail = ["", "Failures:", ""] + [f"- `{r['nodeid']}`: {r['reason']}" for r in failures]
        na = collections.Counter(r["reason"].split("N/A: ", 1)[-1] for r in rows if r["outcome"] == "n/a")
        detail += ["", "Not applicable, by reason:", ""] + [f"- {n} × {why}" for why, n in na.most_common()]
        Path(args.out).write_text(table + "\n" + "\n".join(detail) + "\n")
    return 0


def git_head() -> str:
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
