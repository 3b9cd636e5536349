package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"hermes/events"

	"github.com/jackc/pgx/v5/pgconn"
)

// SQLSTATE codes the store tells apart (PostgreSQL's Appendix A).
const (
	codeDiskFull             = "53100" // disk_full
	codeIOError              = "58030" // io_error
	codeSerializationFailure = "40001" // serialization_failure
	codeDeadlock             = "40P01" // deadlock_detected
	codeLockNotAvailable     = "55P03" // lock_not_available (lock_timeout)
	codeUniqueViolation      = "23505" // unique_violation
	codeAdminShutdown        = "57P01" // admin_shutdown (pg_terminate_backend, a fast shutdown)
	codeCrashShutdown        = "57P02" // crash_shutdown (another backend crashed)
	codeCannotConnectNow     = "57P03" // cannot_connect_now (starting up, shutting down)
	codeIdleInTransaction    = "25P03" // idle_in_transaction_session_timeout
	codeInsufficientPriv     = "42501" // insufficient_privilege
)

// sqlState is the SQLSTATE of a server error in err's chain, "" for any
// other error.
func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// classify wraps err with events.ErrStorageFull when the server says its
// disk is full or refused a write (disk_full, io_error, or an ENOSPC or
// EDQUOT seen by this process): nothing was written, and the same write
// succeeds once space returns. Any other error is returned as it is.
func classify(err error) error {
	if err == nil || errors.Is(err, events.ErrStorageFull) {
		return err
	}
	switch sqlState(err) {
	case codeDiskFull, codeIOError:
		return fmt.Errorf("%w: %w", events.ErrStorageFull, err)
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: %w", events.ErrStorageFull, err)
	}
	return err
}

// transient reports whether err may go away by itself: the connection was
// lost or refused (the server restarting, a network failure, an
// administrator ending the session), or the server asks for a retry
// (serialization failure, deadlock, a lock not available in time). The
// writer runs the transaction again and the subscriptions read again; since
// appends de-duplicate by event id, a transaction whose commit was sent but
// never answered is safe to run again.
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	switch code := sqlState(err); {
	case code == codeSerializationFailure, code == codeDeadlock, code == codeLockNotAvailable,
		code == codeAdminShutdown, code == codeCrashShutdown, code == codeCannotConnectNow,
		code == codeIdleInTransaction, strings.HasPrefix(code, "08"):
		return true
	case code != "":
		return false
	}
	return connectionLost(err)
}

// connectionLost reports whether err is a failure of the connection itself
// rather than an answer of the server.
func connectionLost(err error) bool {
	var ce *pgconn.ConnectError
	var oe *net.OpError
	return errors.As(err, &ce) || errors.As(err, &oe) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ETIMEDOUT) ||
		errors.Is(err, pgconn.ErrConnClosed)
}
