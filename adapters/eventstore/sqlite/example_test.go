package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/events"
)

// The embedded store: append to a lane's stream under an optimistic
// concurrency condition, read the stream back, and see a stale writer
// refused.
func Example() {
	dir, err := os.MkdirTemp("", "hermes-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	now := time.Date(2026, 5, 9, 10, 0, 0, 0, time.UTC)
	store, err := sqlite.Open(filepath.Join(dir, "events.db"), sqlite.WithClock(func() time.Time { return now }))
	if err != nil {
		panic(err)
	}
	defer store.Close()
	ctx := context.Background()

	stream := events.LaneStream("agent:main:telegram:dm:99")
	res, err := store.Append(ctx, stream, events.NoStream(), []events.Proposed{
		{ID: "e1", Event: events.Touched{At: now}},
		{ID: "e2", Event: events.Touched{At: now.Add(time.Minute)}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("appended versions", res.Versions, "at positions", res.Positions)

	envs, err := store.ReadStream(ctx, stream, 1, 10, events.Forwards)
	if err != nil {
		panic(err)
	}
	for _, env := range envs {
		fmt.Println(env.Stream, env.Version, env.Type, env.Event.OccurredAt().Format(time.Kitchen))
	}

	// A writer that still believes the stream is new is refused.
	_, err = store.Append(ctx, stream, events.NoStream(), []events.Proposed{{ID: "e3", Event: events.Touched{At: now}}})
	fmt.Println(err)
	fmt.Println(errors.Is(err, events.ErrWrongExpectedVersion))
	// Output:
	// appended versions [1 2] at positions [1 2]
	// lane-agent:main:telegram:dm:99 1 lane.touched.v1 10:00AM
	// lane-agent:main:telegram:dm:99 2 lane.touched.v1 10:01AM
	// append lane-agent:main:telegram:dm:99: expected no stream, stream is at version 2
	// true
}
