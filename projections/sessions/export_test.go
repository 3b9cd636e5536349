package sessions

// SetBulkCommitEvents sets how many events a bulk load folds per
// transaction and returns the function that puts it back.
func SetBulkCommitEvents(n int) (restore func()) {
	old := bulkCommitEvents
	bulkCommitEvents = n
	return func() { bulkCommitEvents = old }
}
