package main

import "hermes/node"

type heldLock struct{ l node.HomeLock }

func (h heldLock) release() { h.l.Release() }

// acquireGatewayLock makes this process the only hermes on the home.
func acquireGatewayLock(h homeLayout) (heldLock, error) {
	l, err := h.node().Lock()
	return heldLock{l}, err
}
