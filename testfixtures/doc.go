// Package testfixtures holds what tests share: a manual clock, given/when/then
// scenarios for lanes, time travel over recorded histories, and (in
// subpackages) contract suites for the ports. It is imported only from
// _test.go files; production code never depends on it.
package testfixtures
