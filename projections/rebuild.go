package projections

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"hermes/events"
)

// Dumper is implemented by projections that can write a canonical dump of
// their rows: the same events give the same bytes.
type Dumper interface {
	Dump(ctx context.Context, w io.Writer) error
}

// OpenFunc opens the full set of projections with their files in dir.
type OpenFunc func(dir string) ([]Projection, error)

// Rebuild builds every projection from position 0 into dir, which must be
// empty or missing, and closes them. progress, when not nil, is told how far
// the rebuild got.
func Rebuild(ctx context.Context, store events.Store, open OpenFunc, dir string, progress func(done, total uint64)) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("rebuild into %s: directory is not empty", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("rebuild into %s: %w", dir, err)
	}
	ps, err := open(dir)
	if err != nil {
		return fmt.Errorf("rebuild into %s: %w", dir, err)
	}
	defer closeAll(ps)
	return NewRunner(store, ps...).CatchUp(ctx, progress)
}

// Difference is the first place where a live projection and a rebuild
// disagree.
type Difference struct {
	Projection string
	Line       int
	Live       string
	Rebuilt    string
}

func (d Difference) String() string {
	return fmt.Sprintf("%s differs at dump line %d:\n  live:    %s\n  rebuilt: %s", d.Projection, d.Line, d.Live, d.Rebuilt)
}

// Verify rebuilds every projection into scratch (an empty directory) and
// compares each, dump line by dump line, with the live projection of the
// same name. Both sides are compared at the same position: the live ones are
// first caught up with the store. It returns the first difference, or nil.
func Verify(ctx context.Context, store events.Store, open OpenFunc, live []Projection, scratch string, progress func(done, total uint64)) (*Difference, error) {
	if err := NewRunner(store, live...).CatchUp(ctx, nil); err != nil {
		return nil, fmt.Errorf("verify: catch up live projections: %w", err)
	}
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	rebuilt, err := open(scratch)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	defer closeAll(rebuilt)
	if err := NewRunner(store, rebuilt...).CatchUp(ctx, progress); err != nil {
		return nil, fmt.Errorf("verify: rebuild: %w", err)
	}
	byName := map[string]Projection{}
	for _, p := range rebuilt {
		byName[p.Name()] = p
	}
	for _, p := range live {
		r, ok := byName[p.Name()]
		if !ok {
			return &Difference{Projection: p.Name(), Live: "present", Rebuilt: "missing"}, nil
		}
		ld, lok := p.(Dumper)
		rd, rok := r.(Dumper)
		if !lok || !rok {
			continue
		}
		var a, b bytes.Buffer
		if err := ld.Dump(ctx, &a); err != nil {
			return nil, fmt.Errorf("verify: dump live %s: %w", p.Name(), err)
		}
		if err := rd.Dump(ctx, &b); err != nil {
			return nil, fmt.Errorf("verify: dump rebuilt %s: %w", p.Name(), err)
		}
		if d := firstDifference(p.Name(), a.Bytes(), b.Bytes()); d != nil {
			return d, nil
		}
	}
	return nil, nil
}

func firstDifference(name string, live, rebuilt []byte) *Difference {
	ls := bufio.NewScanner(bytes.NewReader(live))
	rs := bufio.NewScanner(bytes.NewReader(rebuilt))
	ls.Buffer(make([]byte, 1<<20), 64<<20)
	rs.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; ; line++ {
		lok, rok := ls.Scan(), rs.Scan()
		if !lok && !rok {
			return nil
		}
		l, r := "(end of dump)", "(end of dump)"
		if lok {
			l = ls.Text()
		}
		if rok {
			r = rs.Text()
		}
		if l != r {
			return &Difference{Projection: name, Line: line, Live: l, Rebuilt: r}
		}
	}
}

func closeAll(ps []Projection) {
	for _, p := range ps {
		p.Close()
	}
}
