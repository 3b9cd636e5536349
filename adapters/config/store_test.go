package config_test

import (
	"testing"

	"hermes/adapters/config"
)

func TestStoreURLAndNodeID(t *testing.T) {
	for _, tc := range []struct {
		env     []string
		wantURL string
		wantID  string
		wantErr bool
	}{
		{env: nil},
		{env: []string{"HERMES_STORE_URL=esdb://localhost:2113?tls=false"}, wantURL: "esdb://localhost:2113?tls=false"},
		{env: []string{"HERMES_STORE_URL=kurrentdb+discover://db.internal:2113"}, wantURL: "kurrentdb+discover://db.internal:2113"},
		{env: []string{"HERMES_STORE_URL=postgres://x"}, wantURL: "postgres://x"},
		{env: []string{"HERMES_STORE_URL=postgresql://u@db:5432/app?hermes_schema=a"}, wantURL: "postgresql://u@db:5432/app?hermes_schema=a"},
		{env: []string{"HERMES_STORE_URL=mysql://db/app"}, wantErr: true},
		{env: []string{"HERMES_STORE_URL=localhost:2113"}, wantErr: true},
		{env: []string{"HERMES_NODE_ID=node-a.1"}, wantID: "node-a.1"},
		{env: []string{"HERMES_NODE_ID=node a"}, wantErr: true},
	} {
		cfg, err := config.Load(config.LoadOptions{Home: t.TempDir(), Environ: tc.env})
		if (err != nil) != tc.wantErr {
			t.Errorf("Load(%v) error = %v, want error %v", tc.env, err, tc.wantErr)
			continue
		}
		if err == nil && (cfg.Store.URL != tc.wantURL || cfg.Node.ID != tc.wantID) {
			t.Errorf("Load(%v) = store %q node %q, want %q %q", tc.env, cfg.Store.URL, cfg.Node.ID, tc.wantURL, tc.wantID)
		}
	}
	_, err := config.Load(config.LoadOptions{Home: t.TempDir(), Flags: map[string]string{"store.url": "ftp://x"}})
	if err == nil {
		t.Error("Load(--store ftp://x) error = nil, want an error")
	}
}
