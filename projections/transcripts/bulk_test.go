package transcripts

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"hermes/events"
	"hermes/projections/transcripts/fts5"
)

// bulkHistory is a generated history with rewinds (updates of messages,
// which the FTS triggers follow) between the appends.
func bulkHistory() []events.Envelope {
	c := newCorpus(5, 15)
	c.events(sized(200, 1500))
	c.newSession(c.lanes[1]) // an idle reset (the generator makes one in a thousand events)
	for _, sid := range []string{"20260301_000000_00000002", "20260301_000000_00000009"} {
		c.h.tr(sid, events.TurnsRewound{SessionID: sid, TargetMessageID: 0, TurnsUndone: 1, At: c.now})
	}
	c.events(sized(100, 1000))
	return c.h.all
}

// bulkCommitFew is bulkCommitEvents for the tests whose builders index
// each commit: a bulk load of bulkHistory in a few commits (in batches of
// bulkBatch events).
var bulkCommitFew, bulkBatch = sized(40, 300), sized(30, 200)

// bulkHistoryWithChanges is a generated history in which messages are
// deleted, rewritten and imported with their own ids (one above every id,
// later ones into the gap left below it) between the appends: changes
// behind what the FTS builders have indexed. Its messages include some
// whose position lists run over FTS5's leaf pages, in doclists of several
// pages, with rows between them that hold only one of a phrase's words.
// The bulk load waits for the builders at pause (copyBuiltUpTo), so that
// they have indexed the changed rows and the ids above the gap.
func bulkHistoryWithChanges() (envs []events.Envelope, pause int) {
	c := newCorpus(6, 15)
	c.events(sized(150, 1000))
	c.longMessages(22)
	imported := func(sid string, ids ...int64) {
		var msgs []events.ImportedMessage
		for _, id := range ids {
			msgs = append(msgs, events.ImportedMessage{ID: id, Role: "user", Content: ptr(fmt.Sprintf("imported quokka %d 袋鼠导入", id)), Timestamp: 1})
		}
		c.h.tr(sid, events.MessagesImported{SessionID: sid, Messages: msgs, At: c.now})
	}
	imported("20260301_000000_imported", 50_000)
	c.events(sized(80, 600))
	pause = len(c.h.all)
	c.h.tr("20260301_000000_00000002", events.TranscriptRewritten{SessionID: "20260301_000000_00000002", At: c.now,
		Messages: []events.Message{text("user", "rewritten wombat 改写的"), text("assistant", "rewritten reply")}})
	c.h.tr("20260301_000000_00000009", events.TranscriptDeleted{SessionID: "20260301_000000_00000009", Reason: events.DeletePruned, At: c.now})
	imported("20260301_000000_imported", 40_000, 40_001)
	c.events(sized(80, 600))
	return c.h.all, pause
}

func applyBatches(t *testing.T, p *Projection, envs []events.Envelope, size int) {
	t.Helper()
	for i := 0; i < len(envs); i += size {
		mustApply(t, p, envs[i:min(i+size, len(envs))])
	}
}

// ftsIntegrity runs FTS5's integrity check on both indexes (it compares
// the index with the content) and returns the page of bm25 scores of a few
// queries, for comparison.
func ftsIntegrity(t *testing.T, p *Projection, queries []string) map[string][]int64 {
	t.Helper()
	ctx := context.Background()
	for _, table := range ftsTables {
		if _, err := p.conn.ExecContext(ctx, "INSERT INTO "+table+"("+table+") VALUES ('integrity-check')"); err != nil {
			t.Fatalf("%s integrity-check: %v", table, err)
		}
	}
	out := map[string][]int64{}
	for _, q := range queries {
		out[q] = inOrder(search(t, p, SearchQuery{Query: q, Limit: 50}))
	}
	return out
}

// TestBulkLoadEqualsIncremental: a bulk load (triggers dropped, FTS built
// at the end) leaves the same file as applying the events one batch at a
// time with Hermes' triggers: same dump (schema objects, including the
// triggers' DDL, and rows, including both FTS tables' content), both FTS
// indexes pass FTS5's integrity check, and searches give the same pages.
func TestBulkLoadEqualsIncremental(t *testing.T) {
	envs := bulkHistory()
	c := newCorpus(5, 15)
	queries := []string{c.words[0], c.words[1] + " " + c.words[2], c.words[3][:3] + "*", `"` + c.words[0] + " " + c.words[1] + `"`, c.cjkWords[3], c.cjkWords[1]}

	for _, commitEvery := range []int{bulkCommitEvents, bulkCommitFew} {
		t.Run(fmt.Sprintf("commit every %d events", commitEvery), func(t *testing.T) {
			defer func(old int, rows int64) { bulkCommitEvents, bulkBuildMinRows = old, rows }(bulkCommitEvents, bulkBuildMinRows)
			// The builders index each commit as it comes.
			bulkCommitEvents, bulkBuildMinRows = commitEvery, 1
			testBulkLoadEqualsIncremental(t, envs, 0, queries)
		})
	}
	t.Run("messages changed behind the builders", func(t *testing.T) {
		defer func(old int, rows int64) { bulkCommitEvents, bulkBuildMinRows = old, rows }(bulkCommitEvents, bulkBuildMinRows)
		bulkCommitEvents, bulkBuildMinRows = bulkCommitFew, 1
		envs, pause := bulkHistoryWithChanges()
		testBulkLoadEqualsIncremental(t, envs, pause, append(queries, "quokka", "wombat", "导入", "改写的", c.words[5]))
	})
}

// testBulkLoadEqualsIncremental compares the bulk load of envs with their
// incremental application; with pause > 0 the bulk load waits there until
// the builders have indexed every message applied.
func testBulkLoadEqualsIncremental(t *testing.T, envs []events.Envelope, pause int, queries []string) {
	live := openTemp(t)
	applyBatches(t, live, envs, 64)
	wantSearch := ftsIntegrity(t, live, queries)

	bulk := openTemp(t)
	ctx := context.Background()
	if err := bulk.BeginBulk(ctx); err != nil {
		t.Fatalf("BeginBulk: %v", err)
	}
	if pause > 0 {
		applyBatches(t, bulk, envs[:pause], bulkBatch)
		copyBuiltUpTo(t, bulk)
		envs = envs[pause:]
	}
	applyBatches(t, bulk, envs, bulkBatch)
	if err := bulk.EndBulk(ctx); err != nil {
		t.Fatalf("EndBulk: %v", err)
	}
	if diff := gocmp.Diff(dumpOf(t, live.Reader), dumpOf(t, bulk.Reader)); diff != "" {
		t.Fatalf("dump of the bulk load (-incremental +bulk):\n%s", diff)
	}
	if diff := gocmp.Diff(wantSearch, ftsIntegrity(t, bulk, queries)); diff != "" {
		t.Errorf("search pages (-incremental +bulk):\n%s", diff)
	}
	for _, table := range ftsTables {
		if n := unlistedSegmentRows(t, bulk, table); n > 0 {
			t.Errorf("%s_data holds %d rows of segments its structure record does not list", table, n)
		}
	}
	// FTS5's configuration is the incrementally built file's (no bulk
	// settings left; what the schema and its migrations set, such as
	// secure-delete, kept), and the scratch file is gone.
	// The format version is left out: FTS5 moves an index to version 5 at
	// its first secure delete, which the incremental history made and a
	// fresh bulk build has not.
	for _, table := range ftsTables {
		if got, want := ftsSettings(t, bulk, table), ftsSettings(t, live, table); got != want {
			t.Errorf("%s_config = %q, want %q (as built incrementally)", table, got, want)
		}
	}
	if m, _ := filepath.Glob(bulk.path + ".*"); len(m) > 0 {
		t.Errorf("left behind: %v", m)
	}
	// The triggers are back: later events reach the FTS indexes.
	h := newHistory()
	h.pos = envs[len(envs)-1].Position
	h.lane("knew", created("knew", "snew", at(0)))
	h.tr("snew", appended("snew", text("user", "a zebra crossing 斑马线路口"), at(1)))
	for _, p := range []*Projection{live, bulk} {
		mustApply(t, p, h.all)
		for _, q := range []string{"zebra", "斑马线"} {
			if got := len(search(t, p, SearchQuery{Query: q})); got != 1 {
				t.Errorf("Search(%q) after the bulk load = %d results, want 1", q, got)
			}
		}
	}
	if diff := gocmp.Diff(dumpOf(t, live.Reader), dumpOf(t, bulk.Reader)); diff != "" {
		t.Errorf("dump after more events (-incremental +bulk):\n%s", diff)
	}
}

// TestBulkLoadInterruptedIsFinishedByOpen: a file closed in the middle of
// a bulk load (no EndBulk: a crash or an error) gets its FTS indexes and
// triggers when it is opened again.
func TestBulkLoadInterruptedIsFinishedByOpen(t *testing.T) {
	envs := bulkHistory()
	live := openTemp(t)
	applyBatches(t, live, envs, sized(100, 512))

	path := filepath.Join(t.TempDir(), "state.db")
	p, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.BeginBulk(context.Background()); err != nil {
		t.Fatalf("BeginBulk: %v", err)
	}
	applyBatches(t, p, envs, sized(100, 512))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	reopened := openAt(t, path)
	if bulk, err := inBulk(context.Background(), reopened.conn); err != nil || bulk {
		t.Fatalf("after Open: bulk load under way = %v, %v; want finished", bulk, err)
	}
	if m, _ := filepath.Glob(path + ".*"); len(m) > 0 {
		t.Errorf("left behind (the builders' scratch files?): %v", m)
	}
	if diff := gocmp.Diff(dumpOf(t, live.Reader), dumpOf(t, reopened.Reader)); diff != "" {
		t.Errorf("dump (-incremental +reopened):\n%s", diff)
	}
	ftsIntegrity(t, reopened, nil)
}

// TestBulkLoadInterruptedAfterCopyingPasses: a bulk load closed after
// builder passes were copied into the file (copyBuilt) is finished by
// Open as if none had been: the copied segments go with the rest of the
// unfinished index, and the file equals the incremental one.
func TestBulkLoadInterruptedAfterCopyingPasses(t *testing.T) {
	defer func(old int, rows int64) { bulkCommitEvents, bulkBuildMinRows = old, rows }(bulkCommitEvents, bulkBuildMinRows)
	bulkCommitEvents, bulkBuildMinRows = bulkCommitFew, 1
	envs := bulkHistory()
	live := openTemp(t)
	applyBatches(t, live, envs, 512)

	path := filepath.Join(t.TempDir(), "state.db")
	p, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.BeginBulk(ctx); err != nil {
		t.Fatalf("BeginBulk: %v", err)
	}
	half := len(envs) / 2
	applyBatches(t, p, envs[:half], bulkBatch)
	// copyBuilt runs between two bulk transactions (Apply calls it right
	// after a commit); the last batches are still in an open one.
	if err := p.commitBulkTx(ctx); err != nil {
		t.Fatalf("commitBulkTx: %v", err)
	}
	// The builders index what the commits offered them; copy their
	// passes once they are between two.
	deadline := time.Now().Add(2 * time.Minute)
	for copiedSegments(t, p) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no builder pass was copied into state.db in 2 minutes (a scratch file marked rewritten is never copied before the end)")
		}
		if err := p.copyBuilt(ctx); err != nil {
			t.Fatalf("copyBuilt: %v", err)
		}
		runtime.Gosched()
	}
	// The rest, then the close, which may find the builders in a pass.
	applyBatches(t, p, envs[half:], bulkBatch)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	reopened := openAt(t, path)
	if diff := gocmp.Diff(dumpOf(t, live.Reader), dumpOf(t, reopened.Reader)); diff != "" {
		t.Errorf("dump (-incremental +reopened):\n%s", diff)
	}
	ftsIntegrity(t, reopened, nil)
	for _, table := range ftsTables {
		if n := unlistedSegmentRows(t, reopened, table); n > 0 {
			t.Errorf("%s_data holds %d rows of segments its structure record does not list", table, n)
		}
	}
}

// copyBuiltUpTo commits the bulk load's transaction, offers it to the
// builders and copies their passes into the file until both have indexed every message
// in it (their %_docsize rows reach the highest id).
func copyBuiltUpTo(t *testing.T, p *Projection) {
	t.Helper()
	ctx := context.Background()
	if err := p.commitBulkTx(ctx); err != nil {
		t.Fatalf("commitBulkTx: %v", err)
	}
	if err := p.offerBuilders(ctx); err != nil {
		t.Fatalf("offerBuilders: %v", err)
	}
	upto, err := maxMessageID(ctx, p.conn)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		indexed := upto
		for _, table := range ftsTables {
			var id int64
			queryRow(t, p, "SELECT coalesce(max(id), 0) FROM "+table+"_docsize", nil, &id)
			indexed = min(indexed, id)
		}
		if indexed == upto {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the builders indexed up to id %d of %d in 2 minutes", indexed, upto)
		}
		if err := p.copyBuilt(ctx); err != nil {
			t.Fatalf("copyBuilt: %v", err)
		}
		runtime.Gosched()
	}
}

// unlistedSegmentRows counts the %_data rows of table that belong to no
// segment of its structure record.
func unlistedSegmentRows(t *testing.T, p *Projection, table string) int {
	t.Helper()
	ctx := context.Background()
	tx, err := p.conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	segs, err := fts5.Segments(ctx, tx, table)
	if err != nil {
		t.Fatal(err)
	}
	where := "id >= " + ftsFirstSegmentRow
	for _, seg := range segs {
		where += fmt.Sprintf(" AND NOT (id >= %d AND id < %d)", seg.ID<<37, (seg.ID+1)<<37)
	}
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+table+"_data WHERE "+where).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// copiedSegments counts the rows of index segments in both FTS tables of
// the file.
func copiedSegments(t *testing.T, p *Projection) int {
	t.Helper()
	n := 0
	for _, table := range ftsTables {
		var rows int
		if err := p.conn.QueryRowContext(context.Background(), "SELECT count(*) FROM "+table+"_data WHERE id >= "+ftsFirstSegmentRow).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		n += rows
	}
	return n
}

// TestBulkLoadKeepsFTSConfiguration: FTS5 settings in the file before a
// bulk load (a migration's) are there after it, unchanged.
func TestBulkLoadKeepsFTSConfiguration(t *testing.T) {
	p := openTemp(t)
	ctx := context.Background()
	if _, err := p.conn.ExecContext(ctx, "INSERT INTO messages_fts_trigram(messages_fts_trigram, rank) VALUES ('automerge', 8)"); err != nil {
		t.Fatal(err)
	}
	before := ftsConfig(t, p, "messages_fts_trigram")
	if !strings.Contains(before, "automerge=8") {
		t.Fatalf("trigram configuration before = %q, want automerge=8 in it", before)
	}
	if err := p.BeginBulk(ctx); err != nil {
		t.Fatalf("BeginBulk: %v", err)
	}
	applyBatches(t, p, bulkHistory()[:sized(250, 500)], 100)
	if err := p.EndBulk(ctx); err != nil {
		t.Fatalf("EndBulk: %v", err)
	}
	if after := ftsConfig(t, p, "messages_fts_trigram"); after != before {
		t.Errorf("trigram configuration after a bulk load = %q, want %q as before it", after, before)
	}
	ftsIntegrity(t, p, nil)
}

// TestEndBulkWithoutBeginIsANoOp: EndBulk outside a bulk load changes
// nothing.
func TestEndBulkWithoutBeginIsANoOp(t *testing.T) {
	p := openTemp(t)
	envs := bulkHistory()[:200]
	mustApply(t, p, envs)
	before := dumpOf(t, p.Reader)
	if err := p.EndBulk(context.Background()); err != nil {
		t.Fatalf("EndBulk: %v", err)
	}
	if diff := gocmp.Diff(before, dumpOf(t, p.Reader)); diff != "" {
		t.Errorf("dump (-before +after):\n%s", diff)
	}
}

// ftsConfig is an FTS5 table's configuration, "k=v,…" in key order.
func ftsConfig(t *testing.T, p *Projection, table string) string {
	t.Helper()
	var keys string
	if err := p.conn.QueryRowContext(context.Background(),
		"SELECT group_concat(k || '=' || v) FROM (SELECT k, v FROM "+table+"_config ORDER BY k)").Scan(&keys); err != nil {
		t.Fatalf("%s_config: %v", table, err)
	}
	return keys
}

// ftsSettings is ftsConfig without the index's format version.
func ftsSettings(t *testing.T, p *Projection, table string) string {
	t.Helper()
	var kept []string
	for _, kv := range strings.Split(ftsConfig(t, p, table), ",") {
		if !strings.HasPrefix(kv, "version=") {
			kept = append(kept, kv)
		}
	}
	return strings.Join(kept, ",")
}
