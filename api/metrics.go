package api

import (
	"context"
	"iter"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"hermes/events"
	"hermes/projections"
)

// Metrics are hermes' Prometheus metrics, on a registry of their own so
// servers in one test process do not collide.
type Metrics struct {
	registry      *prometheus.Registry
	appends       *prometheus.CounterVec
	appendedEvts  prometheus.Counter
	appendLatency prometheus.Histogram
	requests      *prometheus.CounterVec
	reqLatency    *prometheus.HistogramVec
	// streams and streamsDropped are the event streams open and those
	// dropped because their client fell too far behind (follow.go).
	streams        prometheus.Gauge
	streamsDropped prometheus.Counter
}

// NewMetrics registers the metrics.
func NewMetrics() *Metrics {
	m := &Metrics{registry: prometheus.NewRegistry()}
	m.appends = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hermes_appends_total", Help: "Appends to the event store, by outcome.",
	}, []string{"outcome"})
	m.appendedEvts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hermes_appended_events_total", Help: "Events durably appended.",
	})
	m.appendLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "hermes_append_duration_seconds", Help: "Time from append call to durable acknowledgement.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hermes_http_requests_total", Help: "HTTP requests, by route, method and status.",
	}, []string{"route", "method", "code"})
	m.reqLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "hermes_http_request_duration_seconds", Help: "HTTP request latency, by route.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
	}, []string{"route"})
	m.streams = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hermes_event_streams", Help: "Event streams (GET /v1/events?follow=1) open.",
	})
	m.streamsDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hermes_event_streams_dropped_total", Help: "Event streams ended because their client fell more than api.follower_buffer_bytes behind.",
	})
	m.registry.MustRegister(m.appends, m.appendedEvts, m.appendLatency, m.requests, m.reqLatency, m.streams, m.streamsDropped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Observe adds the gauges read at scrape time: projection lag and lanes.
func (m *Metrics) Observe(runner *projections.Runner, lanes LaneCounter) {
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hermes_projection_lag_events", Help: "Events appended but not yet applied by the slowest projection.",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		lag, err := runner.Lag(ctx)
		if err != nil {
			return -1
		}
		return float64(lag)
	}))
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hermes_lanes", Help: "Live session lanes in the read model.",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		n, err := lanes.Count(ctx)
		if err != nil {
			return -1
		}
		return float64(n)
	}))
}

// LaneCounter counts the lanes of the lane read model.
type LaneCounter interface {
	Count(ctx context.Context) (int, error)
}

// ObserveRebuild adds the gauges of a rebuild on a live home (POST
// /v1/projections/rebuild), read from status at scrape time.
func (m *Metrics) ObserveRebuild(status func() projections.RebuildStatus) {
	gauge := func(name, help string, value func(projections.RebuildStatus) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return value(status()) })
	}
	m.registry.MustRegister(
		gauge("hermes_rebuild_running", "1 while a rebuild of the read models runs, else 0.", func(st projections.RebuildStatus) float64 {
			if st.Running() {
				return 1
			}
			return 0
		}),
		gauge("hermes_rebuild_applied_position", "Log position the rebuilt read models have applied.", func(st projections.RebuildStatus) float64 { return float64(st.Done) }),
		gauge("hermes_rebuild_target_position", "Log position the running rebuild heads for.", func(st projections.RebuildStatus) float64 { return float64(st.Total) }),
		gauge("hermes_rebuild_events_per_second", "Average rate of the rebuild's building phase.", func(st projections.RebuildStatus) float64 { return st.EventsPerSecond }),
		gauge("hermes_rebuild_eta_seconds", "Time the rebuild's building phase still needs at its rate (0: unknown or done).", func(st projections.RebuildStatus) float64 { return st.ETA.Seconds() }),
		gauge("hermes_rebuild_runs", "Rebuilds started by this process.", func(st projections.RebuildStatus) float64 { return float64(st.Run) }),
	)
}

// Register adds collectors of other layers (wired by cmd) to the registry;
// it panics on a duplicate, as at startup.
func (m *Metrics) Register(cs ...prometheus.Collector) {
	m.registry.MustRegister(cs...)
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

func (m *Metrics) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil {
			// RoutePattern joins the pattern anew at each call.
			if pattern := rc.RoutePattern(); pattern != "" {
				route = pattern
			}
		}
		m.requests.WithLabelValues(route, r.Method, strconv.Itoa(rec.status)).Inc()
		m.reqLatency.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (the event
// streams' write deadlines).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// InstrumentStore counts and times the appends of store.
func (m *Metrics) InstrumentStore(store events.Store) events.Store {
	return &instrumentedStore{Store: store, m: m}
}

type instrumentedStore struct {
	events.Store
	m *Metrics
	// full is the last append refused for want of space, until an append
	// goes through (storage.go).
	full storageState
}

func (s *instrumentedStore) Append(ctx context.Context, stream string, expected events.ExpectedVersion, proposed []events.Proposed) (events.AppendResult, error) {
	start := time.Now()
	res, err := s.Store.Append(ctx, stream, expected, proposed)
	s.m.appendLatency.Observe(time.Since(start).Seconds())
	s.full.observe(err)
	switch {
	case err != nil:
		s.m.appends.WithLabelValues("error").Inc()
	case res.Duplicate:
		s.m.appends.WithLabelValues("duplicate").Inc()
	default:
		s.m.appends.WithLabelValues("ok").Inc()
		s.m.appendedEvts.Add(float64(len(proposed)))
	}
	return res, err
}

// AppendBatch counts and times a batch append like the appends it holds;
// a store without events.BatchAppender gets one Append per stream.
func (s *instrumentedStore) AppendBatch(ctx context.Context, appends iter.Seq[events.StreamAppend]) ([]events.BatchResult, error) {
	b, ok := s.Store.(events.BatchAppender)
	if !ok {
		var out []events.BatchResult
		for a := range appends {
			if err := ctx.Err(); err != nil {
				return out, err
			}
			res, err := s.Append(ctx, a.Stream, a.Expected, a.Proposed)
			out = append(out, events.BatchResult{Result: res, Err: err})
		}
		return out, nil
	}
	// proposed[i] is how many events the i-th append holds.
	var proposed []int
	counted := func(yield func(events.StreamAppend) bool) {
		for a := range appends {
			proposed = append(proposed, len(a.Proposed))
			if !yield(a) {
				return
			}
		}
	}
	start := time.Now()
	out, err := b.AppendBatch(ctx, counted)
	s.m.appendLatency.Observe(time.Since(start).Seconds())
	for i, r := range out {
		switch {
		case r.Err != nil:
			s.m.appends.WithLabelValues("error").Inc()
		case r.Result.Duplicate:
			s.m.appends.WithLabelValues("duplicate").Inc()
		case len(r.Result.Versions) > 0:
			s.m.appends.WithLabelValues("ok").Inc()
			s.m.appendedEvts.Add(float64(proposed[i]))
		}
	}
	return out, err
}
