package kurrentdb

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/gossip"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/serverfeatures"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// streamsService is event_store.client.streams.Streams.
type streamsService struct {
	streams.UnimplementedStreamsServer
	s *Server
}

// exception builds a status carrying KurrentDB's "exception" trailer, which
// the client reads to recognise the error.
func exception(ctx context.Context, code codes.Code, kind, msg string, kv ...string) error {
	md := metadata.Pairs(append([]string{"exception", kind}, kv...)...)
	_ = grpc.SetTrailer(ctx, md)
	return status.Error(code, msg)
}

func (ss *streamsService) Append(srv streams.Streams_AppendServer) error {
	ctx := srv.Context()
	first, err := srv.Recv()
	if err != nil {
		return err
	}
	opts := first.GetOptions()
	if opts == nil {
		return status.Error(codes.InvalidArgument, "the first append message must carry the options")
	}
	stream := string(opts.GetStreamIdentifier().GetStreamName())
	if stream == "" {
		return status.Error(codes.InvalidArgument, "stream name is empty")
	}
	var x expectation
	switch v := opts.GetExpectedStreamRevision().(type) {
	case *streams.AppendReq_Options_Revision:
		x = expectation{kind: expectRevision, revision: v.Revision}
	case *streams.AppendReq_Options_NoStream:
		x = expectation{kind: expectNoStream}
	case *streams.AppendReq_Options_StreamExists:
		x = expectation{kind: expectStreamExists}
	default:
		x = expectation{kind: expectAny}
	}
	if x.kind == expectRevision && x.revision > deletedStream {
		return status.Error(codes.InvalidArgument, "expected revision out of range")
	}

	var recs []*record
	size := 0
	for {
		req, err := srv.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		p := req.GetProposedMessage()
		if p == nil {
			return status.Error(codes.InvalidArgument, "expected a proposed message")
		}
		size += len(p.GetData()) + len(p.GetCustomMetadata())
		if size > ss.s.cfg.maxAppendSize {
			n := strconv.Itoa(ss.s.cfg.maxAppendSize)
			return exception(ctx, codes.InvalidArgument, "maximum-append-size-exceeded",
				"Maximum Append Size of "+n+" Exceeded.", "maximum-append-size", n)
		}
		id, err := uuidFromProto(p.GetId())
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		md := p.GetMetadata()
		for _, key := range []string{"type", "content-type"} {
			if _, ok := md[key]; !ok {
				return exception(ctx, codes.InvalidArgument, "missing-required-metadata-property",
					"Required Metadata Property '"+key+"' is missing", "required-metadata-properties", "type,content-type")
			}
		}
		recs = append(recs, &record{
			stream:      stream,
			id:          id,
			eventType:   md["type"],
			contentType: md["content-type"],
			data:        p.GetData(),
			metadata:    p.GetCustomMetadata(),
		})
	}

	out := ss.s.log.appendEvents(stream, x, recs)
	if out.deleted {
		return streamDeleted(ctx, stream)
	}
	if out.wrongVersion {
		w := &streams.AppendResp_WrongExpectedVersion{}
		if out.exists {
			w.CurrentRevisionOption = &streams.AppendResp_WrongExpectedVersion_CurrentRevision{CurrentRevision: out.current}
			w.CurrentRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_CurrentRevision_20_6_0{CurrentRevision_20_6_0: out.current}
		} else {
			w.CurrentRevisionOption = &streams.AppendResp_WrongExpectedVersion_CurrentNoStream{CurrentNoStream: &shared.Empty{}}
			w.CurrentRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_NoStream_20_6_0{NoStream_20_6_0: &shared.Empty{}}
		}
		switch x.kind {
		case expectRevision:
			w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedRevision{ExpectedRevision: x.revision}
			w.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_ExpectedRevision_20_6_0{ExpectedRevision_20_6_0: x.revision}
		case expectNoStream:
			w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedNoStream{ExpectedNoStream: &shared.Empty{}}
		case expectStreamExists:
			w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedStreamExists{ExpectedStreamExists: &shared.Empty{}}
			w.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_StreamExists_20_6_0{StreamExists_20_6_0: &shared.Empty{}}
		default:
			w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedAny{ExpectedAny: &shared.Empty{}}
			w.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_Any_20_6_0{Any_20_6_0: &shared.Empty{}}
		}
		return srv.SendAndClose(&streams.AppendResp{Result: &streams.AppendResp_WrongExpectedVersion_{WrongExpectedVersion: w}})
	}
	ok := &streams.AppendResp_Success{}
	if out.exists {
		ok.CurrentRevisionOption = &streams.AppendResp_Success_CurrentRevision{CurrentRevision: out.current}
	} else {
		ok.CurrentRevisionOption = &streams.AppendResp_Success_NoStream{NoStream: &shared.Empty{}}
	}
	if out.idempotent || !out.exists {
		// The server does not know where the original write landed.
		ok.PositionOption = &streams.AppendResp_Success_NoPosition{NoPosition: &shared.Empty{}}
	} else {
		ok.PositionOption = &streams.AppendResp_Success_Position{Position: &streams.AppendResp_Position{
			CommitPosition: out.position, PreparePosition: out.position,
		}}
	}
	return srv.SendAndClose(&streams.AppendResp{Result: &streams.AppendResp_Success_{Success: ok}})
}

func uuidFromProto(u *shared.UUID) (uuid.UUID, error) {
	if s := u.GetStructured(); s != nil {
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], uint64(s.GetMostSignificantBits()))
		binary.BigEndian.PutUint64(b[8:], uint64(s.GetLeastSignificantBits()))
		return uuid.UUID(b), nil
	}
	id, err := uuid.Parse(u.GetString_())
	if err != nil {
		return uuid.Nil, fmt.Errorf("invalid event id: %w", err)
	}
	return id, nil
}

// readOptions is a decoded ReadReq.
type readOptions struct {
	all       bool
	stream    string
	backwards bool
	// from: start, end or a revision/position.
	fromStart, fromEnd bool
	from               uint64
	count              uint64
	subscription       bool
	filter             *filter
	checkpointEvery    int // scanned events between checkpoints (filtered subscriptions)
	stringIDs          bool
}

func decodeRead(req *streams.ReadReq) (readOptions, error) {
	o := req.GetOptions()
	if o == nil {
		return readOptions{}, status.Error(codes.InvalidArgument, "read options missing")
	}
	r := readOptions{backwards: o.GetReadDirection() == streams.ReadReq_Options_Backwards}
	switch so := o.GetStreamOption().(type) {
	case *streams.ReadReq_Options_Stream:
		r.stream = string(so.Stream.GetStreamIdentifier().GetStreamName())
		switch rev := so.Stream.GetRevisionOption().(type) {
		case *streams.ReadReq_Options_StreamOptions_Revision:
			r.from = rev.Revision
		case *streams.ReadReq_Options_StreamOptions_End:
			r.fromEnd = true
		default:
			r.fromStart = true
		}
	case *streams.ReadReq_Options_All:
		r.all = true
		switch p := so.All.GetAllOption().(type) {
		case *streams.ReadReq_Options_AllOptions_Position:
			r.from = p.Position.GetCommitPosition()
		case *streams.ReadReq_Options_AllOptions_End:
			r.fromEnd = true
		default:
			r.fromStart = true
		}
	default:
		return readOptions{}, status.Error(codes.InvalidArgument, "read needs a stream or $all")
	}
	switch c := o.GetCountOption().(type) {
	case *streams.ReadReq_Options_Count:
		r.count = c.Count
	case *streams.ReadReq_Options_Subscription:
		r.subscription = true
	}
	if f := o.GetFilter(); f != nil {
		if !r.all {
			return readOptions{}, status.Error(codes.InvalidArgument, "filters apply to $all only")
		}
		var expr *streams.ReadReq_Options_FilterOptions_Expression
		r.filter = &filter{}
		if e := f.GetStreamIdentifier(); e != nil {
			expr, r.filter.onStream = e, true
		} else {
			expr = f.GetEventType()
		}
		if expr.GetRegex() != "" {
			re, err := regexp.Compile(expr.GetRegex())
			if err != nil {
				return readOptions{}, status.Error(codes.InvalidArgument, "invalid filter regex: "+err.Error())
			}
			r.filter.re = re
		} else {
			r.filter.prefixes = expr.GetPrefix()
		}
		window := 32
		if f.GetMax() > 0 {
			window = int(f.GetMax())
		}
		mult := max(int(f.GetCheckpointIntervalMultiplier()), 1)
		r.checkpointEvery = window * mult
	}
	r.stringIDs = o.GetUuidOption().GetString_() != nil
	return r, nil
}

func (ss *streamsService) Read(req *streams.ReadReq, srv streams.Streams_ReadServer) error {
	o, err := decodeRead(req)
	if err != nil {
		return err
	}
	if o.subscription {
		return ss.subscribe(o, srv)
	}
	var recs []*record
	if o.all {
		all, _ := ss.s.log.allRecords()
		recs = readAllRange(all, o)
	} else {
		v := ss.s.log.view(o.stream)
		switch v.status() {
		case readDeleted:
			return streamDeleted(srv.Context(), o.stream)
		case readNotFound:
			return srv.Send(&streams.ReadResp{Content: &streams.ReadResp_StreamNotFound_{StreamNotFound: &streams.ReadResp_StreamNotFound{
				StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte(o.stream)},
			}}})
		}
		recs = readStreamRange(v, o)
	}
	for _, r := range recs {
		if err := srv.Send(eventResp(r, o.stringIDs)); err != nil {
			return err
		}
	}
	return nil
}

// readStreamRange: revision-inclusive, in the read's direction, up to
// count, without the events $tb, $maxCount or $maxAge hide.
func readStreamRange(v streamView, o readOptions) []*record {
	var out []*record
	if !o.backwards {
		from := o.from
		switch {
		case o.fromStart:
			from = 0
		case o.fromEnd:
			return nil
		}
		from = min(max(from, v.first()), deletedStream)
		for i := firstAfter(v.recs, int64(from)-1); i < len(v.recs) && uint64(len(out)) < o.count; i++ {
			if r := v.recs[i]; v.visible(r) {
				out = append(out, r)
			}
		}
		return out
	}
	end := o.from
	switch {
	case o.fromEnd:
		end = uint64(v.last)
	case o.fromStart:
		end = 0
	}
	first := v.first()
	for i := firstAfter(v.recs, int64(min(end, deletedStream))) - 1; i >= 0 && uint64(len(out)) < o.count; i-- {
		r := v.recs[i]
		if r.revision < first {
			break
		}
		if v.visible(r) {
			out = append(out, r)
		}
	}
	return out
}

// readAllRange: forwards from a position inclusive, backwards from a
// position exclusive, filtered when asked, up to count.
func readAllRange(all []*record, o readOptions) []*record {
	var out []*record
	if !o.backwards {
		i := firstAtOrAfter(all, o.from)
		if o.fromStart {
			i = 0
		}
		if o.fromEnd {
			i = len(all)
		}
		for ; i < len(all) && uint64(len(out)) < o.count; i++ {
			if o.filter.match(all[i]) {
				out = append(out, all[i])
			}
		}
		return out
	}
	i := firstAtOrAfter(all, o.from) - 1
	if o.fromEnd {
		i = len(all) - 1
	}
	if o.fromStart {
		i = -1
	}
	for ; i >= 0 && uint64(len(out)) < o.count; i-- {
		if o.filter.match(all[i]) {
			out = append(out, all[i])
		}
	}
	return out
}

// eventResp is the ReadResp of one event. The created date is in .NET ticks
// (100 ns) since the Unix epoch, as the server writes it: the client aborts
// the process (log.Fatalf) when it is missing.
func eventResp(r *record, stringIDs bool) *streams.ReadResp {
	id := &shared.UUID{}
	if stringIDs {
		id.Value = &shared.UUID_String_{String_: r.id.String()}
	} else {
		most := binary.BigEndian.Uint64(r.id[:8])
		least := binary.BigEndian.Uint64(r.id[8:])
		id.Value = &shared.UUID_Structured_{Structured: &shared.UUID_Structured{
			MostSignificantBits: int64(most), LeastSignificantBits: int64(least),
		}}
	}
	return &streams.ReadResp{Content: &streams.ReadResp_Event{Event: &streams.ReadResp_ReadEvent{
		Event: &streams.ReadResp_ReadEvent_RecordedEvent{
			Id:               id,
			StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte(r.stream)},
			StreamRevision:   r.revision,
			PreparePosition:  r.position,
			CommitPosition:   r.position,
			Metadata: map[string]string{
				"type":         r.eventType,
				"content-type": r.contentType,
				"created":      strconv.FormatInt(r.created.UnixNano()/100, 10),
			},
			CustomMetadata: r.metadata,
			Data:           r.data,
		},
		Position: &streams.ReadResp_ReadEvent_CommitPosition{CommitPosition: r.position},
	}}}
}

// streamDeleted is the server's answer to a read of, or a write to, a
// tombstoned stream.
func streamDeleted(ctx context.Context, name string) error {
	return exception(ctx, codes.FailedPrecondition, "stream-deleted",
		fmt.Sprintf("Event stream '%s' is deleted.", name), "stream-name", name)
}

// subscribe serves a catch-up subscription: confirmation, history after
// the (exclusive) start, caught_up, then live events until the client
// goes away or the server stops.
func (ss *streamsService) subscribe(o readOptions, srv streams.Streams_ReadServer) error {
	if o.backwards {
		return status.Error(codes.InvalidArgument, "subscriptions read forwards")
	}
	ss.s.subscriptions.Add(1)
	if err := srv.Send(&streams.ReadResp{Content: &streams.ReadResp_Confirmation{Confirmation: &streams.ReadResp_SubscriptionConfirmation{
		SubscriptionId: uuid.NewString(),
	}}}); err != nil {
		return err
	}
	if o.all {
		return ss.subscribeAll(o, srv)
	}
	return ss.subscribeStream(o, srv)
}

// subscribeAll follows $all by position, so that a scavenge removing
// records behind it changes nothing; events of deleted, truncated or
// expired streams are delivered until a scavenge removes them, as $all
// reads do.
func (ss *streamsService) subscribeAll(o readOptions, srv streams.Streams_ReadServer) error {
	ctx := srv.Context()
	all, _ := ss.s.log.allRecords()
	// from is the position of the next record to look at.
	var from uint64
	switch {
	case o.fromEnd:
		if len(all) > 0 {
			from = all[len(all)-1].position + 1
		}
	case o.fromStart:
	default:
		from = o.from + 1 // the start position is exclusive
	}
	scanned := 0
	caughtUp := false
	for {
		all, changed := ss.s.log.allRecords()
		for i := firstAtOrAfter(all, from); i < len(all); i++ {
			r := all[i]
			if o.filter.match(r) {
				if err := srv.Send(eventResp(r, o.stringIDs)); err != nil {
					return err
				}
			}
			from = r.position + 1
			scanned++
			if o.checkpointEvery > 0 && scanned%o.checkpointEvery == 0 {
				if err := srv.Send(&streams.ReadResp{Content: &streams.ReadResp_Checkpoint_{Checkpoint: &streams.ReadResp_Checkpoint{
					CommitPosition: r.position, PreparePosition: r.position,
				}}}); err != nil {
					return err
				}
			}
		}
		if !caughtUp {
			caughtUp = true
			if err := sendCaughtUp(srv); err != nil {
				return err
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// subscribeStream catches up with the stream's reads (a tombstoned stream
// ends the subscription with stream-deleted, a missing or soft-deleted one
// has nothing yet, $tb, $maxCount and $maxAge hide what they hide), then
// delivers every event appended since, after the last one sent; a
// tombstone is delivered, then ends the subscription with stream-deleted.
func (ss *streamsService) subscribeStream(o readOptions, srv streams.Streams_ReadServer) error {
	ctx := srv.Context()
	// checkpoint is the revision of the last event sent (or skipped); -1: none.
	checkpoint := int64(-1)
	switch {
	case o.fromEnd:
		checkpoint = ss.s.log.view(o.stream).last
		if checkpoint == deletedStream {
			checkpoint = -1 // catch-up reports the deletion
		}
	case o.fromStart:
	default:
		checkpoint = int64(min(o.from, deletedStream-1))
	}
	caughtUp := false
	var live uint64 // live events are those at or after this position
	for {
		v := ss.s.log.view(o.stream)
		if !caughtUp {
			live = v.next
			switch v.status() {
			case readDeleted:
				return streamDeleted(ctx, o.stream)
			case readOK:
				for i := firstAfter(v.recs, checkpoint); i < len(v.recs); i++ {
					r := v.recs[i]
					if !v.visible(r) {
						continue
					}
					if err := srv.Send(eventResp(r, o.stringIDs)); err != nil {
						return err
					}
					checkpoint = int64(r.revision)
				}
			}
			caughtUp = true
			if err := sendCaughtUp(srv); err != nil {
				return err
			}
		} else {
			for i := firstAfter(v.recs, checkpoint); i < len(v.recs); i++ {
				r := v.recs[i]
				if r.position < live {
					continue
				}
				if err := srv.Send(eventResp(r, o.stringIDs)); err != nil {
					return err
				}
				checkpoint = int64(r.revision)
				if r.tombstone() {
					return streamDeleted(ctx, o.stream)
				}
			}
		}
		select {
		case <-v.changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func sendCaughtUp(srv streams.Streams_ReadServer) error {
	return srv.Send(&streams.ReadResp{Content: &streams.ReadResp_CaughtUp_{CaughtUp: &streams.ReadResp_CaughtUp{}}})
}

// Delete soft-deletes a stream.
func (ss *streamsService) Delete(ctx context.Context, req *streams.DeleteReq) (*streams.DeleteResp, error) {
	o := req.GetOptions()
	name := string(o.GetStreamIdentifier().GetStreamName())
	x := expectation{kind: expectAny}
	switch v := o.GetExpectedStreamRevision().(type) {
	case *streams.DeleteReq_Options_Revision:
		x = expectation{kind: expectRevision, revision: v.Revision}
	case *streams.DeleteReq_Options_NoStream:
		x = expectation{kind: expectNoStream}
	case *streams.DeleteReq_Options_StreamExists:
		x = expectation{kind: expectStreamExists}
	}
	out, err := ss.deleteStream(ctx, "Delete", name, x, false)
	if err != nil {
		return nil, err
	}
	return &streams.DeleteResp{PositionOption: &streams.DeleteResp_Position_{Position: &streams.DeleteResp_Position{
		CommitPosition: out.position, PreparePosition: out.position,
	}}}, nil
}

// Tombstone hard-deletes a stream.
func (ss *streamsService) Tombstone(ctx context.Context, req *streams.TombstoneReq) (*streams.TombstoneResp, error) {
	o := req.GetOptions()
	name := string(o.GetStreamIdentifier().GetStreamName())
	x := expectation{kind: expectAny}
	switch v := o.GetExpectedStreamRevision().(type) {
	case *streams.TombstoneReq_Options_Revision:
		x = expectation{kind: expectRevision, revision: v.Revision}
	case *streams.TombstoneReq_Options_NoStream:
		x = expectation{kind: expectNoStream}
	case *streams.TombstoneReq_Options_StreamExists:
		x = expectation{kind: expectStreamExists}
	}
	out, err := ss.deleteStream(ctx, "Delete", name, x, true)
	if err != nil {
		return nil, err
	}
	return &streams.TombstoneResp{PositionOption: &streams.TombstoneResp_Position_{Position: &streams.TombstoneResp_Position{
		CommitPosition: out.position, PreparePosition: out.position,
	}}}, nil
}

func (ss *streamsService) deleteStream(ctx context.Context, op, name string, x expectation, hard bool) (deleteOutcome, error) {
	if name == "" {
		return deleteOutcome{}, status.Error(codes.InvalidArgument, "stream name is empty")
	}
	if x.kind == expectRevision && x.revision > deletedStream {
		return deleteOutcome{}, status.Error(codes.InvalidArgument, "expected revision out of range")
	}
	out := ss.s.log.deleteStream(name, x, hard)
	switch {
	case out.deleted:
		return out, streamDeleted(ctx, name)
	case out.wrongVersion:
		expected := map[expectKind]int64{expectAny: -2, expectNoStream: -1, expectStreamExists: -4}[x.kind]
		if x.kind == expectRevision {
			expected = int64(x.revision)
		}
		return out, exception(ctx, codes.FailedPrecondition, "wrong-expected-version",
			fmt.Sprintf("%s failed due to WrongExpectedVersion. Stream: %s, Expected version: %d, Actual version: %d", op, name, expected, out.current),
			"stream-name", name, "expected-version", strconv.FormatInt(expected, 10), "actual-version", strconv.FormatInt(out.current, 10))
	}
	return out, nil
}

// featuresService is event_store.client.server_features.ServerFeatures.
type featuresService struct {
	serverfeatures.UnimplementedServerFeaturesServer
}

func (featuresService) GetSupportedMethods(context.Context, *shared.Empty) (*serverfeatures.SupportedMethods, error) {
	const svc = "event_store.client.streams.streams"
	const ops = "event_store.client.operations.operations"
	return &serverfeatures.SupportedMethods{
		EventStoreServerVersion: Version,
		Methods: []*serverfeatures.SupportedMethod{
			{ServiceName: svc, MethodName: "read"},
			{ServiceName: svc, MethodName: "append"},
			{ServiceName: svc, MethodName: "delete"},
			{ServiceName: svc, MethodName: "tombstone"},
			{ServiceName: "event_store.client.persistent_subscriptions.persistentsubscriptions", MethodName: "create", Features: []string{"stream", "all"}},
			{ServiceName: ops, MethodName: "startscavenge"},
			{ServiceName: ops, MethodName: "stopscavenge"},
			{ServiceName: "event_store.client.gossip.gossip", MethodName: "read"},
		},
	}, nil
}

// gossipService is event_store.client.gossip.Gossip: the emulator's nodes,
// all alive, the first the leader.
type gossipService struct {
	gossip.UnimplementedGossipServer
	s *Server
}

func (g *gossipService) Read(context.Context, *shared.Empty) (*gossip.ClusterInfo, error) {
	info := &gossip.ClusterInfo{}
	for _, n := range g.s.nodes {
		host, port := n.advertisedHostPort()
		state := gossip.MemberInfo_Follower
		if n.leader {
			state = gossip.MemberInfo_Leader
		}
		most := binary.BigEndian.Uint64(n.id[:8])
		least := binary.BigEndian.Uint64(n.id[8:])
		info.Members = append(info.Members, &gossip.MemberInfo{
			InstanceId: &shared.UUID{Value: &shared.UUID_Structured_{Structured: &shared.UUID_Structured{
				MostSignificantBits: int64(most), LeastSignificantBits: int64(least),
			}}},
			TimeStamp:    g.s.log.now().UnixNano() / 100,
			State:        state,
			IsAlive:      true,
			HttpEndPoint: &gossip.EndPoint{Address: host, Port: port},
		})
	}
	return info, nil
}

// authorized checks the basic-auth header against the configured login.
func (s *Server) authorized(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(s.cfg.login+":"+s.cfg.password))
	for _, v := range md.Get("authorization") {
		if v == want {
			return nil
		}
	}
	return status.Error(codes.Unauthenticated, "Bad authentication")
}

// open are the calls the client makes before it has credentials to send.
func open(method string) bool {
	return strings.Contains(method, "server_features") || strings.Contains(method, "gossip")
}

func (s *Server) authUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if !open(info.FullMethod) {
		if err := s.authorized(ctx); err != nil {
			return nil, err
		}
	}
	return h(ctx, req)
}

func (s *Server) authStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if !open(info.FullMethod) {
		if err := s.authorized(ss.Context()); err != nil {
			return err
		}
	}
	return h(srv, ss)
}
