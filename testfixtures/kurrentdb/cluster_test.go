package kurrentdb_test

import (
	"testing"

	"hermes/testfixtures/kurrentdb"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
)

func connect(t *testing.T, url string) *esdb.Client {
	t.Helper()
	cfg, err := esdb.ParseConnectionString(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = esdb.NoopLogging()
	c, err := esdb.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestClusterOfThree(t *testing.T) {
	srv, err := kurrentdb.Start(kurrentdb.WithFollowers("127.0.0.1:0", "127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	addrs := srv.Addrs()
	if len(addrs) != 3 {
		t.Fatalf("Addrs() = %v, want 3 nodes", addrs)
	}
	seeds := "esdb://" + addrs[0] + "," + addrs[1] + "," + addrs[2] + "?tls=false&maxDiscoverAttempts=3"

	// Writes through a follower land in the one database.
	follower := connect(t, seeds+"&nodePreference=follower")
	leader := connect(t, seeds+"&nodePreference=leader")
	appendN(t, follower, "s", esdb.NoStream{}, 2, "via-follower")
	if got, err := readStream(t, leader, "s", esdb.ReadStreamOptions{}); err != nil || len(got) != 2 {
		t.Errorf("read on the leader = %v, %v; want the 2 events written through a follower", revisions(got), err)
	}

	// Persistent subscription management needs the leader: a follower
	// answers not-leader, and the client reconnects to the leader it names.
	err = follower.CreatePersistentSubscription(t.Context(), "s", "g", esdb.PersistentStreamSubscriptionOptions{})
	if code(err) != esdb.ErrorCodeNotLeader {
		t.Fatalf("CreatePersistentSubscription on a follower error = %v, want NotLeader", err)
	}
	if err := follower.CreatePersistentSubscription(t.Context(), "s", "g", esdb.PersistentStreamSubscriptionOptions{}); err != nil {
		t.Fatalf("CreatePersistentSubscription after reconnecting error = %v", err)
	}
	err = leader.CreatePersistentSubscription(t.Context(), "s", "g", esdb.PersistentStreamSubscriptionOptions{})
	if code(err) != esdb.ErrorCodeResourceAlreadyExists {
		t.Errorf("second CreatePersistentSubscription error = %v, want ResourceAlreadyExists", err)
	}
}
