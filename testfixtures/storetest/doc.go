// Package storetest is the contract suite of the event-store port: the
// behaviour every [events.Store] must have, written once and run by each
// store's own tests: the embedded SQLite store's, and the KurrentDB store's
// (on the emulator in testfixtures/kurrentdb, and on a real server when
// HERMES_TEST_KURRENTDB_URL is set).
//
// It checks only what the port promises: ordering, versions, optimistic
// concurrency, idempotent appends, reads, and catch-up subscriptions. A
// store's own limits and extras (size bounds, file handling, crash safety)
// are tested next to the store. It is imported only from _test.go files and
// must not depend on any concrete store.
package storetest
