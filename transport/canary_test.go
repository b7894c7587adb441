package transport

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tileflight/tileflight/transport/sendconn"
)

// canaryServer serves its records to every DoGet through SendRecords, as
// the daemon does, and notes what the stream's context says about the
// connection.
type canaryServer struct {
	aflight.BaseFlightServer
	sc   *arrow.Schema
	recs []arrow.RecordBatch

	onConn chan bool // whether the DoGet ran on a sendconn.Conn
}

func (s *canaryServer) DoGet(_ *aflight.Ticket, stream aflight.FlightService_DoGetServer) error {
	ctx := stream.Context()
	s.onConn <- sendconn.FromContext(ctx) != nil || onSendconn(ctx)
	i := 0
	return SendRecords(ctx, stream, s.sc, func() (arrow.RecordBatch, error) {
		if i == len(s.recs) {
			return nil, io.EOF
		}
		r := s.recs[i]
		i++
		r.Retain() // SendRecords releases what it sends; the test keeps its own
		return r, nil
	}, nil)
}

// canaryRecords are 4 batches of 65536 rows (x int64, v float64, s
// string of 8 bytes): 1.75 MiB of IPC body each, in buffers all large
// enough for a Conn to reference. heldBytes is what a sender declares of
// them: the bodies' buffers (x, v, the offsets and the values of s).
func canaryRecords(mem memory.Allocator) (sc *arrow.Schema, recs []arrow.RecordBatch, heldBytes int64) {
	const rows = 65536
	sc = arrow.NewSchema([]arrow.Field{
		{Name: "x", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.PrimitiveTypes.Float64},
		{Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	for b := 0; b < 4; b++ {
		xb, vb, sb := array.NewInt64Builder(mem), array.NewFloat64Builder(mem), array.NewStringBuilder(mem)
		for i := 0; i < rows; i++ {
			xb.Append(int64(b*rows + i))
			vb.Append(float64(i) * 0.25)
			sb.Append(fmt.Sprintf("s%07d", i))
		}
		cols := []arrow.Array{xb.NewArray(), vb.NewArray(), sb.NewArray()}
		recs = append(recs, array.NewRecordBatch(sc, cols, rows))
		heldBytes += 8*rows + 8*rows + 4*(rows+1) + 8*rows
		for _, c := range cols {
			c.Release()
		}
		xb.Release()
		vb.Release()
		sb.Release()
	}
	return sc, recs, heldBytes
}

// canaryDoGet serves the records over a loopback gRPC server built with
// cfg, reads them back with arrow-go's Flight client, checks them, and
// returns the sendconn counters the DoGet moved, once every record the
// server was given has been released, and whether the DoGet ran on a
// sendconn.Conn.
func canaryDoGet(t *testing.T, cfg Config, extra ...grpc.ServerOption) (sendconn.Stats, bool) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	sc, recs, _ := canaryRecords(mem)
	svc := &canaryServer{sc: sc, recs: recs, onConn: make(chan bool, 1)}

	srv := grpc.NewServer(append(ServerOptions(cfg), extra...)...)
	aflight.RegisterFlightServiceServer(srv, svc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(Listener(lis, cfg))
	defer srv.Stop()

	before := sendconn.Totals()
	c, err := aflight.NewClientWithMiddleware(lis.Addr().String(), nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := c.DoGet(ctx, &aflight.Ticket{Ticket: []byte("canary")})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := aflight.NewRecordReader(stream)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rd.Next() {
		if n >= len(recs) || !array.RecordEqual(rd.RecordBatch(), recs[n]) {
			t.Fatalf("record %d differs from the one sent", n)
		}
		n++
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	rd.Release()
	if n != len(recs) {
		t.Fatalf("read %d records, want %d", n, len(recs))
	}
	onConn := <-svc.onConn

	// The server releases a record once its bytes are written, which is
	// after the counters of that write are added.
	for _, r := range recs {
		r.Release()
	}
	for deadline := time.Now().Add(10 * time.Second); mem.CurrentAlloc() != 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if got := mem.CurrentAlloc(); got != 0 {
		t.Fatalf("%d bytes of the records still held after the DoGet", got)
	}
	after := sendconn.Totals()
	return sendconn.Stats{
		Conns: after.Conns - before.Conns, Held: after.Held - before.Held,
		Referenced: after.Referenced - before.Referenced, Copied: after.Copied - before.Copied,
		Writes: after.Writes - before.Writes, Read: after.Read - before.Read,
		LargestData: after.LargestData,
	}, onConn
}

// TestCanaryZeroCopyDoGet is the canary of the zero-copy send path
// (package sendconn's comment lists what it depends on in grpc-go): a
// real DoGet, over a real loopback gRPC server with the daemon's
// transport, to arrow-go's Flight client, must send the record buffers
// to the socket by reference. It fails when a grpc-go upgrade silently
// stops that: gRPC copying payloads into a buffer of its own or
// coalescing a frame's header with its payload (nothing referenced),
// sending DATA frames above 16 KiB (the windows a Conn follows), or
// reading the socket around the Conn (no peer frames seen).
func TestCanaryZeroCopyDoGet(t *testing.T) {
	d, onConn := canaryDoGet(t, Config{ZeroCopySend: true})
	t.Logf("sendconn counters of the DoGet: %+v", d)
	if err := canaryCheck(d, onConn); err != nil {
		t.Fatal(err)
	}
}

// canaryCheck says what is wrong with the counters d of the canary's
// DoGet (onConn: it ran on a Conn), if anything.
func canaryCheck(d sendconn.Stats, onConn bool) error {
	_, _, held := canaryRecords(memory.NewGoAllocator())
	switch {
	case !onConn || d.Conns != 1:
		return fmt.Errorf("the DoGet ran on a sendconn.Conn: %v, connections accepted as Conns: %d; want true, 1", onConn, d.Conns)
	case d.Held != held:
		return fmt.Errorf("senders declared %d bytes held, want the record buffers' %d", d.Held, held)
	// Only the pieces of a buffer that a 16 KiB frame cuts below 4 KiB
	// are copied: a few percent at most (0.1 % with grpc-go 1.85.0).
	case d.Referenced < d.Held*9/10:
		return fmt.Errorf("%d of %d held bytes went to the socket by reference (%d DATA bytes copied): gRPC no longer hands the Conn the record buffers as they are",
			d.Referenced, d.Held, d.Copied)
	case d.Referenced > d.Held:
		return fmt.Errorf("%d bytes referenced, more than the %d held", d.Referenced, d.Held)
	case d.LargestData <= 0 || d.LargestData > 16<<10:
		return fmt.Errorf("largest DATA frame payload %d bytes: the Conn's window following assumes gRPC's 16 KiB frames", d.LargestData)
	case d.Read <= 0:
		return fmt.Errorf("gRPC read nothing through the Conn: the peer's window updates are not seen")
	}
	return nil
}

// The canary notices a gRPC that copies the payload before it reaches
// the connection: here its own write buffer, turned back on over a Conn
// (as a gRPC that ignored WriteBufferSize(0), or gathered a frame's
// header and payload into one write, would do).
func TestCanaryNoticesCopies(t *testing.T) {
	d, onConn := canaryDoGet(t, Config{ZeroCopySend: true}, grpc.WriteBufferSize(32<<10))
	err := canaryCheck(d, onConn)
	if err == nil {
		t.Fatalf("the canary passed a DoGet whose payload gRPC copied (counters %+v)", d)
	}
	t.Logf("as it should, the canary fails: %v", err)
}

// With -zero-copy-send=false the DoGet is the same stream and nothing of
// sendconn is used: no Conn, nothing held.
func TestDoGetWithoutZeroCopySend(t *testing.T) {
	d, onConn := canaryDoGet(t, Config{ZeroCopySend: false})
	if onConn || d.Conns != 0 || d.Held != 0 || d.Referenced != 0 || d.Writes != 0 || d.Read != 0 {
		t.Fatalf("sendconn used with ZeroCopySend off: on a Conn %v, counters %+v", onConn, d)
	}
}

// Which configurations make connections sendconn.Conns.
func TestConfigSendconn(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	for _, tc := range []struct {
		cfg  Config
		want bool
	}{
		{Config{ZeroCopySend: true}, true},
		{Config{}, false},
		{Config{TLS: true, ZeroCopySend: true}, false},
		{Config{TLS: true}, false},
	} {
		_, wrapped := Listener(lis, tc.cfg).(sendconn.Listener)
		if tc.cfg.sendconn() != tc.want || wrapped != tc.want {
			t.Errorf("%+v: sendconn %v, listener wrapped %v; want %v", tc.cfg, tc.cfg.sendconn(), wrapped, tc.want)
		}
	}
}
