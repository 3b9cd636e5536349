-- Step 2: one snapshot per stream, next to the log (events.SnapshotStore).
CREATE TABLE {schema}.snapshots (
    stream         text    PRIMARY KEY,
    schema_version integer NOT NULL,
    version        bigint  NOT NULL CHECK (version > 0),
    event_id       text    NOT NULL,
    data           bytea   NOT NULL
);
