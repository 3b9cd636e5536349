package api

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"hermes/events"
)

// A full disk: the log refuses the append (the store answers
// events.ErrStorageFull, 507 insufficient_storage, nothing appended), or a
// read model cannot record its batch (the runner retries with backoff; until
// it can, every command is refused up front, so nothing is acknowledged that
// the reads could not show). Reads go on from the read models as they are;
// /readyz says storage_full with the reason, /metrics hermes_storage_full.

// writable refuses h while a read model cannot write for want of space, or
// while the read models are rebuilt after damage (healing.go).
func (s *Server) writable(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := s.refuseWhileHealing(); err != nil {
			return err
		}
		if s.Runner != nil {
			if err := s.Runner.StorageError(); err != nil {
				return fmt.Errorf("%w: a read model cannot record new events (%v); nothing was appended, retry once space is freed", events.ErrStorageFull, err)
			}
		}
		return h(w, r)
	}
}

// StorageError says why writes are refused for want of space: the read
// model that cannot write, else the last append the log refused (until one
// goes through); nil when storage takes writes.
func (s *Server) StorageError() error {
	if s.Runner != nil {
		if err := s.Runner.StorageError(); err != nil {
			return fmt.Errorf("read model: %w", err)
		}
	}
	if is, ok := s.Store.(*instrumentedStore); ok {
		if err := is.full.get(); err != nil {
			return fmt.Errorf("event log: %w", err)
		}
	}
	return nil
}

// storageState follows the appends of a store: the last one refused for
// want of space, until one goes through. Changes are logged.
type storageState struct {
	mu  sync.Mutex
	err error
	log *slog.Logger
}

func (st *storageState) get() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.err
}

func (st *storageState) setLogger(l *slog.Logger) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.log = l
}

// observe takes the outcome of an append.
func (st *storageState) observe(err error) {
	full := errors.Is(err, events.ErrStorageFull)
	if err != nil && !full {
		return // another failure says nothing about space
	}
	st.mu.Lock()
	was := st.err
	if full {
		st.err = err
	} else {
		st.err = nil
	}
	log := st.log
	st.mu.Unlock()
	switch {
	case log == nil:
	case full && was == nil:
		log.Error("storage full: the event log refuses writes (507 insufficient_storage); reads go on; writes resume by themselves once space is freed",
			"err", truncateForLog(err.Error()))
	case !full && was != nil:
		log.Info("storage takes writes again: the event log appended")
	}
}

// observeStorage adds hermes_storage_full and
// hermes_projection_retries_total for s.
func (m *Metrics) observeStorage(s *Server) {
	full := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hermes_storage_full", Help: "1 while writes are refused for want of space (the event log or a read model), else 0.",
	}, func() float64 {
		if s.StorageError() != nil {
			return 1
		}
		return 0
	})
	retries := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "hermes_projection_retries_total", Help: "Batches a read model retried after failing for want of space.",
	}, func() float64 {
		if s.Runner == nil {
			return 0
		}
		return float64(s.Runner.Retries())
	})
	// A second server on the same metrics keeps the first one's.
	_ = m.registry.Register(full)
	_ = m.registry.Register(retries)
}
