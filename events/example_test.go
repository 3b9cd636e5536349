package events_test

import (
	"fmt"
	"time"

	"hermes/events"
)

// Events are stored as their type name and JSON; Decode turns the two back
// into the Go value (upcasting older shapes to the current one).
func ExampleDecode() {
	data, err := events.Encode(events.Touched{At: time.Date(2026, 5, 9, 10, 30, 0, 0, time.UTC)})
	if err != nil {
		panic(err)
	}
	fmt.Println(events.TypeTouched, string(data))

	e, err := events.Decode(events.TypeTouched, data)
	if err != nil {
		panic(err)
	}
	touched := e.(events.Touched)
	fmt.Println(touched.EventType(), touched.OccurredAt().Format(time.RFC3339))

	_, err = events.Decode("lane.no_such_event.v1", []byte(`{}`))
	fmt.Println(err)
	// Output:
	// lane.touched.v1 {"at":"2026-05-09T10:30:00Z"}
	// lane.touched.v1 2026-05-09T10:30:00Z
	// decode "lane.no_such_event.v1": unknown event type
}
