package kurrentdb

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// The operations service (event_store.client.operations.Operations) is not
// in EventStore-Client-Go v4.2.0, which ships no generated code for it; its
// scavenge messages are declared here from KurrentDB's operations.proto and
// handled as dynamic messages.
const operationsService = "event_store.client.operations.Operations"

// operationsFile is operations.proto's scavenge part:
//
//	message StartScavengeReq { Options options = 1;
//	  message Options { int32 thread_count = 1; int32 start_from_chunk = 2; } }
//	message StopScavengeReq { Options options = 1;
//	  message Options { string scavenge_id = 1; } }
//	message ScavengeResp { string scavenge_id = 1; ScavengeResult scavenge_result = 2;
//	  enum ScavengeResult { Started = 0; InProgress = 1; Stopped = 2; } }
var operationsFile = func() protoreflect.FileDescriptor {
	field := func(name string, n int32, typ descriptorpb.FieldDescriptorProto_Type, typeName string) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{
			Name: proto.String(name), Number: proto.Int32(n), Type: typ.Enum(),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), JsonName: proto.String(name),
		}
		if typeName != "" {
			f.TypeName = proto.String(typeName)
		}
		return f
	}
	const pkg = ".event_store.client.operations."
	msg := func(name string, fields ...*descriptorpb.FieldDescriptorProto) *descriptorpb.DescriptorProto {
		return &descriptorpb.DescriptorProto{Name: proto.String(name), Field: fields}
	}
	start := msg("StartScavengeReq", field("options", 1, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, pkg+"StartScavengeReq.Options"))
	start.NestedType = []*descriptorpb.DescriptorProto{msg("Options",
		field("thread_count", 1, descriptorpb.FieldDescriptorProto_TYPE_INT32, ""),
		field("start_from_chunk", 2, descriptorpb.FieldDescriptorProto_TYPE_INT32, ""))}
	stop := msg("StopScavengeReq", field("options", 1, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, pkg+"StopScavengeReq.Options"))
	stop.NestedType = []*descriptorpb.DescriptorProto{msg("Options",
		field("scavenge_id", 1, descriptorpb.FieldDescriptorProto_TYPE_STRING, ""))}
	resp := msg("ScavengeResp",
		field("scavenge_id", 1, descriptorpb.FieldDescriptorProto_TYPE_STRING, ""),
		field("scavenge_result", 2, descriptorpb.FieldDescriptorProto_TYPE_ENUM, pkg+"ScavengeResp.ScavengeResult"))
	value := func(name string, n int32) *descriptorpb.EnumValueDescriptorProto {
		return &descriptorpb.EnumValueDescriptorProto{Name: proto.String(name), Number: proto.Int32(n)}
	}
	resp.EnumType = []*descriptorpb.EnumDescriptorProto{{Name: proto.String("ScavengeResult"),
		Value: []*descriptorpb.EnumValueDescriptorProto{value("Started", 0), value("InProgress", 1), value("Stopped", 2)}}}
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:        proto.String("hermes-emulator/operations.proto"),
		Package:     proto.String("event_store.client.operations"),
		Syntax:      proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{start, stop, resp},
	}, new(protoregistry.Files))
	if err != nil {
		panic(fmt.Sprintf("kurrentdb emulator: operations descriptor: %v", err))
	}
	return fd
}()

var (
	startScavengeReq = operationsFile.Messages().ByName("StartScavengeReq")
	stopScavengeReq  = operationsFile.Messages().ByName("StopScavengeReq")
	scavengeResp     = operationsFile.Messages().ByName("ScavengeResp")
	scavengeResults  = scavengeResp.Enums().ByName("ScavengeResult").Values()
)

func newScavengeResp(id, result string) *dynamicpb.Message {
	m := dynamicpb.NewMessage(scavengeResp)
	m.Set(scavengeResp.Fields().ByName("scavenge_id"), protoreflect.ValueOfString(id))
	m.Set(scavengeResp.Fields().ByName("scavenge_result"), protoreflect.ValueOfEnum(scavengeResults.ByName(protoreflect.Name(result)).Number()))
	return m
}

// operationsServiceDesc serves StartScavenge and StopScavenge; the other
// operations (Shutdown, MergeIndexes, ResignNode, SetNodePriority,
// RestartPersistentSubscriptions) answer Unimplemented.
func operationsServiceDesc(sc *scavenges) *grpc.ServiceDesc {
	unary := func(name string, req protoreflect.MessageDescriptor, h func(context.Context, *dynamicpb.Message) (any, error)) grpc.MethodDesc {
		return grpc.MethodDesc{MethodName: name, Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := dynamicpb.NewMessage(req)
			if err := dec(in); err != nil {
				return nil, err
			}
			if interceptor == nil {
				return h(ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: "/" + operationsService + "/" + name}
			return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return h(ctx, req.(*dynamicpb.Message))
			})
		}}
	}
	return &grpc.ServiceDesc{
		ServiceName: operationsService,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			unary("StartScavenge", startScavengeReq, func(context.Context, *dynamicpb.Message) (any, error) {
				id, result := sc.start()
				return newScavengeResp(id, result), nil
			}),
			unary("StopScavenge", stopScavengeReq, func(ctx context.Context, in *dynamicpb.Message) (any, error) {
				opts := in.Get(stopScavengeReq.Fields().ByName("options")).Message()
				id := opts.Get(opts.Descriptor().Fields().ByName("scavenge_id")).String()
				if !sc.stop(id) {
					return nil, exception(ctx, codes.NotFound, "scavenge-not-found", "Scavenge id was invalid.", "scavenge-id", id)
				}
				return newScavengeResp(id, ScavengeStopped), nil
			}),
		},
		Metadata: "operations.proto",
	}
}

// ScavengeResponse is the operations service's answer to a scavenge call.
type ScavengeResponse struct {
	ID     string
	Result string // ScavengeStarted, ScavengeInProgress or ScavengeStopped
}

// StartScavenge calls Operations/StartScavenge on conn, as KurrentDB's
// clients do: the scavenge runs in the background and ends with a
// $scavengeCompleted event in $scavenges-<id>.
func StartScavenge(ctx context.Context, conn grpc.ClientConnInterface, opts ...grpc.CallOption) (ScavengeResponse, error) {
	req := dynamicpb.NewMessage(startScavengeReq)
	o := dynamicpb.NewMessage(startScavengeReq.Fields().ByName("options").Message())
	o.Set(o.Descriptor().Fields().ByName("thread_count"), protoreflect.ValueOfInt32(1))
	req.Set(startScavengeReq.Fields().ByName("options"), protoreflect.ValueOfMessage(o))
	return callScavenge(ctx, conn, "StartScavenge", req, opts)
}

// StopScavenge calls Operations/StopScavenge on conn for the scavenge id.
func StopScavenge(ctx context.Context, conn grpc.ClientConnInterface, id string, opts ...grpc.CallOption) (ScavengeResponse, error) {
	req := dynamicpb.NewMessage(stopScavengeReq)
	o := dynamicpb.NewMessage(stopScavengeReq.Fields().ByName("options").Message())
	o.Set(o.Descriptor().Fields().ByName("scavenge_id"), protoreflect.ValueOfString(id))
	req.Set(stopScavengeReq.Fields().ByName("options"), protoreflect.ValueOfMessage(o))
	return callScavenge(ctx, conn, "StopScavenge", req, opts)
}

func callScavenge(ctx context.Context, conn grpc.ClientConnInterface, method string, req *dynamicpb.Message, opts []grpc.CallOption) (ScavengeResponse, error) {
	resp := dynamicpb.NewMessage(scavengeResp)
	if err := conn.Invoke(ctx, "/"+operationsService+"/"+method, req, resp, opts...); err != nil {
		return ScavengeResponse{}, fmt.Errorf("operations %s: %w", method, err)
	}
	n := resp.Get(scavengeResp.Fields().ByName("scavenge_result")).Enum()
	result := "unknown"
	if v := scavengeResults.ByNumber(n); v != nil {
		result = string(v.Name())
	}
	return ScavengeResponse{ID: resp.Get(scavengeResp.Fields().ByName("scavenge_id")).String(), Result: result}, nil
}
