// Package events is the contract of hermes: every fact the system records, the
// envelope it is stored in, the JSON codec (with schema versions and upcasters)
// and the event-store port.
//
// Events are stored forever and read by the write side and by every read model,
// so their shape must not follow domain refactors. This package imports only the
// standard library and JSON v2 (github.com/go-json-experiment/json, Go 1.27's
// encoding/json/v2), reads no clock, draws no random numbers and does no I/O.
// A changed event shape is a new persisted type name plus an upcaster in
// codec.go, never an edit of a stored one; the golden files in testdata/ pin
// the stored JSON of every type.
package events
