package projections

// Clamp is one value of a stored event that a projection did not take as
// written, under the rules of domain/clamp.go: a sum that saturated at its
// cap, or a value quarantined (left out). The event stays in the log as it
// is; the read model holds the clamped result.
type Clamp struct {
	// Projection is the versioned name of the projection that clamped.
	Projection string
	Stream     string
	Position   uint64
	// Field is the event's JSON field name (input_tokens, …).
	Field string
	// Rule is domain.ClampSaturated or domain.ClampQuarantined.
	Rule string
}

// ClampReporter is told of each clamp once the batch that holds it is
// committed, so a batch that fails and is retried reports its clamps once.
// A rebuild reports every clamp of the log again. ReportClamp is called from
// the goroutine that applies the batch, must not block, and must be safe
// for concurrent use by several projections.
type ClampReporter interface {
	ReportClamp(Clamp)
}
