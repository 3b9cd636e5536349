package sqlite

import (
	"encoding/json"
	"fmt"
)

// maxCachedStreams bounds the stream-version cache; past it, a quarter of
// the entries are dropped and re-read on demand.
const maxCachedStreams = 1 << 16

func (w *writer) evict() {
	n := len(w.versions) / 4
	for stream := range w.versions {
		if n == 0 {
			break
		}
		delete(w.versions, stream)
		n--
	}
}

// load reads, in one query, the versions of the batch's streams that are
// not cached: a query per stream would cost more than inserting the events.
func (w *writer) load(batch []*request) error {
	w.unknown = w.unknown[:0]
	for _, r := range batch {
		if _, ok := w.pending[r.stream]; ok {
			continue
		}
		if _, ok := w.versions[r.stream]; ok {
			continue
		}
		w.versions[r.stream] = 0
		w.unknown = append(w.unknown, r.stream)
	}
	if len(w.unknown) < 2 {
		for _, stream := range w.unknown {
			delete(w.versions, stream)
		}
		return nil
	}
	names, err := json.Marshal(w.unknown)
	if err != nil {
		return fmt.Errorf("read stream versions: %w", err)
	}
	rows, err := w.stmtStreamVersions.Query(string(names))
	if err != nil {
		return fmt.Errorf("read stream versions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var stream string
		var v int64
		if err := rows.Scan(&stream, &v); err != nil {
			return fmt.Errorf("read stream versions: %w", err)
		}
		w.versions[stream] = uint64(v)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read stream versions: %w", err)
	}
	return nil
}

// expectedVersion is the version r's expectation is checked against. A
// mismatch found in the cache is confirmed from the file before it refuses
// the append: conflicts are rare, and a cache that missed a commit must not
// turn a valid append into a WrongVersionError.
func (w *writer) expectedVersion(r *request) (uint64, error) {
	cur, err := w.version(r.stream)
	if err != nil || r.expected.Matches(cur) {
		return cur, err
	}
	if _, written := w.pending[r.stream]; written {
		return cur, nil
	}
	delete(w.versions, r.stream)
	return w.version(r.stream)
}

// version is the stream's last version as the open transaction sees it.
func (w *writer) version(stream string) (uint64, error) {
	if v, ok := w.pending[stream]; ok {
		return v, nil
	}
	if v, ok := w.versions[stream]; ok {
		return v, nil
	}
	var v int64
	if err := w.stmtStreamVersion.QueryRow(stream).Scan(&v); err != nil {
		return 0, fmt.Errorf("read version of %s: %w", stream, err)
	}
	w.versions[stream] = uint64(v)
	return uint64(v), nil
}
