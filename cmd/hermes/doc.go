// Command hermes is the session layer of an AI-agent messaging gateway:
// `hermes serve` runs the HTTP API on the embedded event store, `hermes
// events tail` explains a lane's history, `hermes sessions`, `hermes search`
// and `hermes projections` inspect and rebuild the read models.
//
// This package is wiring only: flags, configuration, signals and the
// composition of the other packages. Exit codes: 0 ok, 1 runtime failure,
// 2 usage or configuration error, 75 restart requested (a service manager
// should start hermes again).
package main
