// Package projections holds the read models of hermes and the runner that
// feeds them from the event store: each projection folds events, in global
// position order, into its own SQLite file and writes its checkpoint in the
// same transaction as its rows, so a crash loses both or keeps both.
//
// Projections are disposable: delete their files and a replay from position
// 0 brings them back identical. They never call commands or outside
// services; side effects (hooks, notices) react to events elsewhere.
package projections
