package transcripts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// A bulk load (a catch-up from position 0: a rebuild, a new projection
// version, a file rebuilt because it was broken) skips the full-text
// indexes while the events are applied and builds them once at the end,
// from the messages table, which is what Hermes' triggers would have left
// in them: one row per message, its content, tool name and tool calls
// joined by spaces.
//
// BeginBulk drops Hermes' six FTS triggers, records metaBulk and starts a
// builder per FTS table (ftsbuilder.go), which indexes in a scratch file
// the messages each commit makes visible; Apply then writes only the plain
// tables, one transaction per bulkCommitEvents events (synchronous stays
// NORMAL: with so few commits it costs nothing), the stream versions held
// in memory in between. After each commit the FTS tables' %_content rows
// of the messages it inserted are written (bulkcontent.go) and the
// segments the builders finished since the last one are copied in
// (copyBuilt), still unlisted in the file's structure record. EndBulk has
// the builders index the rest and put right what changed behind them,
// then, in one transaction, copies in the rest of their shadow tables
// (the last pass, the averages and structure records; or all of the index
// when a builder's scratch file changed other than by adding segments),
// the unicode61 one while the trigram builder may still be at work,
// creates the triggers again from schema.sql (the same DDL, byte for byte)
// and clears metaBulk. A file opened with metaBulk set (a
// crash or an error during a bulk load) is finished by Open without
// builders: the unicode61 index is built in a scratch file on one core
// while the trigram index is built in the file itself on the other, both
// with a large FTS5 term hash and no automatic merges, and the FTS5
// settings it changed are put back before the commit.

// metaBulk is the state_meta key set while the FTS triggers are dropped.
const metaBulk = "hermes_bulk_load"

// ftsTables are Hermes' two FTS tables; ftsShadowCopy the shadow tables a
// bulk build copies (not _config: both sides hold the same version row).
var (
	ftsTables     = []string{"messages_fts", "messages_fts_trigram"}
	ftsShadowCopy = []string{"_data", "_idx", "_content", "_docsize"}
)

// bulkCommitEvents is how many events a bulk load applies per
// transaction (a batch is at most projections.MaxBatch): fewer commits,
// and fewer rewrites of the same index pages. A variable for tests.
var bulkCommitEvents = 64 * 1024

// bulkCacheKiB is the writer's page cache during a bulk load, in KiB, so
// that a transaction of bulkCommitEvents stays in memory.
const bulkCacheKiB = 128 * 1024

// commitBulkTx commits the transaction a bulk load keeps open, if any.
func (p *Projection) commitBulkTx(ctx context.Context) error {
	vs := p.bulkVersions
	p.bulkVersions, p.bulkKnown = nil, nil // the live path reads them for each batch
	if !p.bulkTx {
		return nil
	}
	p.bulkTx, p.bulkPending = false, 0
	if vs != nil {
		if err := vs.flush(ctx, p.stmts); err != nil {
			_, rbErr := p.conn.ExecContext(context.Background(), "ROLLBACK")
			return errors.Join(fmt.Errorf("commit bulk load: %w", err), rbErr)
		}
	}
	if _, err := p.conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("commit bulk load: %w", err)
	}
	return nil
}

// bulkHashSize is FTS5's in-memory term hash during a bulk build (the
// default is 1 MiB): a flush per 64 MiB of postings instead of per MiB.
const bulkHashSize = 64 << 20

// ftsTriggers returns the CREATE TRIGGER statements of the FTS triggers in
// schema.sql, by name, in file order.
func ftsTriggers() (names, ddl []string) {
	re := regexp.MustCompile(`(?s)CREATE TRIGGER IF NOT EXISTS (messages_fts\w*) .*?\nEND;`)
	for _, m := range re.FindAllStringSubmatch(schemaSQL, -1) {
		names = append(names, m[1])
		ddl = append(ddl, m[0])
	}
	return names, ddl
}

// ftsDDL returns the CREATE VIRTUAL TABLE statement of table in schema.sql.
func ftsDDL(table string) (string, error) {
	re := regexp.MustCompile(`(?s)CREATE VIRTUAL TABLE IF NOT EXISTS ` + table + ` USING fts5\(.*?\);`)
	ddl := re.FindString(schemaSQL)
	if ddl == "" {
		return "", fmt.Errorf("no DDL for %s in schema.sql", table)
	}
	return ddl, nil
}

// BeginBulk starts a bulk load: the FTS triggers are dropped until
// EndBulk. The runner calls it before it catches up from position 0.
func (p *Projection) BeginBulk(ctx context.Context) (err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("begin bulk load: %w", ErrClosed)
	}
	if _, err := p.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("begin bulk load: %w", err)
	}
	defer func() {
		if err != nil {
			_, rbErr := p.conn.ExecContext(context.Background(), "ROLLBACK")
			err = errors.Join(err, rbErr)
		}
	}()
	names, _ := ftsTriggers()
	for _, n := range names {
		if _, err := p.conn.ExecContext(ctx, "DROP TRIGGER IF EXISTS "+n); err != nil {
			return fmt.Errorf("begin bulk load: %w", err)
		}
	}
	if _, err := p.conn.ExecContext(ctx, "INSERT INTO state_meta (key, value) VALUES (?, '1') ON CONFLICT(key) DO UPDATE SET value = '1'", metaBulk); err != nil {
		return fmt.Errorf("begin bulk load: %w", err)
	}
	if _, err := p.conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("begin bulk load: %w", err)
	}
	if _, err := p.conn.ExecContext(ctx, fmt.Sprintf("PRAGMA cache_size = -%d", bulkCacheKiB)); err != nil {
		return fmt.Errorf("begin bulk load: %w", err)
	}
	if err := p.startBuilders(ctx); err != nil {
		return fmt.Errorf("begin bulk load: %w", err)
	}
	p.bulk = true
	return nil
}

// changeTriggers are the temporary triggers that record, during a bulk
// load, the ids of the messages deleted or rewritten (their text or id),
// which the builders may have indexed already: the FTS triggers of
// schema.sql would have followed these changes. They live on the writer
// connection only, and end with it.
var changeTriggers = []string{
	"CREATE TEMP TABLE IF NOT EXISTS bulk_fts_changed (id INTEGER PRIMARY KEY)",
	"CREATE TEMP TRIGGER IF NOT EXISTS bulk_fts_deleted AFTER DELETE ON main.messages BEGIN " +
		"INSERT OR IGNORE INTO bulk_fts_changed (id) VALUES (old.id); END",
	"CREATE TEMP TRIGGER IF NOT EXISTS bulk_fts_updated AFTER UPDATE OF id, content, tool_name, tool_calls ON main.messages BEGIN " +
		"INSERT OR IGNORE INTO bulk_fts_changed (id) VALUES (old.id), (new.id); END",
}

// startBuilders starts the builders of both FTS tables (see ftsBuilder) and
// the triggers that record what changes behind them.
func (p *Projection) startBuilders(ctx context.Context) error {
	for _, stmt := range append(changeTriggers, contentTriggers...) {
		if _, err := p.conn.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	var done int64
	if err := p.conn.QueryRowContext(ctx, "SELECT COALESCE(max(id), 0) FROM main."+ftsTables[0]+"_content").Scan(&done); err != nil {
		return err
	}
	p.contentDone = done
	for _, table := range ftsTables {
		b, err := startFTSBuilder(p.path, table)
		if err != nil {
			p.abortBuilders()
			return err
		}
		p.builders = append(p.builders, b)
	}
	return nil
}

// abortBuilders stops the builders and removes their scratch files.
func (p *Projection) abortBuilders() {
	for _, b := range p.builders {
		b.abort()
	}
	p.builders = nil
}

// offerBuilders tells the builders how far the messages are committed.
func (p *Projection) offerBuilders(ctx context.Context) error {
	if len(p.builders) == 0 {
		return nil
	}
	upto, err := maxMessageID(ctx, p.conn)
	if err != nil {
		return err
	}
	for _, b := range p.builders {
		b.offer(upto)
	}
	return nil
}

func maxMessageID(ctx context.Context, q queryer) (int64, error) {
	var id int64
	err := q.QueryRowContext(ctx, "SELECT COALESCE(max(id), 0) FROM messages").Scan(&id)
	return id, err
}

// finishBuilders has the builders index the rest and put right what
// changed behind them, then installs what they built.
func (p *Projection) finishBuilders(ctx context.Context) (err error) {
	builders := p.builders
	p.builders = nil
	defer func() {
		for _, b := range builders {
			b.abort()
		}
	}()
	upto, err := maxMessageID(ctx, p.conn)
	if err != nil {
		return err
	}
	changed, err := changedIDs(ctx, p.conn)
	if err != nil {
		return err
	}
	// Each table is copied in as soon as its builder is done (the smaller
	// unicode61 index first, while the trigram one may still be working).
	copied, ready, byTable := map[string]string{}, map[string]<-chan error{}, map[string]*ftsBuilder{}
	for i, b := range builders {
		schema := "build" + strconv.Itoa(i)
		if _, err := p.conn.ExecContext(ctx, "ATTACH DATABASE '"+strings.ReplaceAll(b.scratch, "'", "''")+"' AS "+schema); err != nil {
			return err
		}
		defer func() {
			if _, dErr := p.conn.ExecContext(context.Background(), "DETACH DATABASE "+schema); dErr != nil {
				err = errors.Join(err, dErr)
			}
		}()
		copied[b.table] = schema
		byTable[b.table] = b
		done := make(chan error, 1)
		ready[b.table] = done
		go func() { done <- b.finish(upto, changed) }()
	}
	return p.installFTS(ctx, copied, ready, byTable)
}

// ftsFirstSegmentRow is the first %_data id of a segment's pages (segment
// 1, page 0: FTS5 numbers the pages of segment n from n<<37); the rows
// below are the averages (1) and structure (10) records.
const ftsFirstSegmentRow = "137438953472"

// copyPassStmts returns the statements that copy the rows the passes of
// a builder added to table, from the scratch file attached as schema.
func copyPassStmts(table, schema string, passes []builtPass) []string {
	var stmts []string
	for _, pass := range passes {
		for _, seg := range pass.segments {
			stmts = append(stmts,
				fmt.Sprintf("INSERT INTO main.%s_data SELECT * FROM %s.%s_data WHERE id >= %d AND id < %d", table, schema, table, seg<<37, (seg+1)<<37),
				fmt.Sprintf("INSERT INTO main.%s_idx SELECT * FROM %s.%s_idx WHERE segid = %d", table, schema, table, seg))
		}
		stmts = append(stmts, fmt.Sprintf("INSERT INTO main.%s_docsize SELECT * FROM %s.%s_docsize WHERE id > %d AND id <= %d",
			table, schema, table, pass.from, pass.to))
	}
	return stmts
}

// copyBuilt writes the %_content rows of the messages committed since
// the last copy (bulkcontent.go) and copies into the state file what the
// builders indexed since then (whole segments and their %_docsize rows),
// so that the end of the load copies only its last pass. It runs between
// two bulk transactions, and only for builders between passes (a builder in a
// pass is copied next time; one whose scratch file was rewritten is
// copied whole at the end). The index stays invisible until the end:
// the state file's structure record lists no segment until installFTS.
func (p *Projection) copyBuilt(ctx context.Context) (err error) {
	type taken struct {
		b       *ftsBuilder
		schema  string
		passes  []builtPass
		release func()
	}
	var ts []taken
	defer func() {
		for _, t := range ts {
			t.release()
		}
	}()
	upto, err := maxMessageID(ctx, p.conn)
	if err != nil {
		return fmt.Errorf("copy built index: %w", err)
	}
	var stmts []string
	if upto > p.contentDone {
		stmts = contentCopyStmts(p.contentDone, upto)
	}
	for i, b := range p.builders {
		passes, rewritten, release, ok := b.takePasses()
		if !ok {
			continue
		}
		if rewritten || len(passes) == 0 {
			release()
			continue
		}
		ts = append(ts, taken{b: b, schema: "build" + strconv.Itoa(i), passes: passes, release: release})
	}
	if len(ts) == 0 && len(stmts) == 0 {
		return nil
	}
	for _, t := range ts {
		if _, err := p.conn.ExecContext(ctx, "ATTACH DATABASE '"+strings.ReplaceAll(t.b.scratch, "'", "''")+"' AS "+t.schema); err != nil {
			return fmt.Errorf("copy built index: %w", err)
		}
		defer func() {
			if _, dErr := p.conn.ExecContext(context.Background(), "DETACH DATABASE "+t.schema); dErr != nil {
				err = errors.Join(err, fmt.Errorf("copy built index: %w", dErr))
			}
		}()
	}
	// BEGIN, not BEGIN IMMEDIATE: the scratch files are only read.
	if _, err := p.conn.ExecContext(ctx, "BEGIN"); err != nil {
		return fmt.Errorf("copy built index: %w", err)
	}
	for _, t := range ts {
		stmts = append(stmts, copyPassStmts(t.b.table, t.schema, t.passes)...)
	}
	for _, stmt := range stmts {
		if _, err := p.conn.ExecContext(ctx, stmt); err != nil {
			_, rbErr := p.conn.ExecContext(context.Background(), "ROLLBACK")
			return errors.Join(fmt.Errorf("copy built index: %w", err), rbErr)
		}
	}
	if _, err := p.conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("copy built index: %w", err)
	}
	p.contentDone = max(p.contentDone, upto)
	for _, t := range ts {
		t.b.copied(len(t.passes))
	}
	return nil
}

// changedIDs returns the ids the change triggers recorded.
func changedIDs(ctx context.Context, conn *sql.Conn) ([]int64, error) {
	rows, err := conn.QueryContext(ctx, "SELECT id FROM temp.bulk_fts_changed ORDER BY id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// EndBulk builds both FTS indexes from the messages table and puts the
// triggers back (see BeginBulk). Without a bulk load under way it does
// nothing.
func (p *Projection) EndBulk(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("end bulk load: %w", ErrClosed)
	}
	if err := p.finishBulk(ctx); err != nil {
		return fmt.Errorf("end bulk load: %w", err)
	}
	return nil
}

// inBulk reports whether metaBulk is set.
func inBulk(ctx context.Context, q queryer) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, "SELECT count(*) FROM state_meta WHERE key = ?", metaBulk).Scan(&n)
	return n > 0, err
}

// finishBulk is EndBulk with p.mu held; Open calls it too.
func (p *Projection) finishBulk(ctx context.Context) error {
	if err := p.commitBulkTx(ctx); err != nil {
		return err
	}
	p.bulk = false
	bulk, err := inBulk(ctx, p.conn)
	if err != nil || !bulk {
		p.abortBuilders()
		return err
	}
	if len(p.builders) > 0 {
		if err := p.finishBuilders(ctx); err != nil {
			return err
		}
		return p.reopenWriter()
	}
	// Builders of a load that did not finish leave their scratch files.
	for _, table := range ftsTables {
		removeDB(builderScratch(p.path, table))
	}
	// The scratch file exists before the build starts so that it can be
	// attached now: ATTACH cannot run inside installFTS's transaction.
	scratch := p.path + ".fts-build"
	removeDB(scratch)
	defer removeDB(scratch)
	if err := createPrivate(scratch); err != nil {
		return err
	}
	if _, err := p.conn.ExecContext(ctx, "ATTACH DATABASE '"+strings.ReplaceAll(scratch, "'", "''")+"' AS build"); err != nil {
		return err
	}
	built := make(chan error, 1)
	go func() { built <- buildFTS(ctx, p.path, scratch, sideTable) }()
	err = p.installFTS(ctx, map[string]string{sideTable: "build"}, map[string]<-chan error{sideTable: built}, nil)
	if _, dErr := p.conn.ExecContext(context.Background(), "DETACH DATABASE build"); dErr != nil {
		err = errors.Join(err, dErr)
	}
	if err != nil {
		return err
	}
	return p.reopenWriter()
}

// reopenWriter replaces the writer connection by a fresh one: nothing
// FTS5 cached about the tables (its bulk configuration included) survives,
// nor the temporary triggers, and the page cache is back to its usual size.
func (p *Projection) reopenWriter() error {
	if err := p.closeWriter(); err != nil {
		return err
	}
	p.stmts, p.conn, p.wdb = nil, nil, nil
	return p.openWriter()
}

// sideTable is the FTS table a bulk load builds in a scratch file (the
// smaller index: less to copy); mainTable is built in the file itself.
const (
	sideTable = "messages_fts"
	mainTable = "messages_fts_trigram"
)

// ftsText is the text Hermes' triggers index for a messages row.
var ftsText = ftsTextOf("")

// ftsTextOf is ftsText of the row named row in a trigger ("new", "old"),
// or of the row of the statement's table ("").
func ftsTextOf(row string) string {
	if row != "" {
		row += "."
	}
	return "COALESCE(" + row + "content, '') || ' ' || COALESCE(" + row + "tool_name, '') || ' ' || COALESCE(" + row + "tool_calls, '')"
}

// ftsFill fills an empty FTS table from the messages of schema src, as
// Hermes' insert trigger would.
func ftsFill(table, src string) string {
	return "INSERT INTO " + table + "(rowid, content) SELECT id, " + ftsText + " FROM " + src + ".messages ORDER BY id"
}

// bulkConfigRestore returns the statements that put mainTable's
// configuration rows for the keys bulkConfig sets back as they are now
// (a migration may have set them; without a row, FTS5's default).
func bulkConfigRestore(ctx context.Context, conn *sql.Conn) ([]string, error) {
	stmts := []string{"DELETE FROM main." + mainTable + "_config WHERE k IN ('hashsize', 'automerge')"}
	rows, err := conn.QueryContext(ctx, "SELECT k, quote(v) FROM main."+mainTable+"_config WHERE k IN ('hashsize', 'automerge')")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		stmts = append(stmts, "INSERT INTO main."+mainTable+"_config (k, v) VALUES ('"+k+"', "+v+")")
	}
	return stmts, rows.Err()
}

// bulkConfig sets FTS5's bulk configuration of table (a large term hash,
// no automatic merges: one segment per bulkHashSize of postings).
func bulkConfig(table string) []string {
	return []string{
		fmt.Sprintf("INSERT INTO %s(%s, rank) VALUES ('hashsize', %d)", table, table, bulkHashSize),
		fmt.Sprintf("INSERT INTO %s(%s, rank) VALUES ('automerge', 0)", table, table),
	}
}

// scratchDSN opens a scratch file of a bulk load's FTS build: no journal
// and no fsync (it is thrown away after any failure), 64 KiB pages (FTS5's
// ~4 KB blocks are rows of it: fewer pages and writes to build and read
// back; a 1M-event rebuild's builders 15.4 -> 14.3 CPU-s), and the state file's
// busy timeout, which also covers the state file the build attaches: a
// read of it waits out a commit or WAL checkpoint of the apply instead of
// failing with SQLITE_BUSY.
func scratchDSN(path string, pragmas ...string) string {
	q := url.Values{}
	for _, pragma := range append([]string{"synchronous(OFF)", "journal_mode(OFF)", "cache_size(-16384)", "page_size(65536)",
		fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds())}, pragmas...) {
		q.Add("_pragma", pragma)
	}
	return (&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String()
}

// buildFTS creates table (Hermes' DDL) in a new scratch file and fills it
// from the messages of the file at src.
func buildFTS(ctx context.Context, src, scratch, table string) error {
	ddl, err := ftsDDL(table)
	if err != nil {
		return err
	}
	db, err := sql.Open("sqlite", scratchDSN(scratch))
	if err != nil {
		return fmt.Errorf("build %s: %w", table, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("build %s: %w", table, err)
	}
	defer conn.Close()
	for _, stmt := range append(append([]string{
		"ATTACH DATABASE '" + strings.ReplaceAll((&url.URL{Scheme: "file", Path: src, RawQuery: "mode=ro"}).String(), "'", "''") + "' AS src",
		ddl,
	}, bulkConfig(table)...), "BEGIN", ftsFill(table, "src"), "COMMIT") {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("build %s: %w", table, err)
		}
	}
	return nil
}

// installFTS fills the FTS tables in one transaction: each table of
// copied gets the shadow tables of the scratch file attached under that
// schema name once that file is complete (ready); with builders (a load
// with builders, by table) %_content is written from the messages
// (bulkcontent.go) and, unless the builder's scratch file was rewritten,
// only what copyBuilt did not copy is; a table not in copied
// (mainTable) is built here from the messages meanwhile. The triggers are
// created again, the FTS configuration is left as Hermes' DDL made it and
// metaBulk is cleared. It returns once every ready channel has answered.
func (p *Projection) installFTS(ctx context.Context, copied map[string]string, ready map[string]<-chan error, builders map[string]*ftsBuilder) (err error) {
	withBuilders := builders != nil
	// wait has the scratch files complete (or failed): they are removed
	// after this returns.
	wait := func(table string) error {
		ch, ok := ready[table]
		if !ok {
			return nil
		}
		delete(ready, table)
		return <-ch
	}
	defer func() {
		for table := range ready {
			err = errors.Join(err, wait(table))
		}
	}()
	// BEGIN, not BEGIN IMMEDIATE, which would lock the attached scratch
	// files that the builders are writing: the first write locks the file.
	if _, err := p.conn.ExecContext(ctx, "BEGIN"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_, rbErr := p.conn.ExecContext(context.Background(), "ROLLBACK")
			err = errors.Join(err, rbErr)
		}
	}()
	exec := func(stmts ...string) error {
		for _, stmt := range stmts {
			if _, err := p.conn.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("%.60s: %w", stmt, err)
			}
		}
		return nil
	}
	// Both FTS indexes are empty (a bulk load starts at position 0 and
	// writes neither). Their %_content tables hold the text of the
	// messages copied so far when builders ran (bulkcontent.go; the rest
	// is written here), else they are emptied here and filled again with
	// the indexes: a load finished by Open may have written some of them
	// before it stopped.
	var stmts []string
	if !withBuilders {
		// Segments copyBuilt copied before the load stopped go too.
		for _, table := range ftsTables {
			stmts = append(stmts, "DELETE FROM main."+table+"_content", "DELETE FROM main."+table+"_docsize",
				"DELETE FROM main."+table+"_idx", "DELETE FROM main."+table+"_data WHERE id >= "+ftsFirstSegmentRow)
		}
	}
	if withBuilders {
		// The %_content rows of the last commit, and of any message
		// inserted below an id already copied.
		upto, err := maxMessageID(ctx, p.conn)
		if err != nil {
			return err
		}
		if upto > p.contentDone {
			if err := exec(contentCopyStmts(p.contentDone, upto)...); err != nil {
				return err
			}
		}
		if err := p.contentFillMissing(ctx); err != nil {
			return err
		}
	}
	var restore []string
	if _, ok := copied[mainTable]; !ok {
		if restore, err = bulkConfigRestore(ctx, p.conn); err != nil {
			return err
		}
		stmts = append(append(stmts, bulkConfig(mainTable)...), ftsFill(mainTable, "main"))
	}
	if err := exec(stmts...); err != nil {
		return err
	}
	for _, table := range []string{sideTable, mainTable} {
		schema, ok := copied[table]
		if !ok {
			continue
		}
		if err := wait(table); err != nil {
			return err
		}
		stmts = nil
		if b := builders[table]; b != nil && !b.rewritten {
			// The passes copyBuilt did not copy, then the averages and
			// structure records.
			stmts = append(copyPassStmts(table, schema, b.passes),
				"DELETE FROM main."+table+"_data WHERE id < "+ftsFirstSegmentRow,
				"INSERT INTO main."+table+"_data SELECT * FROM "+schema+"."+table+"_data WHERE id < "+ftsFirstSegmentRow)
		} else {
			for _, s := range ftsShadowCopy { // the averages and structure records too
				if s == "_content" && withBuilders {
					continue // written by the apply
				}
				stmts = append(stmts, "DELETE FROM main."+table+s,
					"INSERT INTO main."+table+s+" SELECT * FROM "+schema+"."+table+s)
			}
		}
		// An index that FTS5 moved to a later format version (at its
		// first secure delete) keeps it.
		version := "(SELECT v FROM " + schema + "." + table + "_config WHERE k = 'version')"
		if err := exec(append(stmts, "UPDATE main."+table+"_config SET v = "+version+" WHERE k = 'version' AND v < "+version)...); err != nil {
			return err
		}
	}
	stmts = nil
	_, ddl := ftsTriggers()
	stmts = append(append(stmts, ddl...), restore...)
	return exec(append(stmts,
		"DELETE FROM state_meta WHERE key = '"+metaBulk+"'",
		"COMMIT")...)
}

// removeDB removes a scratch database file and its journals.
func removeDB(path string) {
	for _, suffix := range []string{"", "-journal", "-wal", "-shm"} {
		_ = os.Remove(path + suffix)
	}
}
