package postgres

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"hermes/events"
	pgtest "hermes/testfixtures/postgres"
	"hermes/testfixtures/storetest"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) events.Store {
		return openTemp(t)
	})
}

var schemas atomic.Int64

// tempSchema returns the URL of a schema of its own for t on the shared
// cluster, dropped when t ends.
func tempSchema(t testing.TB) string {
	t.Helper()
	return schemaOn(t, pgtest.Shared(t).URL())
}

// schemaOn returns base with a new schema for t, dropped when t ends.
func schemaOn(t testing.TB, base string) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), schemas.Add(1))
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(SchemaParam, name)
	u.RawQuery = q.Encode()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return u.String()
}

func openTemp(t testing.TB, opts ...Option) *Store {
	t.Helper()
	return openAt(t, tempSchema(t), opts...)
}

func openAt(t testing.TB, url string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(context.Background(), url, opts...)
	if err != nil {
		t.Fatalf("Open error = %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close() error = %v", err)
		}
	})
	return s
}
