package flight

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
)

// TransportWriteBuffer is the gRPC server's write buffer per connection.
// A DoGet streams hundreds of MiB as 16 KiB HTTP/2 frames; with gRPC's
// default 32 KiB buffer every second frame is a write(2), and those
// system calls were 12 % of the daemon's CPU on a 256 MiB zstd DoGet.
// 256 KiB cuts them eightfold (measured side by side: 5-9 % less server
// CPU per DoGet; figures in the issue-14 section of benchmarks/RESULTS.md).
// The buffer is shared
// (SharedWriteBuffer): an idle connection returns it to a pool instead of
// holding it, so thousands of idle clients cost nothing extra.
const TransportWriteBuffer = 256 << 10

// TransportOptions are the gRPC server options that shape how bytes move
// (the write buffer; sendCodec, which sends DoGet bodies without copying
// them; dirtyPool, which hands out receive buffers without clearing
// them): the daemon uses them, and so does the in-memory benchmark
// server, so that the ceiling it measures is the same transport without
// the storage.
func TransportOptions() []grpc.ServerOption {
	return append([]grpc.ServerOption{
		grpc.WriteBufferSize(TransportWriteBuffer),
		grpc.SharedWriteBuffer(true),
		experimental.BufferPool(recvPool),
	}, codecOptions()...)
}
