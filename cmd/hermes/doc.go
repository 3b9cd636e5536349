// Command hermes is the session layer of an AI-agent messaging gateway:
// `hermes serve` runs the HTTP API on the embedded event store, `hermes
// events tail` explains a lane's history, `hermes sessions`, `hermes search`
// and `hermes projections` inspect and rebuild the read models.
//
// This package is the command line only: flags, configuration, what is
// printed, and exit codes. The server itself (start recovery, erasure, the
// live rebuild, healing, storage-full retries, leases, background duties,
// backups) is package node: serve turns its flags into a node.Config and
// runs node.Open, Run and Close; the offline commands call node's parts.
// Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error, 75
// restart requested (a service manager should start hermes again).
package main
