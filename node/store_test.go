package node

import "testing"

func TestStoreSpec(t *testing.T) {
	for _, tc := range []struct {
		url      string
		postgres bool
		shown    string
	}{
		{"", false, "embedded"},
		{"esdb://admin:changeit@db:2113?tls=false", false, "esdb://…@db:2113?tls=false"},
		{"postgres://hermes:s3cret@db:5432/app?sslmode=require", true, "postgres://…@db:5432/app?sslmode=require"},
		{"PostgreSQL://db/app?user=hermes&password=s3cret&hermes_schema=a", true, "PostgreSQL://db/app?user=hermes&password=…&hermes_schema=a"},
	} {
		s := StoreSpec{URL: tc.url}
		if s.Postgres() != tc.postgres {
			t.Errorf("StoreSpec{%q}.Postgres() = %v, want %v", tc.url, s.Postgres(), tc.postgres)
		}
		if got := s.String(); got != tc.shown {
			t.Errorf("StoreSpec{%q}.String() = %q, want %q", tc.url, got, tc.shown)
		}
	}
}
