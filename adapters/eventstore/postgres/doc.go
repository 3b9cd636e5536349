// Package postgres is an event store of hermes on PostgreSQL: an
// implementation of [events.Store] (with batches, snapshots and erasure)
// that several hermes processes on several machines can share.
//
// Work in progress: see the package documentation added with the ordering
// design.
package postgres
