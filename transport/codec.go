package transport

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the "proto" codec wrapped below
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// The server's gRPC codec is protobuf for every message, with two
// exceptions: a DoGet's FlightData goes out as the slices it is made of,
// and a FlightData that comes in is copied once, its byte fields slices of
// that copy (recv.go).
//
// gRPC's protobuf codec marshals a FlightData by copying its body into a
// new buffer, and a body of several Arrow buffers had first been gathered
// into one: two copies of every byte a DoGet sends, on top of the
// kernel's (and of gRPC's into its write buffer, which plaintext
// connections do without: transport/sendconn). sendCodec writes the
// protobuf framing of the message itself (data_header, then data_body's
// tag and length) and hands gRPC the body's Arrow buffers as they are,
// each a mem.Buffer whose release is tied to the record's: gRPC writes
// frames after SendMsg returns, so the record stays retained until gRPC
// has freed every buffer of the message.
//
// A stream knows the codec is there through its context (the stream
// interceptor installed with it): on a server without it, payloadWriter
// sends plain FlightData through the ordinary codec.

// outgoingData is a FlightData in parts: what payloadWriter sends on a
// stream whose server has sendCodec.
type outgoingData struct {
	header []byte   // data_header (the IPC message's flatbuffer)
	parts  [][]byte // data_body, in order; never modified while referenced
	// release drops the sender's hold on the parts once gRPC no longer
	// needs them (nil: the parts are the sender's to keep as they are).
	release func()
}

// FlightData's field numbers (Flight.proto).
const (
	fieldDataHeader protowire.Number = 2
	fieldDataBody   protowire.Number = 1000
)

type sendCodec struct{ proto encoding.CodecV2 }

func (sendCodec) Name() string { return "proto" }

func (c sendCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*outgoingData); ok {
		return m.marshal(), nil
	}
	return c.proto.Marshal(v)
}

func (c sendCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if fd, ok := v.(*flight.FlightData); ok {
		return unmarshalFlightData(data, fd)
	}
	return c.proto.Unmarshal(data, v)
}

// marshal lays the message out as protobuf would (fields in number order,
// empty ones left out). Small parts are copied into the framing buffers:
// gRPC does not reference-count buffers under its pooling threshold, and
// copying a few hundred bytes costs less than a buffer object.
func (m *outgoingData) marshal() mem.BufferSlice {
	bodyLen := 0
	for _, p := range m.parts {
		bodyLen += len(p)
	}
	var out mem.BufferSlice
	pending := make([]byte, 0, len(m.header)+32) // + two tags and two lengths
	if len(m.header) > 0 {
		pending = protowire.AppendTag(pending, fieldDataHeader, protowire.BytesType)
		pending = protowire.AppendBytes(pending, m.header)
	}
	if bodyLen > 0 {
		pending = protowire.AppendTag(pending, fieldDataBody, protowire.BytesType)
		pending = protowire.AppendVarint(pending, uint64(bodyLen))
	}
	var rel *partsRelease
	for i := range m.parts {
		p := m.parts[i]
		if len(p) == 0 {
			continue
		}
		if m.release == nil || mem.IsBelowBufferPoolingThreshold(cap(p)) {
			pending = append(pending, p...)
			continue
		}
		if len(pending) > 0 {
			out = append(out, mem.SliceBuffer(pending))
			pending = nil
		}
		if rel == nil {
			rel = &partsRelease{release: m.release}
			rel.left.Store(1) // marshal's own hold, dropped below
		}
		rel.left.Add(1)
		out = append(out, mem.NewBuffer(&m.parts[i], rel))
	}
	if len(pending) > 0 {
		out = append(out, mem.SliceBuffer(pending))
	}
	if rel != nil {
		rel.Put(nil)
	} else if m.release != nil {
		m.release()
	}
	return out
}

// partsRelease is the mem.BufferPool of one message's parts: gRPC "puts"
// each part back when it has written it (or dropped the stream), and the
// last one releases the sender's hold.
type partsRelease struct {
	left    atomic.Int64
	release func()
}

// Get is never called by gRPC on a buffer's own pool; were it called, a
// fresh buffer is the correct answer.
func (r *partsRelease) Get(n int) *[]byte {
	b := make([]byte, n)
	return &b
}

func (r *partsRelease) Put(*[]byte) {
	if r.left.Add(-1) == 0 {
		r.release()
	}
}

// zeroCopyKey marks the context of a stream served with sendCodec, and
// sendconnKey that of a stream whose connections are sendconn.Conns.
type (
	zeroCopyKey struct{}
	sendconnKey struct{}
)

func zeroCopy(ctx context.Context) bool {
	return ctx.Value(zeroCopyKey{}) != nil
}

func onSendconn(ctx context.Context) bool {
	return ctx.Value(sendconnKey{}) != nil
}

type markedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s markedStream) Context() context.Context { return s.ctx }

// codecOptions install sendCodec and the interceptor that tells streams
// it is there, and whether their connections are sendconn.Conns
// (sendconn); ServerOptions includes them.
func codecOptions(sendconn bool) []grpc.ServerOption {
	proto := encoding.GetCodecV2("proto")
	if proto == nil {
		panic(fmt.Sprintf("transport: gRPC has no %q codec registered", "proto"))
	}
	mark := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		ctx := context.WithValue(ss.Context(), zeroCopyKey{}, true)
		if sendconn {
			ctx = context.WithValue(ctx, sendconnKey{}, true)
		}
		return h(srv, markedStream{ss, ctx})
	}
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(sendCodec{proto: proto}),
		grpc.ChainStreamInterceptor(mark),
	}
}
