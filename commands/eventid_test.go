package commands

import (
	"strconv"
	"testing"

	"github.com/google/uuid"
)

// TestCommandIdentity_EventIDs: a command id the caller gave derives the
// name-based ids it always did (a retry, even by a later build, proposes
// the same ids); a command without one gets ids that keep its time-ordered
// prefix, so that later commands' ids sort after earlier ones', and that
// differ by stream and index and are the same when proposed again.
func TestCommandIdentity_EventIDs(t *testing.T) {
	t.Run("given command id", func(t *testing.T) {
		for _, tc := range []struct {
			commandID, stream string
			i                 int
		}{
			{"boot-1/agent:main:telegram:dm:3", "lane:agent:main:telegram:dm:3", 0},
			{"req-42", "transcript:20260509_100000_abcd1234", 2},
		} {
			// Given a command id from the caller,
			cmd := identify(tc.commandID)
			// when its event ids are derived,
			got := cmd.eventID(tc.stream, tc.i)
			// then they are uuid v5 of the command, stream and index.
			want := uuid.NewSHA1(eventIDNamespace, []byte(tc.commandID+"\x00"+tc.stream+"\x00"+strconv.Itoa(tc.i))).String()
			if got != want {
				t.Errorf("eventID(%q, %q, %d) = %s, want %s", tc.commandID, tc.stream, tc.i, got, want)
			}
			if cmd.id != tc.commandID {
				t.Errorf("identity id = %q, want %q", cmd.id, tc.commandID)
			}
		}
	})
	t.Run("fresh commands", func(t *testing.T) {
		// Given commands without a caller's id, made one after another,
		var cmds []commandIdentity
		for range 2000 {
			cmds = append(cmds, identify(""))
		}
		cmds = append(cmds, generated("append_message/s1/0badcafe"))
		seen := map[string]bool{}
		prev := ""
		for k, cmd := range cmds {
			if k < len(cmds)-1 {
				if u, err := uuid.Parse(cmd.id); err != nil || u.Version() != 7 {
					t.Fatalf("fresh command id %q is not a UUIDv7 (%v)", cmd.id, err)
				}
			}
			for _, stream := range []string{"lane:a", "lane:b"} {
				for i := range 3 {
					// when their event ids are derived,
					id := cmd.eventID(stream, i)
					u, err := uuid.Parse(id)
					if err != nil {
						t.Fatalf("event id %q: %v", id, err)
					}
					// then each is a UUIDv7 with the command's time prefix,
					if u.Version() != 7 || u.Variant() != uuid.RFC4122 || id[:18] != cmd.order.String()[:18] {
						t.Fatalf("event id %s of command %s: version %d, variant %v, want the command's prefix", id, cmd.order, u.Version(), u.Variant())
					}
					// the same when proposed again,
					if again := cmd.eventID(stream, i); again != id {
						t.Fatalf("event id derived twice: %s then %s", id, again)
					}
					// unique,
					if seen[id] {
						t.Fatalf("event id %s derived twice for different events", id)
					}
					seen[id] = true
				}
				// and after every id of the commands before.
				id := cmd.eventID(stream, 0)
				if id[:18] <= prev {
					t.Fatalf("command %d: event id %s sorts before the previous command's prefix %s", k, id, prev)
				}
			}
			prev = cmd.eventID("lane:a", 0)[:18]
		}
	})
}
