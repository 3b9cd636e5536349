// Package testfixtures holds what tests share: a manual clock, given/when/then
// scenarios for lanes, time travel over recorded histories, and (in
// subpackages) contract suites for the ports and a look at SQLite files as
// bytes on disk for erasure tests (ondisk). It is imported only from
// _test.go files; production code never depends on it.
package testfixtures
