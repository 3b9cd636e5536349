package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestBlankOrShortTokenRefusesToStart runs the real binary: a token that
// is blank (it used to turn auth off silently) or has fewer than 16
// non-space characters is a configuration error, exit 2, naming the key and
// where the value came from.
func TestBlankOrShortTokenRefusesToStart(t *testing.T) {
	tests := []struct {
		name, token, reason string
	}{
		{"one space", " ", "is blank"},
		{"sixteen spaces", strings.Repeat(" ", 16), "is blank"},
		{"15 characters", "0123456789abcde", "has fewer than 16 non-space characters"},
		{"16 with spaces", "0123 4567 89ab c", "has fewer than 16 non-space characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(binary, "serve", "--home", t.TempDir(), "--addr", freeAddr(t))
			cmd.Env = append(os.Environ(), "NO_COLOR=1", "HERMES_API_TOKEN="+tt.token)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("hermes serve with HERMES_API_TOKEN=%q = %v, want exit 2\nstderr: %s", tt.token, err, stderr.String())
			}
			got := stderr.String()
			if !strings.Contains(got, "HERMES_API_TOKEN: api.token: "+tt.reason) {
				t.Errorf("stderr = %q, want HERMES_API_TOKEN: api.token: %s", got, tt.reason)
			}
			if strings.TrimSpace(tt.token) != "" && strings.Contains(got, tt.token) {
				t.Errorf("stderr = %q quotes the token", got)
			}
		})
	}
}
