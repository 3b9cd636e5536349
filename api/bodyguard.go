package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// DefaultBodyReadTimeout bounds the reading of a request body unless
// configured otherwise (Deps.BodyReadTimeout).
const DefaultBodyReadTimeout = 30 * time.Second

// CodeRequestTimeout is the error code of a request whose body did not
// arrive within the body read timeout (408).
const CodeRequestTimeout = "request_timeout"

// A refused request's unread body is read and thrown away, up to
// lingerBytes and for at most lingerTimeout (or the body read timeout when
// shorter), before the connection is closed: see guardBody.
const (
	lingerBytes   = 4 << 20
	lingerTimeout = 2 * time.Second
)

// bodyReadTimeout is Deps.BodyReadTimeout, or its default.
func (s *Server) bodyReadTimeout() time.Duration {
	if s.BodyReadTimeout > 0 {
		return s.BodyReadTimeout
	}
	return DefaultBodyReadTimeout
}

// guardBody bounds how long reading a request body may take, and makes the
// answer to a refused body readable. It leaves requests without a body
// (every GET, the SSE streams among them) alone.
//
// The bound is a read deadline on the connection, set when the handler
// starts and cleared once the body has been read to its end, so a handler
// that works longer than the bound after reading its body is not cut off.
// A body that has not arrived by then is answered 408 request_timeout
// (whatever the handler made of the failed read) and the connection is
// closed.
//
// When a handler answers without reading the whole body (a 413 on the
// declared length, a 413 from http.MaxBytesReader, a 401, ...) the rest is
// still on its way: a client that writes its whole request before reading
// the answer (Python's urllib, many HTTP libraries) would otherwise be
// reset by the kernel when the server closes the connection with unread
// data, and see "connection reset by peer" instead of the answer. So the
// answer is flushed, then the rest of the body is read and discarded — at
// most lingerBytes, for at most lingerTimeout — the way nginx's lingering
// close does; a slow or endless sender is dropped when either bound is hit.
func (s *Server) guardBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		timeout := s.bodyReadTimeout()
		if err := rc.SetReadDeadline(time.Now().Add(timeout)); err != nil {
			// Not a net/http connection (an in-process test): no bound.
			next.ServeHTTP(w, r)
			return
		}
		body := &guardedBody{ReadCloser: r.Body, rc: rc}
		gw := &guardedWriter{ResponseWriter: w, s: s, r: r, body: body}
		r.Body = body
		next.ServeHTTP(gw, r)

		switch {
		case body.timedOut.Load():
			if !gw.wroteHeader {
				gw.WriteHeader(http.StatusOK) // replaced by the 408
			}
		case !body.eof.Load() && !(expectsContinue(r) && !body.read.Load()):
			// A client that asked to be told to continue and was not has
			// nothing on its way.
			if !gw.wroteHeader {
				gw.WriteHeader(http.StatusOK)
			}
			if err := rc.Flush(); err != nil {
				return
			}
			linger := min(lingerTimeout, timeout)
			if err := rc.SetReadDeadline(time.Now().Add(linger)); err != nil {
				return
			}
			body.lingering.Store(true)
			_, _ = io.CopyN(io.Discard, body, lingerBytes)
		}
	})
}

func expectsContinue(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Expect"), "100-continue")
}

// guardedBody is a request body under the read deadline of guardBody.
type guardedBody struct {
	io.ReadCloser
	rc *http.ResponseController
	// read: Read was called; eof: the body was read to its end; timedOut:
	// a read hit the deadline before the body was refused; lingering: the
	// rest of a refused body is being discarded.
	read, eof, timedOut, lingering atomic.Bool
}

func (b *guardedBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		if b.eof.CompareAndSwap(false, true) {
			// The body is in: the deadline must not reach the rest of
			// the request, or the read with which net/http now watches
			// for the client going away would time out and cancel the
			// request. (net/http clears the deadline itself when it
			// starts that read; this does not depend on it.)
			_ = b.rc.SetReadDeadline(time.Time{})
		}
	case errors.Is(err, os.ErrDeadlineExceeded) && !b.lingering.Load():
		b.timedOut.Store(true)
		err = fmt.Errorf("%w: %w", errBodyTimeout, err)
	}
	return n, err
}

var errBodyTimeout = errors.New("request body not received in time")

// guardedWriter answers 408 instead of whatever the handler answers once
// the body read timed out.
type guardedWriter struct {
	http.ResponseWriter
	s           *Server
	r           *http.Request
	body        *guardedBody
	wroteHeader bool
	// replaced: the 408 was written in place of the handler's answer,
	// whose writes are dropped.
	replaced bool
}

func (w *guardedWriter) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	w.wroteHeader = true
	if !w.body.timedOut.Load() {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.replaced = true
	h := w.ResponseWriter.Header()
	for k := range h {
		delete(h, k)
	}
	h.Set("Connection", "close")
	var body ErrorBody
	body.Error.Code = CodeRequestTimeout
	body.Error.Message = fmt.Sprintf("%v: the body must arrive within %s", errBodyTimeout, w.s.bodyReadTimeout())
	writeJSON(w.ResponseWriter, http.StatusRequestTimeout, body)
}

func (w *guardedWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.replaced {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// Flush lets a handler that type-asserts http.Flusher stream through the
// guard.
func (w *guardedWriter) Flush() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.replaced {
		return
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the connection's writer.
func (w *guardedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
