package transport

import (
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"

	"github.com/tileflight/tileflight/transport/sendconn"
)

// WriteBuffer is the gRPC server's write buffer per connection when
// connections are not sendconn.Conns (TLS, or -zero-copy-send=false). A
// DoGet streams hundreds of MiB as 16 KiB HTTP/2 frames; with gRPC's
// default 32 KiB buffer every second frame is a write(2), and those system
// calls were 12 % of the daemon's CPU on a 256 MiB zstd DoGet. 256 KiB
// cuts them eightfold (measured side by side: 5-9 % less server CPU per
// DoGet; figures in the issue-14 section of benchmarks/RESULTS.md). gRPC
// shares the buffer by default (grpc-go 1.85: a connection returns it to
// a pool once flushed; grpc.SharedWriteBuffer, which turned that on, is
// deprecated), so thousands of idle clients cost nothing extra.
// It is also the size of a sendconn.Conn's writes (sendconn.FlushBytes).
const WriteBuffer = sendconn.FlushBytes

// Config says how the server's connections carry bytes.
type Config struct {
	// TLS: the connections are TLS (grpc.Creds among the server's
	// options). Under TLS a net.Conn sees records, not HTTP/2 frames, so
	// no sendconn.Conn can follow them.
	TLS bool
	// ZeroCopySend makes each plaintext connection a sendconn.Conn with
	// gRPC's write buffer off, so that a DoGet's record buffers go from
	// where they are into the connection's writev (flightd
	// -zero-copy-send, on by default). Off (or under TLS) gRPC writes
	// through its own WriteBuffer, copying every byte into it, and
	// sendconn is not used at all.
	ZeroCopySend bool
}

// sendconn says whether connections are sendconn.Conns.
func (c Config) sendconn() bool { return c.ZeroCopySend && !c.TLS }

// ServerOptions are the gRPC server options that shape how bytes move, and
// Listener the listener they go with; the daemon uses both, and so does
// the in-memory benchmark server, so that the ceiling it measures is the
// same transport without the storage.
//
// With sendconn (c.ZeroCopySend, plaintext) gRPC's write buffer is off and
// each connection is a sendconn.Conn: a DoGet's record buffers go from
// where they are into the connection's writev, without the copy into
// gRPC's buffer (about 5 % of the daemon's CPU and of a whole .b2nd read's
// time; issue 9 section of benchmarks/RESULTS.md). Otherwise gRPC keeps
// its buffer, of WriteBuffer bytes. Both ways sendCodec hands gRPC the
// record buffers without copying them, and dirtyPool gives out receive
// buffers without clearing them.
func ServerOptions(c Config) []grpc.ServerOption {
	opts := []grpc.ServerOption{grpc.WriteBufferSize(WriteBuffer)}
	if c.sendconn() {
		opts = []grpc.ServerOption{grpc.WriteBufferSize(0)}
	}
	opts = append(opts, experimental.BufferPool(recvPool))
	return append(opts, codecOptions(c.sendconn())...)
}

// Listener is lis as ServerOptions(c) needs it served: with sendconn, a
// sendconn.Listener; otherwise lis itself.
func Listener(lis net.Listener, c Config) net.Listener {
	if !c.sendconn() {
		return lis
	}
	return sendconn.Listener{Listener: lis}
}
