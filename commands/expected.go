//go:build !hermes_broken_expected_version

package commands

import "hermes/events"

// laneExpected is the expected version of a lane command's append: the
// version its decision was made on. (A build with the tag
// hermes_broken_expected_version, made only by the chaos tests to show
// their checkers catch a fork, appends at any version instead.)
func laneExpected(version uint64) events.ExpectedVersion { return events.ExactVersion(version) }
