package transcripts

import (
	"context"
	"fmt"
	"strings"
)

// During a bulk load with builders, the %_content shadow tables of both
// FTS tables (one row per message: its id and ftsText, as Hermes' FTS
// triggers leave them) are written by the state file's writer, so that
// only the index (%_data, %_idx, %_docsize) is copied in from the
// builders: the text is written once instead of copied after it.
//
// The rows of the messages a bulk transaction inserted are copied from the
// messages table after its commit, in ascending id order, by one INSERT …
// SELECT per table (copyBuilt, between two bulk transactions), up to the
// highest id committed; contentDone is how far that went. An insert
// trigger per message (the earlier way) cost the writer, the one goroutine
// every write of the load goes through, about a quarter of its time: a
// trigger program per row, the text joined twice, the content pages in
// every statement's journal. The messages deleted or rewritten meanwhile
// are followed by temporary triggers (contentTriggers), which only fire on
// those changes; a rewrite of a row not copied yet writes its row there,
// which the copy then replaces with the same text. Rows inserted below an
// id already copied (an import keeps Hermes' ids) are found at the end by
// comparing the counts of rows, and copied then (contentFillMissing).

// contentTriggers are the temporary triggers that keep the %_content rows
// already written in step with the messages deleted or rewritten during a
// bulk load with builders. Like changeTriggers they live on the writer
// connection only.
var contentTriggers = func() []string {
	var del, upd []string
	for _, table := range ftsTables {
		c := "main." + table + "_content"
		del = append(del, "DELETE FROM "+c+" WHERE id = old.id;")
		upd = append(upd, "DELETE FROM "+c+" WHERE id = old.id;", "INSERT OR REPLACE INTO "+c+" (id, c0) VALUES (new.id, "+ftsTextOf("new")+");")
	}
	return []string{
		"CREATE TEMP TRIGGER IF NOT EXISTS bulk_fts_content_deleted AFTER DELETE ON main.messages BEGIN " + strings.Join(del, " ") + " END",
		"CREATE TEMP TRIGGER IF NOT EXISTS bulk_fts_content_updated AFTER UPDATE OF id, content, tool_name, tool_calls ON main.messages BEGIN " +
			strings.Join(upd, " ") + " END",
	}
}()

// contentCopyStmts returns the statements that write the %_content rows
// of both FTS tables for the messages with ids in (from, to]: the first
// table's from the messages, the second's from the first's (the same
// rows). A row there already (a rewrite fired contentTriggers) is
// replaced by the same text.
func contentCopyStmts(from, to int64) []string {
	first, second := "main."+ftsTables[0]+"_content", "main."+ftsTables[1]+"_content"
	return []string{
		fmt.Sprintf("INSERT OR REPLACE INTO %s (id, c0) SELECT id, %s FROM main.messages WHERE id > %d AND id <= %d ORDER BY id",
			first, ftsText, from, to),
		fmt.Sprintf("INSERT OR REPLACE INTO %s (id, c0) SELECT id, c0 FROM %s WHERE id > %d AND id <= %d ORDER BY id",
			second, first, from, to),
	}
}

// contentFillMissing writes the %_content rows of the messages that have
// none (inserted below an id already copied), in the caller's
// transaction, if the counts of rows say there are any.
func (p *Projection) contentFillMissing(ctx context.Context) error {
	for _, table := range ftsTables {
		c := "main." + table + "_content"
		var rows, content int64
		if err := p.conn.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM main.messages), (SELECT count(*) FROM "+c+")").Scan(&rows, &content); err != nil {
			return fmt.Errorf("count %s rows: %w", c, err)
		}
		if rows == content {
			continue
		}
		if _, err := p.conn.ExecContext(ctx, "INSERT INTO "+c+" (id, c0) SELECT id, "+ftsText+" FROM main.messages WHERE id NOT IN (SELECT id FROM "+c+") ORDER BY id"); err != nil {
			return fmt.Errorf("fill %s: %w", c, err)
		}
	}
	return nil
}
