package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"hermes/adapters/gatewaylock"
)

type heldLock struct{ l *gatewaylock.Lock }

func (h heldLock) release() { h.l.Release() }

// processStart is when this process started (for the PID record).
var processStart = time.Now()

// acquireGatewayLock makes this process the only hermes on the home.
func acquireGatewayLock(h homeLayout) (heldLock, error) {
	l, err := gatewaylock.Acquire(h.gatewayLock(), gatewaylock.Holder{
		PID:       os.Getpid(),
		StartedAt: processStart.UTC(),
		Command:   strings.Join(os.Args, " "),
	})
	if err != nil {
		return heldLock{}, fmt.Errorf("%w", err)
	}
	return heldLock{l}, nil
}
