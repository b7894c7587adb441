package flight

import (
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// sentData keeps deep copies of what a payloadWriter sends, since the
// writer reuses its message and the record's buffers are released.
type sentData struct{ msgs []*aflight.FlightData }

func (s *sentData) Send(fd *aflight.FlightData) error {
	s.msgs = append(s.msgs, &aflight.FlightData{
		DataHeader: append([]byte(nil), fd.DataHeader...),
		DataBody:   append([]byte(nil), fd.DataBody...),
	})
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
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recs := []arrow.RecordBatch{tc.build(), tc.build()}
			sent := &sentData{}
			w := ipc.NewWriterWithPayloadWriter(newPayloadWriter(sent), ipc.WithSchema(recs[0].Schema()))
			for _, r := range recs {
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
