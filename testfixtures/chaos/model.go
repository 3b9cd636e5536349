package chaos

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// unknownSID stands for a session id the history does not show (a resolve
// or reset whose answer was lost): any id matches it.
const unknownSID = "?"

// laneState is the model of one lane: whether it exists, its session, its
// open turn and the lower bound of its stream version.
type laneState struct {
	Exists bool
	SID    string
	Turn   string
	Ver    uint64
}

func sidMatches(model, got string) bool { return model == unknownSID || model == got }

// laneStep is the lane's sequential specification: the states op can leave
// st in (none: op could not have happened in st). A refusal changes
// nothing; an unknown outcome is both "took effect" and "did not".
func laneStep(st laneState, in Input, out Output) []laneState {
	switch out.Outcome {
	case Unknown:
		return append([]laneState{st}, applied(st, in)...)
	case Failed:
		if refusalPossible(st, in, out) {
			return []laneState{st}
		}
		return nil
	}
	// ok: the answer's entry must continue the lane.
	next := st
	if in.Kind != Message && in.Kind != Interrupt {
		if out.Version < st.Ver || (out.Version == st.Ver && in.Kind != Resolve) {
			return nil // a stale answer: the lane had moved past it
		}
		next.Ver = out.Version
	}
	switch in.Kind {
	case Resolve:
		if !st.Exists {
			if !out.Created {
				return nil
			}
			next.Exists, next.SID, next.Turn = true, out.SessionID, ""
			return []laneState{next}
		}
		if out.Created || !sidMatches(st.SID, out.SessionID) {
			return nil // a second session for the key: a fork
		}
		next.SID = out.SessionID
	case Reset:
		if !st.Exists || st.SID == out.SessionID {
			return nil
		}
		next.SID = out.SessionID
	case Start:
		if !st.Exists || (st.Turn != "" && st.Turn != in.Turn) || !sidMatches(st.SID, out.SessionID) {
			return nil // two open turns on one lane
		}
		next.Turn, next.SID = in.Turn, out.SessionID
	case Complete:
		if !st.Exists || st.Turn != in.Turn || !sidMatches(st.SID, out.SessionID) {
			return nil // a completion of a turn that was not open
		}
		next.Turn, next.SID = "", out.SessionID
	case Message:
		if !st.Exists || st.Turn != in.Turn || !sidMatches(st.SID, in.SessionID) {
			return nil // a message of a turn that was not open (the fence)
		}
	case Interrupt:
		if st.Turn != in.Turn {
			return nil
		}
		next.Turn = ""
	}
	return []laneState{next}
}

// applied is what op does to st when it takes effect (nothing when the
// rules refuse it in st).
func applied(st laneState, in Input) []laneState {
	next := st
	switch in.Kind {
	case Resolve:
		if !st.Exists {
			next.Exists, next.SID, next.Turn = true, unknownSID, ""
			return []laneState{next}
		}
	case Reset:
		if st.Exists {
			next.SID = unknownSID
			return []laneState{next}
		}
	case Start:
		if st.Exists && st.Turn == "" {
			next.Turn = in.Turn
			return []laneState{next}
		}
	case Complete:
		if st.Exists && st.Turn == in.Turn {
			next.Turn = ""
			return []laneState{next}
		}
	}
	return nil
}

// refusalPossible says whether a refusal with out's code agrees with st.
// Refusals that rest on a node's read models (a message to a session its
// index does not know yet) are always possible: they change nothing.
func refusalPossible(st laneState, in Input, out Output) bool {
	switch out.Code {
	case "busy":
		return st.Exists && st.Turn != "" && st.Turn != in.Turn
	case "turn_not_open":
		if in.Kind == Complete {
			return st.Turn != in.Turn
		}
		return true
	case "not_found":
		return in.Kind == Message || !st.Exists
	}
	return true
}

// LaneModel is the porcupine model of lanes, partitioned by key.
var LaneModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(Input).Key
			byKey[k] = append(byKey[k], op)
		}
		keys := make([]string, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, len(keys))
		for i, k := range keys {
			out[i] = byKey[k]
		}
		return out
	},
	Init: func() []interface{} { return []interface{}{laneState{}} },
	Step: func(state, input, output interface{}) []interface{} {
		next := laneStep(state.(laneState), input.(Input), output.(Output))
		out := make([]interface{}, len(next))
		for i, s := range next {
			out[i] = s
		}
		return out
	},
	Equal: func(a, b interface{}) bool { return a.(laneState) == b.(laneState) },
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(Input), output.(Output)
		return fmt.Sprintf("%s %s -> %s %s %s v%d", in.Kind, in.Turn, out.Outcome, out.Code, out.SessionID, out.Version)
	},
}

// Linearizability is the verdict of the lane model over a history.
type Linearizability struct {
	Result porcupine.CheckResult
	// Keys are the lanes whose operations are not linearizable.
	Keys []string
	// Ops are those lanes' operations, for the report.
	Ops map[string][]Op
}

// CheckLinearizable checks every lane's operations against the model,
// within timeout (then the result is porcupine.Unknown).
func CheckLinearizable(ops []Op, timeout time.Duration) Linearizability {
	model := LaneModel.ToModel()
	res := Linearizability{Result: porcupine.Ok, Ops: map[string][]Op{}}
	byKey := map[string][]Op{}
	for _, o := range ops {
		byKey[o.Input.Key] = append(byKey[o.Input.Key], o)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		history := make([]porcupine.Operation, len(byKey[k]))
		for i, o := range byKey[k] {
			history[i] = porcupine.Operation{ClientId: o.Client, Input: o.Input, Call: o.Invoke, Output: o.Output, Return: o.Complete}
		}
		switch porcupine.CheckOperationsTimeout(model, history, timeout) {
		case porcupine.Illegal:
			res.Result = porcupine.Illegal
			res.Keys = append(res.Keys, k)
			res.Ops[k] = slices.Clone(byKey[k])
		case porcupine.Unknown:
			if res.Result == porcupine.Ok {
				res.Result = porcupine.Unknown
			}
		}
	}
	return res
}
