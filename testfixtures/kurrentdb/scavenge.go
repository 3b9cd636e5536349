package kurrentdb

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
)

// scavenge removes from the log, as a KurrentDB scavenge removes from its
// chunks and index, every event written before the scavenge point (a
// $scavengePoint event it writes first) that the server no longer serves:
//
//   - in a tombstoned stream, every event but the tombstone;
//   - in other streams, events before $tb (all of them for a soft-deleted
//     stream), beyond $maxCount, or as old as $maxAge or older — but never
//     the stream's last event, which keeps its last revision;
//   - in a metastream, every metadata event but the latest, and all of them
//     once the stream is tombstoned.
//
// It answers the bytes the removed records took.
func (l *eventLog) scavenge() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	point := l.writeSystem("$scavengePoints", "$scavengePoint", `{"threshold":0}`).position
	discard := make(map[*record]bool)
	for name, st := range l.streams {
		var lastBefore int64 = -1
		for _, r := range st.recs {
			if r.position < point {
				lastBefore = int64(r.revision)
			}
		}
		if isMetastream(name) {
			tombstoned := l.lastLocked(originalOf(name)) == deletedStream
			for _, r := range st.recs {
				if r.position < point && (tombstoned || int64(r.revision) < lastBefore) {
					discard[r] = true
				}
			}
			continue
		}
		meta := l.metadataLocked(name)
		tombstoned := st.last == deletedStream
		for _, r := range st.recs {
			rev := int64(r.revision)
			if r.position >= point || rev == lastBefore {
				continue
			}
			switch {
			case tombstoned,
				meta.truncateBefore >= 0 && rev < meta.truncateBefore,
				meta.maxCount > 0 && rev <= lastBefore-meta.maxCount,
				meta.maxAge > 0 && !r.created.After(now.Add(-meta.maxAge)):
				discard[r] = true
			}
		}
	}
	if len(discard) == 0 {
		return 0
	}
	var saved uint64
	all := make([]*record, 0, len(l.all)-len(discard))
	for _, r := range l.all {
		if discard[r] {
			saved += r.size()
			continue
		}
		all = append(all, r)
	}
	l.all = all
	for _, st := range l.streams {
		kept := make([]*record, 0, len(st.recs))
		for _, r := range st.recs {
			if !discard[r] {
				kept = append(kept, r)
			}
		}
		st.recs = kept
	}
	return saved
}

// storage is the whole database as bytes: every record the log still
// holds, in $all order, each framed like a chunk record (length, fields,
// length).
func (l *eventLog) storage() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out bytes.Buffer
	var rec bytes.Buffer
	field := func(b []byte) {
		rec.Write(binary.AppendUvarint(nil, uint64(len(b))))
		rec.Write(b)
	}
	for _, r := range l.all {
		rec.Reset()
		rec.Write(binary.BigEndian.AppendUint64(nil, r.position))
		rec.Write(binary.BigEndian.AppendUint64(nil, r.revision))
		rec.Write(r.id[:])
		rec.Write(binary.BigEndian.AppendUint64(nil, uint64(r.created.UnixNano())))
		field([]byte(r.stream))
		field([]byte(r.eventType))
		field([]byte(r.contentType))
		field(r.data)
		field(r.metadata)
		n := binary.BigEndian.AppendUint32(nil, uint32(rec.Len()))
		out.Write(n)
		out.Write(rec.Bytes())
		out.Write(n)
	}
	return out.Bytes()
}

// Scavenge results, as the operations service answers them.
const (
	ScavengeStarted    = "Started"
	ScavengeInProgress = "InProgress"
	ScavengeStopped    = "Stopped"
)

// scavenges runs one scavenge at a time and records each in
// $scavenges-<id> (with a link in $scavenges), as a node does:
// $scavengeStarted, then $scavengeCompleted with its result and the bytes
// saved.
type scavenges struct {
	log      *eventLog
	endpoint string
	hook     func(id string)

	mu      sync.Mutex
	current *scavengeRun
	wg      sync.WaitGroup
}

type scavengeRun struct {
	id      string
	stopped chan struct{}
	once    sync.Once
}

// start begins a scavenge, or answers the one in progress.
func (s *scavenges) start() (id, result string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current != nil {
		return s.current.id, ScavengeInProgress
	}
	run := &scavengeRun{id: uuid.NewString(), stopped: make(chan struct{})}
	s.current = run
	s.wg.Add(1)
	go s.run(run)
	return run.id, ScavengeStarted
}

// stop stops the scavenge id; false when it is not the one running.
func (s *scavenges) stop(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current == nil || s.current.id != id {
		return false
	}
	s.current.once.Do(func() { close(s.current.stopped) })
	return true
}

func (s *scavenges) run(run *scavengeRun) {
	defer s.wg.Done()
	started := s.log.now()
	stream := "$scavenges-" + run.id
	s.write(metastreamOf(stream), metadataEventType, contentTypeJSON, `{"$maxAge":2592000}`)
	s.detail(stream, "$scavengeStarted", fmt.Sprintf(`{"scavengeId":%q,"nodeEndpoint":%q}`, run.id, s.endpoint))
	if s.hook != nil {
		s.hook(run.id)
	}
	result := "Success"
	var saved uint64
	select {
	case <-run.stopped:
		result = "Stopped"
	default:
		saved = s.log.scavenge()
	}
	took := s.log.now().Sub(started)
	s.detail(stream, "$scavengeCompleted", fmt.Sprintf(
		`{"scavengeId":%q,"nodeEndpoint":%q,"result":%q,"error":null,"timeTaken":%q,"spaceSaved":%d}`,
		run.id, s.endpoint, result, timeSpan(took), saved))
	s.mu.Lock()
	s.current = nil
	s.mu.Unlock()
}

// detail writes a scavenge event and its link in $scavenges.
func (s *scavenges) detail(stream, eventType, data string) {
	r := s.write(stream, eventType, contentTypeJSON, data)
	s.write("$scavenges", "$>", contentTypeBinary, fmt.Sprintf("%d@%s", r.revision, stream))
}

func (s *scavenges) write(stream, eventType, contentType, data string) *record {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	r := &record{stream: stream, id: uuid.New(), eventType: eventType, contentType: contentType, data: []byte(data)}
	s.log.add([]*record{r})
	return r
}

// timeSpan formats d as .NET writes a TimeSpan (hh:mm:ss.fffffff).
func timeSpan(d time.Duration) string {
	h := d / time.Hour
	m := d % time.Hour / time.Minute
	sec := d % time.Minute / time.Second
	ticks := d % time.Second / 100
	return fmt.Sprintf("%02d:%02d:%02d.%07d", h, m, sec, ticks)
}
