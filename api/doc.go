// Package api is the HTTP interface of hermes serve: the JSON endpoints of
// the API contract (docs/API.md; api/openapi.json is its OpenAPI form) on
// chi, Server-Sent Events for the live log, bearer-token auth, request
// limits, Prometheus metrics and the manual test clock.
//
// Handlers return an error (handlerFunc); one adapter (serve) answers it,
// and errors become statuses in exactly one function (statusOf, written by
// writeError). Routes are registered through routes: a GET can only be
// registered through routes.get, which first waits until the read models
// reflect this server's writes (read your writes). Path parameters are
// parsed once, into sessionKey and sessionID (withKey, withSessionID).
//
// Request bodies are this package's own types (requests.go), decoded by
// decode[T], checked by their validate method and mapped field by field to
// commands and events: no events or domain type is decoded from a body
// (TestNoStoredTypeDecoded), so the API cannot change the log's schema.
//
// No rules live here (they are in domain) and no storage (it is behind the
// commands and projections this package is given).
package api
