// Package transport owns how the Flight server's bytes move over gRPC,
// below the RPCs: the server's gRPC options and listener (ServerOptions,
// Listener, Config), the codec that hands gRPC a DoGet's record buffers
// as they are and decodes an incoming FlightData with one copy (codec.go,
// recv.go), the payload writer that keeps a record alive until gRPC has
// written its buffers (payload.go), the DoGet send loop (SendRecords,
// send.go) with the zstd pass-through of compressed columns (ZstdBatch,
// zstdsend.go), and the receive buffer pool (bufpool.go). Its
// subpackages are the plaintext connection that writes held buffers
// without gRPC's copy (sendconn: on by default, flightd -zero-copy-send)
// and the building of IPC messages whose buffers arrive compressed
// (ipcbody).
//
// The flightsvc package is its one user in the daemon: it picks the
// options once (cmd/flightd) and streams each DoGet through SendRecords,
// mapping the errors it returns to gRPC statuses.
//
// What it may import: arrow-go (arrow, ipc, memory, and flight's
// FlightData), grpc-go and protobuf, errkind (to tell a corrupt frame
// from a client gone), and its own subpackages. It never imports the
// service (flightsvc, sqlsvc), the engine (query, reader, writer,
// tdbarray, lifecycle) or the storage formats (format/*, b2nd, filters,
// storage): what it sends is Arrow records, and a record whose columns
// are still compressed reaches it through the ZstdBatch interface.
// layering_test.go holds it to that.
package transport
