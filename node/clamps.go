package node

import (
	"log/slog"

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
