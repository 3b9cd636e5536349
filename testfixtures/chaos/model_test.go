package chaos

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func op(id, client int, invoke, complete int64, in Input, out Output) Op {
	in.Key = "k"
	return Op{ID: id, Client: client, Input: in, Output: out, Invoke: invoke, Complete: complete}
}

func TestCheckLinearizable(t *testing.T) {
	ok := func(sid string, created bool, v uint64) Output {
		return Output{Outcome: OK, SessionID: sid, Created: created, Version: v}
	}
	tests := []struct {
		name string
		ops  []Op
		want porcupine.CheckResult
	}{
		{"one session, a turn, its message and completion", []Op{
			op(0, 0, 0, 10, Input{Kind: Resolve}, ok("s1", true, 1)),
			op(1, 1, 5, 12, Input{Kind: Resolve}, ok("s1", false, 1)),
			op(2, 0, 20, 30, Input{Kind: Start, Turn: "a"}, ok("s1", false, 2)),
			op(3, 0, 31, 32, Input{Kind: Message, Turn: "a", SessionID: "s1"}, Output{Outcome: OK}),
			op(4, 1, 25, 33, Input{Kind: Start, Turn: "b"}, Output{Outcome: Failed, Status: 409, Code: "busy"}),
			op(5, 0, 40, 50, Input{Kind: Complete, Turn: "a"}, ok("s1", false, 3)),
			op(6, 1, 60, 61, Input{Kind: Message, Turn: "a", SessionID: "s1"}, Output{Outcome: Failed, Status: 409, Code: "turn_not_open"}),
		}, porcupine.Ok},
		{"two resolves both created: a fork", []Op{
			op(0, 0, 0, 10, Input{Kind: Resolve}, ok("s1", true, 1)),
			op(1, 1, 0, 10, Input{Kind: Resolve}, ok("s2", true, 1)),
		}, porcupine.Illegal},
		{"two turns started, both acknowledged, none completed", []Op{
			op(0, 0, 0, 10, Input{Kind: Resolve}, ok("s1", true, 1)),
			op(1, 0, 20, 30, Input{Kind: Start, Turn: "a"}, ok("s1", false, 2)),
			op(2, 1, 20, 30, Input{Kind: Start, Turn: "b"}, ok("s1", false, 3)),
		}, porcupine.Illegal},
		{"a message of a turn after its completion", []Op{
			op(0, 0, 0, 10, Input{Kind: Resolve}, ok("s1", true, 1)),
			op(1, 0, 20, 30, Input{Kind: Start, Turn: "a"}, ok("s1", false, 2)),
			op(2, 0, 40, 50, Input{Kind: Complete, Turn: "a"}, ok("s1", false, 3)),
			op(3, 1, 60, 70, Input{Kind: Message, Turn: "a", SessionID: "s1"}, Output{Outcome: OK}),
		}, porcupine.Illegal},
		{"an unknown start may have opened the turn a later start found busy", []Op{
			op(0, 0, 0, 10, Input{Kind: Resolve}, ok("s1", true, 1)),
			op(1, 0, 20, 1000, Input{Kind: Start, Turn: "a"}, Output{Outcome: Unknown}),
			op(2, 1, 40, 50, Input{Kind: Start, Turn: "b"}, Output{Outcome: Failed, Status: 409, Code: "busy"}),
		}, porcupine.Ok},
		{"an answer older than one acknowledged before it", []Op{
			op(0, 0, 0, 10, Input{Kind: Resolve}, ok("s1", true, 1)),
			op(1, 0, 20, 30, Input{Kind: Start, Turn: "a"}, ok("s1", false, 2)),
			op(2, 1, 40, 50, Input{Kind: Reset}, ok("s2", false, 2)),
		}, porcupine.Illegal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckLinearizable(tt.ops, 10*time.Second)
			if got.Result != tt.want {
				t.Errorf("CheckLinearizable = %v (keys %v), want %v", got.Result, got.Keys, tt.want)
			}
		})
	}
}
