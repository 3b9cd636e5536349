package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"hermes/adapters/eventstore/sqlite"
	"hermes/events"
)

func appendCreated(ctx context.Context, store *sqlite.Store, i int) error {
	chat := strconv.Itoa(1_000_000 + i)
	key := "agent:main:telegram:dm:" + chat
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err := store.Append(ctx, events.LaneStream(key), events.NoStream(), []events.Proposed{{
		ID: fmt.Sprintf("seed-%d", i),
		Event: events.SessionCreated{SessionKey: key, SessionID: fmt.Sprintf("20260101_000000_%08x", i),
			Origin: events.Source{Platform: "telegram", ChatID: chat, ChatType: "dm"}, Platform: "telegram", ChatType: "dm", At: at},
	}})
	return err
}
