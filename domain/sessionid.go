package domain

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

var entropyHex = regexp.MustCompile(`^[0-9a-f]{8}$`)

// NewSessionID formats a session id, YYYYMMDD_HHMMSS_<8 hex>, from now in loc
// and eight lowercase hex characters of entropy supplied by the caller.
func NewSessionID(now time.Time, loc *time.Location, entropy string) (string, error) {
	if !entropyHex.MatchString(entropy) {
		return "", fmt.Errorf("%w: session id entropy %q is not 8 lowercase hex characters", ErrInvalidArgument, entropy)
	}
	if loc == nil {
		loc = time.UTC
	}
	return now.In(loc).Format("20060102_150405") + "_" + entropy, nil
}

// maxSessionIDLength bounds ids taken from outside (switch targets, paths).
const maxSessionIDLength = 128

// ValidateSessionID rejects ids that are empty, too long, or unsafe as a file
// or path component: containing "..", "/", "\" or a control character, or
// starting with a drive letter. Hermes skips such entries on load; hermes
// refuses them at the door.
func ValidateSessionID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty", ErrInvalidSessionID)
	case len(id) > maxSessionIDLength:
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalidSessionID, maxSessionIDLength)
	case strings.Contains(id, ".."), strings.ContainsAny(id, `/\`):
		return fmt.Errorf("%w: %q contains a path separator or \"..\"", ErrInvalidSessionID, id)
	case len(id) >= 2 && id[1] == ':' && isASCIILetter(id[0]):
		return fmt.Errorf("%w: %q starts with a drive letter", ErrInvalidSessionID, id)
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: %q contains a control character", ErrInvalidSessionID, id)
		}
	}
	return nil
}

func isASCIILetter(b byte) bool { return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') }
