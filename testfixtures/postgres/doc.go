// Package postgres starts throw-away PostgreSQL clusters for tests: a real
// server, run from Debian's packages (apt-get install postgresql), with its
// data in a temporary directory and its port a free one on the loopback
// interface. It is imported only from _test.go files.
//
// A cluster is made by initdb (UTF-8, locale C, a random password for its
// superuser, scram-sha-256 on TCP) and run with fsync on, listening on
// 127.0.0.1 only and on no Unix socket. PostgreSQL refuses to run as root:
// when the tests run as root, initdb and the server run as the
// unprivileged user Debian's package creates (postgres), and the directory
// is given to that user. The server is a child of the test process, which
// it outlives by nothing: it is stopped when the test binary ends (and asked
// to stop by the kernel should the test process die first).
//
// A test binary shares one cluster ([Shared], with [Main] in its TestMain),
// started on first use, and each test takes a database ([Cluster.NewDatabase])
// or a schema of its own. HERMES_TEST_POSTGRES_URL (a postgres:// URL of a
// role that may create databases) points the suite at an existing server
// instead; what needs the server's process (a restart) is then skipped.
//
// Without PostgreSQL installed, [Shared] skips the test with a message that
// says how to install it, except when CI is set (.ci/run installs it), where
// its absence fails the test.
package postgres
