"""Write a Hermes home with Hermes' own code, as its gateway would.

    python3 make_home.py UPSTREAM HOME SPEC

UPSTREAM is a hermes-agent checkout (its gateway/session.py, hermes_state.py
and utils.py are imported unmodified); HOME is created; SPEC is a JSON list of
lanes: {"source": SessionSource fields, "messages": [[role, content], ...],
"restart_failures": N}. The lanes are created through SessionStore and the
messages appended through SessionDB; the counts are written with utils'
atomic_json_write as GatewayRunner._increment_restart_failure_counts writes
them. Prints {"keys": [...], "session_ids": [...]} in the order of SPEC.
"""
import json
import os
import sys
from pathlib import Path


def main():
    upstream, home, spec = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
    home.mkdir(parents=True, exist_ok=True)
    os.environ["HERMES_HOME"] = str(home)
    sys.path.insert(0, upstream)
    from gateway.config import GatewayConfig, Platform
    from gateway.session import SessionSource, SessionStore
    from hermes_state import SessionDB
    from utils import atomic_json_write

    db = SessionDB(home / "state.db")
    store = SessionStore(home / "sessions", GatewayConfig(), db)
    keys, ids, counts = [], [], {}
    for lane in spec:
        fields = dict(lane["source"])
        fields["platform"] = Platform(fields["platform"])
        entry = store.get_or_create_session(SessionSource(**fields))
        for role, content in lane.get("messages", []):
            db.append_message(entry.session_id, role, content)
        if lane.get("restart_failures"):
            counts[entry.session_key] = lane["restart_failures"]
        keys.append(entry.session_key)
        ids.append(entry.session_id)
    if counts:
        atomic_json_write(home / ".restart_failure_counts", counts, indent=None)
    db.close()
    print(json.dumps({"keys": keys, "session_ids": ids}))


if __name__ == "__main__":
    main()
