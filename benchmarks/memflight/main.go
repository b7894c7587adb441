// Command memflight is the benchmarks' ceiling: an Arrow Flight server in
// Go that serves results already held in memory, so that a DoGet costs
// only Arrow IPC and gRPC, and a DoPut only receiving and decoding the
// stream (nothing is written). The first DoGet of a ticket reads the
// query through tileflight's reader and keeps its record batches; the
// harness warms every ticket before timing. It is no daemon: no auth, no
// limits, and it keeps whatever it is asked for.
//
//	memflight -data DIR -listen 127.0.0.1:0
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"

	"github.com/tileflight/tileflight/flightsvc"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/transport"
)

type server struct {
	aflight.BaseFlightServer
	store storage.Store

	mu     sync.Mutex
	tables map[string]*table
}

type table struct {
	once    sync.Once
	schema  *arrow.Schema
	batches []arrow.RecordBatch
	err     error
}

func (s *server) load(ctx context.Context, ticket []byte) *table {
	s.mu.Lock()
	t := s.tables[string(ticket)]
	if t == nil {
		t = &table{}
		s.tables[string(ticket)] = t
	}
	s.mu.Unlock()
	t.once.Do(func() {
		q, err := query.Parse(ticket)
		if err != nil {
			t.err = err
			return
		}
		r, err := reader.Open(ctx, s.store, q, reader.Options{})
		if err != nil {
			t.err = err
			return
		}
		defer r.Close()
		t.schema = r.Schema()
		for {
			b, err := r.Next(ctx)
			if err == io.EOF {
				return
			}
			if err != nil {
				t.err = err
				return
			}
			t.batches = append(t.batches, b)
		}
	})
	return t
}

func (s *server) DoGet(tk *aflight.Ticket, stream aflight.FlightService_DoGetServer) error {
	t := s.load(stream.Context(), tk.Ticket)
	if t.err != nil {
		return t.err
	}
	// The daemon's send loop (flightsvc.SendRecords: bodies handed to gRPC
	// without copies), so that this ceiling differs from flightd only in
	// holding its results in memory.
	i := 0
	return flightsvc.SendRecords(stream.Context(), stream, t.schema, func() (arrow.RecordBatch, error) {
		if i == len(t.batches) {
			return nil, io.EOF
		}
		b := t.batches[i]
		i++
		b.Retain() // SendRecords releases what it sends; the table keeps its own
		return b, nil
	}, nil)
}

// DoPut receives and decodes the whole stream and keeps nothing.
func (s *server) DoPut(stream aflight.FlightService_DoPutServer) error {
	r, err := aflight.NewRecordReader(stream)
	if err != nil {
		return err
	}
	defer r.Release()
	rows := int64(0)
	for r.Next() {
		rows += r.RecordBatch().NumRows()
	}
	if err := r.Err(); err != nil && err != io.EOF {
		return err
	}
	meta, _ := json.Marshal(map[string]any{"fragments": []string{}, "rows": rows})
	return stream.Send(&aflight.PutResult{AppMetadata: meta})
}

func main() {
	data := flag.String("data", ".", "directory of arrays")
	listen := flag.String("listen", "127.0.0.1:0", "HOST:PORT")
	flag.Parse()
	st, err := storage.NewLocal(*data)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The daemon's transport settings, so that this ceiling differs from
	// flightd only in holding its results in memory.
	tc := transport.Config{ZeroCopySend: true} // the daemon's default
	srv := grpc.NewServer(append(transport.ServerOptions(tc), grpc.MaxRecvMsgSize(64<<20))...)
	aflight.RegisterFlightServiceServer(srv, &server{store: st, tables: map[string]*table{}})
	fmt.Printf("ready grpc://%s\n", lis.Addr())
	if err := srv.Serve(transport.Listener(lis, tc)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
