package node

import (
	"testing"
	"time"

	"hermes/adapters/config"
)

func TestDrainTimeout(t *testing.T) {
	tests := []struct {
		drain, shutdown, want time.Duration
	}{
		{drain: 180 * time.Second, shutdown: 60 * time.Second, want: 50 * time.Second}, // the defaults
		{drain: 30 * time.Second, shutdown: 60 * time.Second, want: 30 * time.Second},
		{drain: 180 * time.Second, shutdown: 2 * time.Second, want: 1500 * time.Millisecond},
		{drain: 0, shutdown: 60 * time.Second, want: 0},
		{drain: 180 * time.Second, shutdown: 3600 * time.Second, want: 180 * time.Second},
		{drain: time.Hour, shutdown: 3600 * time.Second, want: 3590 * time.Second},
	}
	for _, tc := range tests {
		got := drainTimeout(config.Agent{RestartDrainTimeout: tc.drain, ShutdownTimeout: tc.shutdown})
		if got != tc.want {
			t.Errorf("drainTimeout(restart_drain_timeout %v, shutdown_timeout %v) = %v, want %v", tc.drain, tc.shutdown, got, tc.want)
		}
	}
}
