//go:build race

package transcripts

// The race detector slows the transpiled SQLite about tenfold; the property
// test then draws fewer histories unless -rapid.checks says otherwise.
func init() { raceEnabled = true }
