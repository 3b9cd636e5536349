// Package hooks delivers hermes' events to the outside world: HTTP webhooks
// fed from the event store by position, and the on_session_finalize hook of
// the expiry watcher.
//
// The [Router] subscribes to the store from a durable checkpoint
// (<dir>/hooks.checkpoint), publishes each envelope as a watermill message on
// an in-process GoChannel (blocking until every subscriber acked, so the
// order is the log's), and one watermill handler per webhook POSTs it with
// retries and backoff. An event a webhook still refuses after its retries is
// written to the poison log (<dir>/hooks.poison.jsonl) and delivery moves
// on. The checkpoint advances only after every webhook delivered or poisoned
// an event, so delivery is at least once across crashes; receivers
// de-duplicate by the X-Hermes-Event-Id header. Lease events (lease.*, the
// coordination of several nodes) are not delivered.
//
// With several nodes on one store only the holder of the leader lease runs
// the router (node/leases.go); the lease events carry the checkpoint it
// reached, and [AdvanceCheckpoint] moves a new holder's checkpoint to it
// before it runs.
//
// It never reads from an append call, never writes a read model and never
// appends to the store: it only reads the log. It imports events and
// commands (the FinalizeHook port), not domain and not other adapters.
package hooks
