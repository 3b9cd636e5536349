-- Step 3: the erasures whose old row versions may still be in the tables'
-- files. An erasure adds its position in its own transaction; Purge
-- removes it once the tables are rewritten (erase.go). It holds no content.
CREATE TABLE {schema}.unpurged_erasures (
    position bigint PRIMARY KEY
);
