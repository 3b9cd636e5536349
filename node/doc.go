// Package node is one running hermes serve: the event store of a home, the
// read models that follow it, the write side, the HTTP API and the duties
// that run beside them, from the start after a crash to the stop that
// drains the open turns. cmd/hermes turns flags into a Config and calls
// Open, Run and Close.
package node
