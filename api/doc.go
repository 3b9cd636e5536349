// Package api is the HTTP interface of hermes serve: the JSON endpoints of
// the API contract (../shared/design/API.md) on chi, Server-Sent Events for
// the live log, bearer-token auth, request limits, Prometheus metrics and
// the manual test clock.
//
// Handlers decode and validate the request, call one command or one query,
// and encode the answer; errors become statuses in exactly one function
// (writeError). No rules live here (they are in domain) and no storage (it
// is behind the commands and projections this package is given).
package api
