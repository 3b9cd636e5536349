package chaos

import (
	"fmt"
	"sync"
	"time"
)

// Kind is what a client operation does to a lane.
type Kind string

// The operations of the workload.
const (
	Resolve  Kind = "resolve"  // POST /v1/sessions/resolve
	Start    Kind = "start"    // POST …/turns/start {turn_id}
	Complete Kind = "complete" // POST …/turns {turn_id}
	Message  Kind = "message"  // POST /v1/transcripts/{sid}/messages {turn_id}
	Reset    Kind = "reset"    // POST …/reset
	// Interrupt is not a client's: the log shows the turn was closed by
	// hermes (an adoption, crash recovery). It is added to the history
	// from the log, with an interval from the turn's start to the end.
	Interrupt Kind = "interrupt"
)

// Outcome is how an operation ended, as the client saw it.
type Outcome string

// Outcomes. Unknown is an answer lost (a timeout, a dropped connection, a
// 5xx that may follow a commit): the operation may or may not have taken
// effect, and the checkers must allow both.
const (
	OK      Outcome = "ok"
	Failed  Outcome = "failed"
	Unknown Outcome = "unknown"
)

// Input is what a client asked.
type Input struct {
	Kind Kind
	Key  string
	// Turn is the turn id of start, complete and message.
	Turn string
	// SessionID is the session a message is appended to.
	SessionID string
	// Text is a message's content: unique per operation, so the log
	// checker finds each acknowledged message.
	Text string
}

// Output is what the node answered.
type Output struct {
	Outcome Outcome
	// Status and Code are the HTTP status and the error code of a
	// refusal.
	Status int
	Code   string
	// SessionID, Created and Version are the lane's entry in the answer
	// (resolve, reset, start, complete).
	SessionID string
	Created   bool
	Version   uint64
	// Position is an appended message's log position.
	Position uint64
	// Err is the transport error of an unknown outcome.
	Err string
}

// Op is one operation of the history.
type Op struct {
	ID     int
	Client int
	Node   int
	Input  Input
	Output Output
	// Invoke and Complete are nanoseconds since the history began;
	// an unknown operation's Complete is the end of the history.
	Invoke, Complete int64
}

func (o Op) String() string {
	s := fmt.Sprintf("op %d client %d node %d %s %s", o.ID, o.Client, o.Node, o.Input.Kind, o.Input.Key)
	if o.Input.Turn != "" {
		s += " turn=" + o.Input.Turn
	}
	if o.Input.SessionID != "" {
		s += " sid=" + o.Input.SessionID
	}
	s += fmt.Sprintf(" [%.3fs,%.3fs] -> %s", float64(o.Invoke)/1e9, float64(o.Complete)/1e9, o.Output.Outcome)
	if o.Output.Code != "" || o.Output.Status != 0 {
		s += fmt.Sprintf(" %d %s", o.Output.Status, o.Output.Code)
	}
	if o.Output.SessionID != "" {
		s += fmt.Sprintf(" sid=%s created=%v v=%d", o.Output.SessionID, o.Output.Created, o.Output.Version)
	}
	if o.Output.Err != "" {
		s += " err=" + o.Output.Err
	}
	return s
}

// History records operations from many clients at once.
type History struct {
	start time.Time
	mu    sync.Mutex
	ops   []Op
}

// NewHistory starts an empty history now.
func NewHistory() *History { return &History{start: time.Now()} }

// Invoke records that client invokes in on node and returns the op's id;
// call Done with the answer.
func (h *History) Invoke(client, node int, in Input) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := len(h.ops)
	h.ops = append(h.ops, Op{ID: id, Client: client, Node: node, Input: in, Invoke: int64(time.Since(h.start)), Complete: -1})
	return id
}

// Done records the answer of operation id.
func (h *History) Done(id int, out Output) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops[id].Output = out
	h.ops[id].Complete = int64(time.Since(h.start))
}

// Ops returns the history so far. Operations not completed, and unknown
// ones, complete at the end of the history (they may take effect any time
// after their invocation).
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	end := int64(time.Since(h.start))
	out := make([]Op, len(h.ops))
	copy(out, h.ops)
	for i := range out {
		if out[i].Complete < 0 {
			out[i].Output = Output{Outcome: Unknown, Err: "never answered"}
		}
		if out[i].Output.Outcome == Unknown {
			out[i].Complete = end
		}
	}
	return out
}

// Counts are the operations by outcome.
func Counts(ops []Op) map[Outcome]int {
	n := map[Outcome]int{}
	for _, o := range ops {
		n[o.Output.Outcome]++
	}
	return n
}
