package kurrentdb

import (
	"context"
	"fmt"
	"strconv"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/persistent"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// persistentService is event_store.client.persistent_subscriptions.
// PersistentSubscriptions, as far as creating a group goes: the group is
// remembered (a second create answers already-exists) but never served;
// reading, updating, deleting, listing and the rest answer Unimplemented.
type persistentService struct {
	persistent.UnimplementedPersistentSubscriptionsServer
	s    *Server
	node *node
}

func (p *persistentService) Create(ctx context.Context, req *persistent.CreateReq) (*persistent.CreateResp, error) {
	if err := p.notLeader(ctx); err != nil {
		return nil, err
	}
	o := req.GetOptions()
	var stream string
	switch so := o.GetStreamOption().(type) {
	case *persistent.CreateReq_Options_Stream:
		stream = string(so.Stream.GetStreamIdentifier().GetStreamName())
	case *persistent.CreateReq_Options_All:
		stream = "$all"
	default:
		return nil, status.Error(codes.InvalidArgument, "a persistent subscription needs a stream or $all")
	}
	group := o.GetGroupName()
	p.s.groupsMu.Lock()
	defer p.s.groupsMu.Unlock()
	key := stream + "\x00" + group
	if p.s.groups[key] {
		return nil, exception(ctx, codes.AlreadyExists, "persistent-subscription-exists",
			fmt.Sprintf("Subscription group %s on stream %s exists.", group, stream), "stream-name", stream, "group-name", group)
	}
	p.s.groups[key] = true
	return &persistent.CreateResp{}, nil
}

// notLeader answers a follower's call that needs the leader with the
// leader's endpoint, which the client reconnects to.
func (p *persistentService) notLeader(ctx context.Context) error {
	if p.node.leader {
		return nil
	}
	host, port := p.s.nodes[0].advertisedHostPort()
	return exception(ctx, codes.NotFound, "not-leader", "Leader info available",
		"leader-endpoint-host", host, "leader-endpoint-port", strconv.Itoa(int(port)))
}
