package flightsvc

import (
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"

	"github.com/tileflight/tileflight/internal/sendconn"
)

// TransportWriteBuffer is the gRPC server's write buffer per connection
// under TLS (plaintext connections gather their writes themselves, in
// writes of the same size: sendconn.FlushBytes). A DoGet streams hundreds
// of MiB as 16 KiB HTTP/2 frames; with gRPC's default 32 KiB buffer every
// second frame is a write(2), and those system calls were 12 % of the
// daemon's CPU on a 256 MiB zstd DoGet. 256 KiB cuts them eightfold
// (measured side by side: 5-9 % less server CPU per DoGet; figures in the
// issue-14 section of benchmarks/RESULTS.md). The buffer is shared
// (SharedWriteBuffer): an idle connection returns it to a pool instead of
// holding it, so thousands of idle clients cost nothing extra.
const TransportWriteBuffer = 256 << 10

// TransportOptions are the gRPC server options that shape how bytes move,
// and TransportListener the listener they go with; the daemon uses both,
// and so does the in-memory benchmark server, so that the ceiling it
// measures is the same transport without the storage.
//
// On plaintext connections gRPC's write buffer is off and each connection
// is a sendconn.Conn: a DoGet's record buffers go from where they are into
// the connection's writev, without the copy into gRPC's buffer (about 5 %
// of the daemon's CPU and of a whole .b2nd read's time; issue 9 section of
// benchmarks/RESULTS.md). Under TLS the connection sees records, not
// frames, so gRPC keeps its buffer (TransportWriteBuffer). Both ways
// sendCodec hands gRPC the record buffers without copying them, and
// dirtyPool gives out receive buffers without clearing them.
func TransportOptions(plaintext bool) []grpc.ServerOption {
	opts := []grpc.ServerOption{grpc.WriteBufferSize(TransportWriteBuffer), grpc.SharedWriteBuffer(true)}
	if plaintext {
		opts = []grpc.ServerOption{grpc.WriteBufferSize(0)}
	}
	opts = append(opts, experimental.BufferPool(recvPool))
	return append(opts, codecOptions()...)
}

// TransportListener is lis as TransportOptions(plaintext) needs it served.
func TransportListener(lis net.Listener, plaintext bool) net.Listener {
	if !plaintext {
		return lis
	}
	return sendconn.Listener{Listener: lis}
}
