package transport

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// sentData keeps deep copies of what a payloadWriter sends, since the
// writer reuses its message and the record's buffers are released. With
// zeroCopy its context says the server has sendCodec: messages then come
// to SendMsg as outgoingData, which it marshals with sendCodec and decodes
// with gRPC's protobuf codec, as a client would; the buffers handed to
// gRPC are freed at once, or kept (held) until the test frees them.
type sentData struct {
	zeroCopy bool
	hold     bool
	held     []mem.BufferSlice
	msgs     []*aflight.FlightData
}

func (s *sentData) Context() context.Context {
	if s.zeroCopy {
		return context.WithValue(context.Background(), zeroCopyKey{}, true)
	}
	return context.Background()
}

func (s *sentData) Send(fd *aflight.FlightData) error {
	s.msgs = append(s.msgs, &aflight.FlightData{
		DataHeader: append([]byte(nil), fd.DataHeader...),
		DataBody:   append([]byte(nil), fd.DataBody...),
	})
	return nil
}

func (s *sentData) SendMsg(m any) error {
	if fd, ok := m.(*aflight.FlightData); ok {
		return s.Send(fd)
	}
	codec := sendCodec{proto: encoding.GetCodecV2("proto")}
	data, err := codec.Marshal(m)
	if err != nil {
		return err
	}
	fd := &aflight.FlightData{}
	if err := codec.Unmarshal(data, fd); err != nil {
		return err
	}
	s.msgs = append(s.msgs, fd)
	if s.hold {
		s.held = append(s.held, data)
	} else {
		data.Free()
	}
	return nil
}

func (s *sentData) Recv() (*aflight.FlightData, error) {
	if len(s.msgs) == 0 {
		return nil, io.EOF
	}
	m := s.msgs[0]
	s.msgs = s.msgs[1:]
	return m, nil
}

// Bodies of one buffer are sent as they are, bodies of several are
// gathered: either way the stream reads back as the records written.
func TestPayloadWriterRoundTrip(t *testing.T) {
	mem := memory.NewGoAllocator()
	tests := []struct {
		name  string
		build func() arrow.RecordBatch
	}{
		{"one f64 column, no nulls", func() arrow.RecordBatch {
			b := array.NewFloat64Builder(mem)
			b.AppendValues([]float64{1, 2, 3, 4.5, 5}, nil)
			a := b.NewArray()
			return array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Float64}}, nil), []arrow.Array{a}, 5)
		}},
		{"odd length int8 (padded body)", func() arrow.RecordBatch {
			b := array.NewInt8Builder(mem)
			b.AppendValues([]int8{1, 2, 3}, nil)
			a := b.NewArray()
			return array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int8}}, nil), []arrow.Array{a}, 3)
		}},
		{"nullable int64 and strings", func() arrow.RecordBatch {
			ib := array.NewInt64Builder(mem)
			ib.AppendValues([]int64{7, 0, 9}, []bool{true, false, true})
			sb := array.NewStringBuilder(mem)
			sb.AppendValues([]string{"a", "", "ccc"}, []bool{true, false, true})
			cols := []arrow.Array{ib.NewArray(), sb.NewArray()}
			return array.NewRecordBatch(arrow.NewSchema([]arrow.Field{
				{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
				{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, nil), cols, 3)
		}},
		{"large parts between small ones (zero-copy and copied)", func() arrow.RecordBatch {
			const n = 5000
			fb := array.NewFloat64Builder(mem)
			ib := array.NewInt16Builder(mem)
			sb := array.NewStringBuilder(mem)
			for i := 0; i < n; i++ {
				fb.Append(float64(i) * 1.5)
				if i%7 == 0 {
					ib.AppendNull()
				} else {
					ib.Append(int16(i))
				}
				sb.Append(fmt.Sprint(i))
			}
			cols := []arrow.Array{fb.NewArray(), ib.NewArray(), sb.NewArray()}
			return array.NewRecordBatch(arrow.NewSchema([]arrow.Field{
				{Name: "f", Type: arrow.PrimitiveTypes.Float64},
				{Name: "i", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
				{Name: "s", Type: arrow.BinaryTypes.String}}, nil), cols, n)
		}},
	}
	for _, tc := range tests {
		for _, zc := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/zeroCopy=%v", tc.name, zc), func(t *testing.T) {
				recs := []arrow.RecordBatch{tc.build(), tc.build()}
				sent := &sentData{zeroCopy: zc}
				pw := newPayloadWriter(sent)
				w := ipc.NewWriterWithPayloadWriter(pw, ipc.WithSchema(recs[0].Schema()))
				for _, r := range recs {
					pw.holding(r)
					if err := w.Write(r); err != nil {
						t.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				rd, err := aflight.NewRecordReader(sent)
				if err != nil {
					t.Fatal(err)
				}
				defer rd.Release()
				n := 0
				for rd.Next() {
					if !array.RecordEqual(rd.RecordBatch(), recs[n]) {
						t.Fatalf("record %d: got %v, want %v", n, rd.RecordBatch(), recs[n])
					}
					n++
				}
				if err := rd.Err(); err != nil {
					t.Fatal(err)
				}
				if n != len(recs) {
					t.Fatalf("read %d records, want %d", n, len(recs))
				}
			})
		}
	}
}

// Under sendCodec a record's buffers are gRPC's until it frees them: the
// record stays retained while any buffer of its messages is held, and is
// released exactly once when the last is freed.
func TestZeroCopyHoldsRecordUntilFreed(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := array.NewFloat64Builder(mem)
	vals := make([]float64, 4096) // 32 KiB: above gRPC's pooling threshold
	for i := range vals {
		vals[i] = float64(i)
	}
	b.AppendValues(vals, nil)
	col := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Float64}}, nil), []arrow.Array{col}, int64(len(vals)))
	col.Release()

	sent := &sentData{zeroCopy: true, hold: true}
	pw := newPayloadWriter(sent)
	w := ipc.NewWriterWithPayloadWriter(pw, ipc.WithSchema(rec.Schema()))
	pw.holding(rec)
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	pw.holding(nil)
	rec.Release() // the caller's release, as SendRecords does
	if mem.CurrentAlloc() == 0 {
		t.Fatal("record freed while gRPC still holds its buffers")
	}
	for _, d := range sent.held {
		d.Free()
	}
	if got := mem.CurrentAlloc(); got != 0 {
		t.Fatalf("%d bytes still allocated after gRPC freed every buffer", got)
	}
	w.Close()
}

// discardData marshals what it is sent as gRPC would (the proto codec for
// FlightData, sendCodec for outgoingData) and frees it at once.
type discardData struct{ zeroCopy bool }

func (d discardData) Context() context.Context {
	return (&sentData{zeroCopy: d.zeroCopy}).Context()
}

func (d discardData) Send(fd *aflight.FlightData) error { return d.SendMsg(fd) }

func (d discardData) SendMsg(m any) error {
	data, err := sendCodec{proto: encoding.GetCodecV2("proto")}.Marshal(m)
	if err != nil {
		return err
	}
	data.Free()
	return nil
}

// The server's cost of turning one DoGet batch (x, y int64 and v float64,
// 65536 rows: 1.5 MiB) into the buffers gRPC frames: gathered and copied
// by the protobuf codec, or handed over as the record's buffers.
func BenchmarkSendBatch(b *testing.B) {
	const n = 65536
	mem := memory.NewGoAllocator()
	xs, ys, vs := array.NewInt64Builder(mem), array.NewInt64Builder(mem), array.NewFloat64Builder(mem)
	for i := 0; i < n; i++ {
		xs.Append(int64(i / 8192))
		ys.Append(int64(i % 8192))
		vs.Append(float64(i))
	}
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{
		{Name: "x", Type: arrow.PrimitiveTypes.Int64}, {Name: "y", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.PrimitiveTypes.Float64}}, nil),
		[]arrow.Array{xs.NewArray(), ys.NewArray(), vs.NewArray()}, n)
	for _, zc := range []bool{false, true} {
		b.Run(fmt.Sprintf("zeroCopy=%v", zc), func(b *testing.B) {
			pw := newPayloadWriter(discardData{zeroCopy: zc})
			w := ipc.NewWriterWithPayloadWriter(pw, ipc.WithSchema(rec.Schema()))
			b.SetBytes(n * 24)
			b.ReportAllocs()
			for range b.N {
				pw.holding(rec)
				if err := w.Write(rec); err != nil {
					b.Fatal(err)
				}
			}
			w.Close()
		})
	}
}
