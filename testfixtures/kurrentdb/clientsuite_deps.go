//go:build clientsuitedeps

// This file is never built: it names the modules that EventStore-Client-Go
// v4.2.0's own tests import, so that go.mod lists them and `go mod download`
// puts them in the module cache, from which TestOfficialClientSuite builds
// those tests without a network.

package kurrentdb

import (
	_ "github.com/davecgh/go-spew/spew"
	_ "github.com/docker/go-connections/nat"
	_ "github.com/goombaio/namegenerator"
	_ "github.com/stretchr/testify/assert"
	_ "github.com/stretchr/testify/require"
	_ "github.com/testcontainers/testcontainers-go"
	_ "github.com/testcontainers/testcontainers-go/wait"
)
