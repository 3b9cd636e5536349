package api

import (
	"errors"
	"fmt"
)

// A read model that meets damage while serving (SQLite reports the file
// corrupt) holds the projections runner (projections.Runner.Held) while the
// node rebuilds both read models from the event log and swaps them in.
// Until the swap every command is refused up front with 503 unavailable and
// Retry-After (nothing appended: an append would wait for a read model that
// cannot apply it), /readyz says healing with the reason, reads are served
// from the read models as they are (a read that meets the damaged pages is
// a 503 too), and requests already waiting for the read models wait on:
// once the new files are in, they are answered.

// errHealing is the refusal of a command while the read models are rebuilt
// after damage.
var errHealing = fmt.Errorf("%w: a read model met damage and is being rebuilt from the event log", errUnavailable)

// healing is the damage the runner is held on, or nil.
func (s *Server) healing() error {
	if s.Runner == nil {
		return nil
	}
	return s.Runner.Held()
}

// refuseWhileHealing is the refusal of a command while healing, or nil.
func (s *Server) refuseWhileHealing() error {
	if err := s.healing(); err != nil {
		return fmt.Errorf("%w; nothing was appended, retry once /readyz is ready (%v)", errHealing, err)
	}
	return nil
}

// degradedWhileHealing turns an internal error met while healing (a read
// of the damaged file) into the healing refusal.
func (s *Server) degradedWhileHealing(err error) error {
	if s.healing() == nil || errors.Is(err, errUnavailable) {
		return err
	}
	return fmt.Errorf("%w; this read could not be served from the damaged file, retry once /readyz is ready (%v)", errHealing, err)
}
