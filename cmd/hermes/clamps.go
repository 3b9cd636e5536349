package main

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"hermes/projections"
)

// clampMetricName counts the event values the read models clamped or
// quarantined (docs/FOLD_LIMITS.md).
const clampMetricName = "hermes_clamped_values_total"

// clampLogger logs each clamp (where, which field and rule, never the
// value's event content) and counts it.
type clampLogger struct {
	log   *slog.Logger
	count *prometheus.CounterVec
}

func newClampLogger(log *slog.Logger) *clampLogger {
	return &clampLogger{log: log, count: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: clampMetricName,
		Help: "Values of stored events that a read model clamped (a saturated sum) or quarantined (left out), by projection, field and rule.",
	}, []string{"projection", "field", "rule"})}
}

func (c *clampLogger) ReportClamp(cl projections.Clamp) {
	c.log.Warn("clamped an event value", "projection", cl.Projection, "stream", cl.Stream,
		"position", cl.Position, "field", cl.Field, "rule", cl.Rule)
	c.count.WithLabelValues(cl.Projection, cl.Field, cl.Rule).Inc()
}

// clampList collects the clamps of a rebuild, for verify and rebuild to
// print.
type clampList struct {
	mu  sync.Mutex
	all []projections.Clamp
}

func (c *clampList) ReportClamp(cl projections.Clamp) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all = append(c.all, cl)
}

// print writes one line per clamp, in log order, and returns how many.
func (c *clampList) print(w io.Writer) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	slices.SortStableFunc(c.all, func(a, b projections.Clamp) int {
		return cmp.Or(cmp.Compare(a.Position, b.Position), cmp.Compare(a.Projection, b.Projection))
	})
	for _, cl := range c.all {
		fmt.Fprintf(w, "clamped: position %d %q %s %s %s\n", cl.Position, cl.Stream, cl.Projection, cl.Field, cl.Rule)
	}
	return len(c.all)
}
