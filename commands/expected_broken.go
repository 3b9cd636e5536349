//go:build hermes_broken_expected_version

package commands

import "hermes/events"

// laneExpected is deliberately broken in this build (tag
// hermes_broken_expected_version): lane appends ignore the version their
// decision was made on, so two nodes deciding on one lane at once both
// append. Only the chaos tests build it, to show the checkers catch the
// fork; no release is ever built with the tag.
func laneExpected(uint64) events.ExpectedVersion { return events.AnyVersion() }
