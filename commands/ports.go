package commands

import (
	"context"

	"hermes/events"
)

// appender is the write half of the event store the commands use: append
// to one stream with an expected version.
type appender interface {
	Append(ctx context.Context, stream string, expected events.ExpectedVersion, proposed []events.Proposed) (events.AppendResult, error)
}

// streamReader is the read half the commands use: one stream, in either
// direction (a lane replayed before deciding, a retried command's events,
// the gateway stream's last run).
type streamReader interface {
	ReadStream(ctx context.Context, stream string, from uint64, count int, dir events.Direction) ([]events.Envelope, error)
}

// EventLog is all the commands need of the event store: appending to a
// stream and reading a stream back. Every events.Store is one; the global
// log, subscriptions and the head are the read side's business.
type EventLog interface {
	appender
	streamReader
}

// AliasSource reports the WhatsApp bridge's identifier alias graph (the
// lid-mapping files). Implemented by adapters/whatsapp.
type AliasSource interface {
	WhatsAppAliases() (map[string][]string, error)
}

// LaneDirectory lists the session key of every lane that has a stream, for
// the commands that sweep all lanes (crash recovery, pruning, expiry). A read
// model implements it; it may lag behind the log, which is harmless because
// each lane is re-read and re-decided before anything is appended.
type LaneDirectory interface {
	SessionKeys(ctx context.Context) ([]string, error)
}
