#!/usr/bin/env python3
"""Runs Hermes' own tests of SessionStore and SessionDB, and every upstream
gateway test file that builds one, twice: with Hermes' own classes (the
baseline) and with hermes_client's in their place against real
`hermes serve` processes on loopback. Writes the figures per file and every
test that passes with Hermes' classes and not with the client's.

    python3 clients/python/conformance/run.py --tree <hermes-agent tree> [--out FILE]
    python3 clients/python/conformance/run.py --mirror <hermes-agent git dir> --commit C ...

The files run are FILES (the store's and database's own, and the gateway
files that build one) and LATER_FILES (the session-layer files of later
releases), those of them the commit's tree has.
    python3 clients/python/conformance/run.py --checkout <hermes-agent work tree> ...

Needs pytest, pytest-asyncio, PyYAML, httpx, python-dotenv, requests and
aiohttp for the interpreter that runs it (Debian: apt-get install
python3-pytest python3-pytest-asyncio python3-yaml python3-httpx
python3-dotenv python3-requests python3-aiohttp; run with /usr/bin/python3)
and a built hermes (`make build`). The test files run unmodified from a
temporary copy of the tree (never from the tree given, never from this
repository), each file in its own pytest process as upstream's runner does.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

COMMIT = "5e01a5dbf1b7bc0144d9057be706da1ea9f065c3"
# The store's and the database's own test files.
STORE_FILES = [
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
# Upstream's gateway test files that construct a SessionStore or SessionDB
# (issue 34's fifteen).
GATEWAY_FILES = [
    "tests/gateway/test_35809_auto_reset_clean_context.py",
    "tests/gateway/test_clean_shutdown_marker.py",
    "tests/gateway/test_compression_failure_session_sync.py",
    "tests/gateway/test_fresh_reset_skill_injection.py",
    "tests/gateway/test_goal_max_turns_config.py",
    "tests/gateway/test_load_transcript_db_only.py",
    "tests/gateway/test_retry_replacement.py",
    "tests/gateway/test_telegram_group_gating.py",
    "tests/gateway/test_agent_cache.py",
    "tests/gateway/test_compression_concurrent_sessions.py",
    "tests/gateway/test_resume_command.py",
    "tests/gateway/test_session_api.py",
    "tests/gateway/test_telegram_topic_mode.py",
    "tests/gateway/test_title_command.py",
    "tests/gateway/test_api_server.py",
]
# The session-layer test files later Hermes added (at b9aa9289 and
# d7f5acb9: turn leases, active-turn markers, the /model override and
# metadata of an entry, expiry finalization, the routing index): run for a
# commit whose tree has them.
LATER_FILES = [
    "tests/state/test_session_turn_lease.py",
    "tests/gateway/test_turn_lease.py",
    "tests/gateway/test_session_store_expiry_finalized.py",
    "tests/gateway/test_session_model_override_persistence.py",
    "tests/gateway/test_session_id_cache_coherence.py",
    "tests/gateway/test_active_turn_recovery.py",
    "tests/gateway/test_restart_resume_pending.py",
    "tests/gateway/test_session_store_stale_prune.py",
    "tests/gateway/test_session_store_runtime_stale_guard.py",
    "tests/gateway/test_session_store_lock_io.py",
    "tests/gateway/test_session_continuity_82616.py",
]
FILES = STORE_FILES + GATEWAY_FILES


def files_of(tree: Path) -> List[str]:
    """The files of FILES and LATER_FILES the tree at the commit has
    (upstream renames and drops test files between releases)."""
    out = [f for f in FILES + LATER_FILES if (tree / f).is_file()]
    missing = [f for f in FILES + LATER_FILES if f not in out and f not in LATER_FILES]
    for f in missing:
        print(f"[files] {f}: not in this commit's tree", file=sys.stderr)
    return out
HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent


def prepare_tree(args) -> Path:
    tree = Path(tempfile.mkdtemp(prefix="hermes-agent-"))
    if args.mirror:
        archive = subprocess.Popen(["git", "--git-dir", args.mirror, "archive", args.commit], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", str(tree)], stdin=archive.stdout, check=True)
        if archive.wait() != 0:
            raise SystemExit(f"git archive {args.commit} failed")
        return tree
    src = Path(args.tree or args.checkout).resolve()
    shutil.rmtree(tree)
    shutil.copytree(src, tree, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.pyc"))
    return tree


def run_mode(tree: Path, mode: str, files: List[str], hermes_bin: str, k: str = None) -> List[Dict]:
    """Runs each file in its own pytest process; returns every result."""
    rows: List[Dict] = []
    for f in files:
        out = Path(tempfile.mkdtemp(prefix="hermes-conf-out-")) / "results.json"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(HERE.parent), str(tree)])
        env["HERMES_BIN"] = hermes_bin
        env["HERMES_CONFORMANCE_OUT"] = str(out)
        env["HERMES_CONFORMANCE_MODE"] = mode
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        for name in ("HERMES_API_TOKEN", "HERMES_URL", "HERMES_HOME"):
            env.pop(name, None)
        cmd = [sys.executable, "-m", "pytest", "-p", "hermes_conformance", "-q", "-rN", "-p", "no:cacheprovider",
               "--import-mode=importlib", "--rootdir", str(tree), str(tree / f)]
        if k:
            cmd += ["-k", k]
        proc = subprocess.run(cmd, cwd=str(tree), env=env, capture_output=True, text=True)
        if out.exists():
            got = json.loads(out.read_text())
        else:
            got = []
        if not got:
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
            rows.append({"nodeid": f + "::<collection>", "outcome": "failed",
                         "reason": "no test ran: " + " | ".join(tail)[:300]})
        for r in got:
            r["file"] = f
        rows.extend(got)
        shutil.rmtree(out.parent, ignore_errors=True)
        print(f"[{mode}] {f}: " + ", ".join(f"{n} {o}" for o, n in
                                            collections.Counter(r["outcome"] for r in got).most_common()),
              file=sys.stderr)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--tree", help="a hermes-agent tree at the commit (copied, never written)")
    src.add_argument("--checkout", help="a hermes-agent work tree at the commit (copied, never written)")
    src.add_argument("--mirror", help="a hermes-agent git directory holding the commit")
    ap.add_argument("--commit", default=COMMIT)
    ap.add_argument("--hermes-bin", default=str(REPO / "bin" / "hermes"))
    ap.add_argument("--mode", choices=("both", "client", "upstream"), default="both")
    ap.add_argument("--file", action="append", help="run only this test file (repeatable)")
    ap.add_argument("--out", help="also write the report (markdown) here")
    ap.add_argument("-k", help="pytest -k expression (to run a subset)")
    ap.add_argument("--json", help="also save every result here (for --render)")
    ap.add_argument("--render", help="write the report from results saved by --json, running nothing")
    ap.add_argument("--before", help="with --render: results saved by --json for an earlier client, "
                                     "shown per file beside the current ones")
    args = ap.parse_args()

    if args.render:
        saved = json.loads(Path(args.render).read_text())
        before = json.loads(Path(args.before).read_text())["results"].get("client") if args.before else None
        report = render(saved["results"], saved["files"], saved["commit"], before=before)
        print(report)
        if args.out:
            Path(args.out).write_text(report)
        return 0
    if not (args.tree or args.checkout or args.mirror):
        ap.error("one of --tree, --checkout, --mirror is required")
    tree = prepare_tree(args)
    files = args.file or files_of(tree)
    hermes_bin = str(Path(args.hermes_bin).resolve())
    try:
        results = {}
        modes = ("upstream", "client") if args.mode == "both" else (args.mode,)
        for mode in modes:
            results[mode] = run_mode(tree, mode, files, hermes_bin, args.k)
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "files": files, "commit": args.commit}))
    report = render(results, files, args.commit)
    print("\n" + report)
    if args.out:
        Path(args.out).write_text(report)
    return 0


_ABS = re.compile(r"/[^\s:'\"]*/([^/\s:'\"]+/[^/\s:'\"]+\.py)")


def _clean(reason: str) -> str:
    """A failure reason without this machine's paths (the file and its
    directory are kept)."""
    return _ABS.sub(r"\1", reason or "")


def render(results: Dict[str, List[Dict]], files: List[str], commit: str, before: List[Dict] = None) -> str:
    per = {m: collections.OrderedDict((f, collections.Counter()) for f in files) for m in results}
    by_id = {m: {r["nodeid"]: r for r in rows} for m, rows in results.items()}
    for m, rows in results.items():
        for r in rows:
            per[m].setdefault(r.get("file", ""), collections.Counter())[r["outcome"]] += 1
    lines = [f"hermes-agent commit `{commit}`, hermes `{git_head()}`", ""]
    both = "upstream" in results and "client" in results
    prior = collections.OrderedDict((f, collections.Counter()) for f in files)
    for r in before or []:
        prior.setdefault(r.get("file", ""), collections.Counter())[r["outcome"]] += 1
    lost: List[str] = []
    if both:
        for nid, r in by_id["upstream"].items():
            c = by_id["client"].get(nid)
            if r["outcome"] == "passed" and (c is None or c["outcome"] != "passed"):
                lost.append(nid)
        if before is not None:
            lines += ["| file | Hermes' classes: passed / failed | client before: passed / failed / n.a. "
                      "| client now: passed / failed / n.a. | passes lost now |", "| --- | ---: | ---: | ---: | ---: |"]
        else:
            lines += ["| file | Hermes' classes: passed / failed / skipped | client: passed / failed / n.a. / skipped "
                      "| passes lost |", "| --- | ---: | ---: | ---: |"]
    else:
        lines += ["| file | passed | failed | not applicable | skipped by the test itself |",
                  "| --- | ---: | ---: | ---: | ---: |"]
    tot = {m: collections.Counter() for m in results}
    for f in files:
        for m in results:
            tot[m].update(per[m][f])
        if both:
            u, c = per["upstream"][f], per["client"][f]
            n_lost = sum(1 for nid in lost if nid.split("::")[0].endswith(f) or by_id["upstream"][nid].get("file") == f)
            if before is not None:
                b = prior[f]
                lines.append(f"| `{f}` | {u['passed']} / {u['failed']} | {b['passed']} / {b['failed']} / {b['n/a']} | "
                             f"{c['passed']} / {c['failed']} / {c['n/a']} | {n_lost} |")
            else:
                lines.append(f"| `{f}` | {u['passed']} / {u['failed']} / {u['skipped']} | "
                             f"{c['passed']} / {c['failed']} / {c['n/a']} / {c['skipped']} | {n_lost} |")
        else:
            (m,) = results
            c = per[m][f]
            lines.append(f"| `{f}` | {c['passed']} | {c['failed']} | {c['n/a']} | {c['skipped']} |")
    if both:
        u, c = tot["upstream"], tot["client"]
        if before is not None:
            b = collections.Counter()
            for f in files:
                b.update(prior[f])
            lines.append(f"| **all** | **{u['passed']} / {u['failed']}** | **{b['passed']} / {b['failed']} / {b['n/a']}** | "
                         f"**{c['passed']} / {c['failed']} / {c['n/a']}** | **{len(lost)}** |")
            for label, group in (("issue 34's fifteen gateway files", GATEWAY_FILES), ("the store's own files", STORE_FILES)):
                gu, gb, gc = collections.Counter(), collections.Counter(), collections.Counter()
                for f in group:
                    gu.update(per["upstream"].get(f, {}))
                    gb.update(prior.get(f, {}))
                    gc.update(per["client"].get(f, {}))
                gl = sum(1 for nid in lost if by_id["upstream"][nid].get("file") in group)
                lines.append(f"| {label} | {gu['passed']} / {gu['failed']} | {gb['passed']} / {gb['failed']} / {gb['n/a']} | "
                             f"{gc['passed']} / {gc['failed']} / {gc['n/a']} | {gl} |")
        else:
            lines.append(f"| **all** | **{u['passed']} / {u['failed']} / {u['skipped']}** | "
                         f"**{c['passed']} / {c['failed']} / {c['n/a']} / {c['skipped']}** | **{len(lost)}** |")
    else:
        (m,) = results
        c = tot[m]
        lines.append(f"| **all** | **{c['passed']}** | **{c['failed']}** | **{c['n/a']}** | **{c['skipped']}** |")
    if both:
        lines += ["", "Passes lost (pass with Hermes' classes, not with the client's):", ""]
        lines += [f"- `{nid}`: {by_id['client'].get(nid, {}).get('outcome', 'missing')}: "
                  f"{_clean(by_id['client'].get(nid, {}).get('reason', ''))}" for nid in lost] or ["- none"]
    if "client" in results:
        fails = [r for r in results["client"] if r["outcome"] == "failed"]
        lines += ["", "Failures with the client:", ""]
        lines += [f"- `{r['nodeid']}`"
                  + (" (fails with Hermes' classes too)" if both and by_id["upstream"].get(r["nodeid"], {}).get("outcome") != "passed" else "")
                  + f": {_clean(r['reason'])}" for r in fails] or ["- none"]
        na = collections.Counter(r["reason"].split("N/A: ", 1)[-1] for r in results["client"] if r["outcome"] == "n/a")
        lines += ["", "Not applicable with the client, by reason:", ""]
        lines += [f"- {n} × {why}" for why, n in na.most_common()] or ["- none"]
    return "\n".join(lines) + "\n"


def git_head() -> str:
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
