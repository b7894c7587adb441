package flightsvc

// The server_info action and the checks that make size errors name the
// flag and the client option that change them: a client learns the
// daemon's limits and features from server_info before it cuts its
// batches and writes.

import (
	"context"
	"fmt"
	"sync"

	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/dustin/go-humanize"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tileflight/tileflight/query"
)

// DefaultMaxMessageBytes is the largest gRPC message the daemon accepts by
// default (-max-message-bytes).
const DefaultMaxMessageBytes = 64 << 20

func init() {
	actions["server_info"] = actionDef{
		desc: `The daemon's version, limits and features, for clients to size their writes by. Body: empty. ` +
			`Result: {"version", "protocol": 1, "limits": {"max_message_bytes", "max_put_bytes", "max_fragment_bytes", "max_ticket_bytes", "max_action_body_bytes", "max_ranges_per_dimension", "max_batch_rows", "max_partitions", "max_queries", "max_queries_per_peer"}, "features": [names]}.`,
		run: (*Service).actServerInfo,
	}
}

// ServerInfo is the server_info action's result.
type ServerInfo struct {
	Version  string           `json:"version"`
	Protocol int              `json:"protocol"`
	Limits   map[string]int64 `json:"limits"`
	Features []string         `json:"features"`
}

func (s *Service) maxMessageBytes() int64 {
	if s.cfg.MaxMessageBytes > 0 {
		return s.cfg.MaxMessageBytes
	}
	return DefaultMaxMessageBytes
}

// Info returns what server_info answers: the effective values of the
// limits a client must respect, and the features this daemon serves.
func (s *Service) Info() ServerInfo {
	ver := s.cfg.Version
	if ver == "" {
		ver = "dev"
	}
	feats := []string{"staged_writes", "conditions", "aggregates", "b2nd", "consolidation", "vacuum", "deletes", "schema_evolution", "metadata", "zstd_batches", "list_queries"}
	if s.cfg.SQL {
		feats = append(feats, "sql")
	}
	if len(s.cfg.EncryptionKey) > 0 {
		feats = append(feats, "encryption")
	}
	if s.cfg.Auth != nil && s.cfg.Auth.Enabled() {
		feats = append(feats, "auth")
	}
	if s.cfg.Cluster != nil {
		feats = append(feats, "cluster")
	}
	return ServerInfo{
		Version:  ver,
		Protocol: 1,
		Limits: map[string]int64{
			"max_message_bytes":        s.maxMessageBytes(),
			"max_put_bytes":            s.cfg.MaxPutBytes,
			"max_fragment_bytes":       s.cfg.MaxFragmentBytes,
			"max_ticket_bytes":         query.MaxQueryBytes,
			"max_action_body_bytes":    maxActionBody,
			"max_ranges_per_dimension": query.MaxRanges,
			"max_batch_rows":           query.MaxBatchRows,
			"max_partitions":           query.MaxPartitions,
			"max_queries":              int64(s.cfg.MaxConcurrentStreams),
			"max_queries_per_peer":     int64(s.cfg.MaxQueriesPerPeer),
		},
		Features: feats,
	}
}

func (s *Service) actServerInfo(_ context.Context, body []byte) (any, error) {
	if len(body) > 0 {
		var none struct{}
		if err := parseBody(body, &none); err != nil {
			return nil, fmt.Errorf("%w (server_info takes no body, or {})", err)
		}
	}
	return s.Info(), nil
}

// GRPCRecvLimit is the gRPC receive limit for a -max-message-bytes of
// limit: half as much again (at least 4 MiB more), so that a message over
// the limit reaches MessageSizeInterceptor, whose error names the flag and
// the client option, rather than gRPC's own "received message larger than
// max"; only a far larger one gets gRPC's.
func GRPCRecvLimit(limit int64) int {
	head := max(limit/2, 4<<20)
	return int(min(limit+head, 1<<31-1))
}

// MessageSizeInterceptor refuses, with RESOURCE_EXHAUSTED and a message
// naming -max-message-bytes and the clients' max_batch_bytes, any Flight
// data message (a DoPut's record batch, native or Flight SQL ingest)
// larger than max bytes. The call's own error is replaced by that one, so
// whatever the handler made of the failed read, the client learns why.
func MessageSizeInterceptor(limit int64) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		w := &sizeStream{ServerStream: ss, max: limit, method: info.FullMethod}
		err := handler(srv, w)
		if tooBig := w.tooBig(); err != nil && tooBig != nil {
			return tooBig
		}
		return err
	}
}

type sizeStream struct {
	grpc.ServerStream
	max    int64
	method string
	mu     sync.Mutex
	err    error
}

func (w *sizeStream) tooBig() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *sizeStream) RecvMsg(m any) error {
	if err := w.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	fd, ok := m.(*aflight.FlightData)
	if !ok {
		return nil
	}
	if n := flightDataBytes(fd); n > w.max {
		err := status.Error(codes.ResourceExhausted, messageTooBig(n, w.max))
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
		return err
	}
	return nil
}

// flightDataBytes is about a FlightData message's size on the wire.
func flightDataBytes(fd *aflight.FlightData) int64 {
	n := int64(len(fd.DataHeader) + len(fd.DataBody) + len(fd.AppMetadata))
	if d := fd.FlightDescriptor; d != nil {
		n += int64(len(d.Cmd))
		for _, p := range d.Path {
			n += int64(len(p))
		}
	}
	return n
}

// messageTooBig is the error text of a message over -max-message-bytes.
func messageTooBig(n, limit int64) string {
	return fmt.Sprintf("a message of %s (%d bytes) exceeds -max-message-bytes (%s): raise the server flag, or send smaller record batches "+
		"(the Python client's max_batch_bytes=, the Spark writers' max_batch_bytes option; both "+
		"learn the limit from the server_info action and cut batches under it)", humanize.IBytes(uint64(n)), n, humanize.IBytes(uint64(limit)))
}

// putTooBig is the error text of a DoPut over -max-put-bytes.
func putTooBig(array string, limit int64) string {
	return fmt.Sprintf("DoPut to %q: more than %s (%d bytes) in one write exceeds -max-put-bytes: raise the server flag, or write in pieces "+
		"that commit together: the Python client (and the Spark connector) stage writes above this size automatically, as several DoPuts "+
		"with \"stage\": true and one commit_fragments (its staged= option sets the threshold); by hand, see docs/protocol.md, \"Staged writes\"",
		array, humanize.IBytes(uint64(limit)), limit)
}
