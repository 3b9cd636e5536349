-- Schema 1 of the hermes event store. The file's PRAGMA application_id and
-- user_version, set in the same transaction, say what the file is.
CREATE TABLE events (
    position    INTEGER PRIMARY KEY AUTOINCREMENT,
    stream      TEXT    NOT NULL,
    version     INTEGER NOT NULL CHECK (version > 0),
    event_id    TEXT    NOT NULL,
    type        TEXT    NOT NULL,
    data        TEXT    NOT NULL,
    metadata    TEXT    NOT NULL,
    recorded_at INTEGER NOT NULL,
    UNIQUE (stream, version),
    UNIQUE (event_id)
) STRICT;
