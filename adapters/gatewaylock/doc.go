// Package gatewaylock makes hermes single-instance per home: an exclusive
// OS file lock on <home>/gateway.lock, released by the kernel when the
// process dies (so a SIGKILL never leaves a stale lock), plus a PID record
// (pid and process start time) inside the file so a refused second process
// can say who holds the home.
//
// It must not decide anything about sessions; it only guards the home.
package gatewaylock
