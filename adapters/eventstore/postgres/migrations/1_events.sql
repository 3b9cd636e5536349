-- Step 1: the log. {schema} is the store's schema, quoted.
--
-- position is an identity column whose sequence hands out one value at a
-- time (CACHE 1): with a cache, each session would take a range of its own
-- and positions would stop following the order in which appends take the
-- order lock (see doc.go). Open refuses a sequence altered to cache.
CREATE TABLE {schema}.events (
    position    bigint GENERATED ALWAYS AS IDENTITY (CACHE 1) PRIMARY KEY,
    stream      text   NOT NULL,
    version     bigint NOT NULL CHECK (version > 0),
    event_id    text   NOT NULL,
    type        text   NOT NULL,
    data        text   NOT NULL,
    metadata    text   NOT NULL,
    -- Unix nanoseconds, as the SQLite store keeps them: a copy between the
    -- two keeps the time exactly.
    recorded_at bigint NOT NULL,
    CONSTRAINT events_stream_version UNIQUE (stream, version),
    CONSTRAINT events_event_id UNIQUE (event_id)
);
