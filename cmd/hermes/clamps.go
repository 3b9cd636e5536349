package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"sync"

	"hermes/projections"
)

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
