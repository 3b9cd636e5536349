// Importcheck enforces the layer arrows of hermes (design/STYLE.md) on the
// module it is run in:
//
//	events       standard library only, and JSON v2 (github.com/go-json-experiment/json,
//	             Go 1.27's encoding/json/v2)
//	domain       events
//	commands     domain, events
//	projections  events, domain
//	adapters/<x> events, commands, projections; never another adapter, domain, api or cmd
//	api          commands, projections, events, domain
//	node         api, commands, projections, adapters, events, domain; imported only by cmd
//	testfixtures anything but node, and imported only from _test.go files
//	cmd          anything
//
// events and domain also may not import third-party packages, packages that
// do I/O, read the clock, draw random numbers, log, carry a context or share
// state (os, net, log, math/rand, context, sync, …), nor use time.Now,
// time.Since and the other clock reads and timers of package time.
//
// Usage, from anywhere inside the module:
//
//	go run ./cmd/importcheck [dir]
//
// It prints one line per violation and exits 1 if there is any, 2 if the
// module cannot be read. Test files are not checked: tests may use anything.
// It uses only the standard library, so it runs before any dependency is
// downloaded.
package main
