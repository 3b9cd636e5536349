package transcripts

import (
	"testing"

	"hermes/projections/transcripts/fts5"
)

// useRanker gives p's reader a ranker with options o: tests rank with the
// fts5 ranker and with SQLite's statement, and read the row lengths in
// the search that needs them.
func useRanker(t testing.TB, p *Projection, o fts5.Options) {
	t.Helper()
	old := p.ranker
	p.ranker = fts5.New(p.readTx, o)
	old.Close()
}

// inlineRanker is the ranker of most tests: the row lengths are read in the
// search that needs them, so every query the ranker reads is ranked by it.
var inlineRanker = fts5.Options{LoadLengthsInline: true}

// rankedByFTS5 is how many searches p's fts5 ranker has ranked.
func rankedByFTS5(p *Projection) int64 { return p.ranker.Stats().Ranked }
