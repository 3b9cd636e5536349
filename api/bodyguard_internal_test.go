package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestGuardBodyClearsTheDeadlineOnceTheBodyIsIn: the body read timeout
// bounds the body, not the request. A handler that keeps working for
// several times the bound after reading its body is neither cancelled
// (net/http cancels the request when its read of the otherwise idle
// connection fails, as it would at a leftover deadline) nor answered 408.
func TestGuardBodyClearsTheDeadlineOnceTheBodyIsIn(t *testing.T) {
	const bound = 100 * time.Millisecond
	s := New(Deps{BodyReadTimeout: bound})
	srv := httptest.NewServer(s.guardBody(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-time.After(4 * bound):
		case <-r.Context().Done():
			http.Error(w, "cancelled: "+r.Context().Err().Error(), http.StatusServiceUnavailable)
			return
		}
		w.Write(body)
	})))
	defer srv.Close()

	for range 2 { // the second over the same keep-alive connection
		resp, err := srv.Client().Post(srv.URL, "text/plain", strings.NewReader("hello"))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(got) != "hello" {
			t.Fatalf("POST = %d %q, want 200 \"hello\"", resp.StatusCode, got)
		}
	}
}
