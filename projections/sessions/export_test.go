package sessions

// SetBulkCommitEvents sets how many events a bulk load folds per
// transaction and returns the function that puts it back.
func SetBulkCommitEvents(n int) (restore func()) {
	old := bulkCommitEvents
	bulkCommitEvents = n
	return func() { bulkCommitEvents = old }
}

// SetExportChunk sets how many lanes one read of a sessions.json rewrite
// takes and returns the function that puts it back.
func SetExportChunk(n int) (restore func()) {
	old := exportChunk
	exportChunk = n
	return func() { exportChunk = old }
}
