package flightsvc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	arrarray "github.com/apache/arrow-go/v18/arrow/array"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/writer"
)

// zstdPassSchema mixes attributes that can pass through compressed (v, w,
// s: one data buffer that is the tile's bytes, zstd alone) with ones that
// cannot (nullable, converted, another filter, var-sized), with chunk
// sizes that make v's and w's chunk boundaries meet only every 3000 cells.
// Tiles (70000 cells) are big enough for row-major reads to go tile by
// tile.
const zstdPassSchema = `{"type":"dense","dimensions":[
 {"name":"x","type":"int64","domain":[0,2099],"tile":700},
 {"name":"y","type":"int64","domain":[0,99],"tile":100}],
 "attributes":[
 {"name":"v","type":"float64","filters":{"chunk_size":8000,"filters":[{"name":"zstd","level":1}]}},
 {"name":"w","type":"int32","filters":{"chunk_size":6000,"filters":[{"name":"zstd","level":3}]}},
 {"name":"s","type":"char","cell_val_num":3,"filters":[{"name":"zstd"}]},
 {"name":"n","type":"int32","nullable":true,"filters":[{"name":"zstd"}]},
 {"name":"d","type":"datetime_day","filters":[{"name":"zstd"}]},
 {"name":"l","type":"float32","filters":[{"name":"lz4"}]},
 {"name":"t","type":"string_utf8","cell_val_num":"var","filters":[{"name":"zstd"}]}]}`

func zstdPassRecord(x0, x1 int) arrow.RecordBatch {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "v", Type: arrow.PrimitiveTypes.Float64}, {Name: "w", Type: arrow.PrimitiveTypes.Int32},
		{Name: "s", Type: &arrow.FixedSizeBinaryType{ByteWidth: 3}},
		{Name: "n", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "d", Type: arrow.FixedWidthTypes.Date32}, {Name: "l", Type: arrow.PrimitiveTypes.Float32},
		{Name: "t", Type: arrow.BinaryTypes.LargeString}}, nil)
	b := arrarray.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for x := x0; x <= x1; x++ {
		for y := 0; y < 100; y++ {
			i := x*100 + y
			b.Field(0).(*arrarray.Float64Builder).Append(float64(i) * 0.5)
			b.Field(1).(*arrarray.Int32Builder).Append(int32(i % 977))
			b.Field(2).(*arrarray.FixedSizeBinaryBuilder).Append([]byte(fmt.Sprintf("%03d", i%1000)))
			if i%7 == 0 {
				b.Field(3).(*arrarray.Int32Builder).AppendNull()
			} else {
				b.Field(3).(*arrarray.Int32Builder).Append(int32(i))
			}
			b.Field(4).(*arrarray.Date32Builder).Append(arrow.Date32(i % 20000))
			b.Field(5).(*arrarray.Float32Builder).Append(float32(i))
			b.Field(6).(*arrarray.LargeStringBuilder).Append(fmt.Sprint("t", i%13))
		}
	}
	return b.NewRecordBatch()
}

// getRaw reads a DoGet both as Arrow (a table) and as FlightData (the
// body bytes that crossed the wire).
func getRaw(t *testing.T, c aflight.Client, ticket string) (arrow.Table, int) {
	t.Helper()
	ctx := context.Background()
	stream, err := c.DoGet(ctx, &aflight.Ticket{Ticket: []byte(ticket)})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*aflight.FlightData
	body := 0
	for {
		fd, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", ticket, err)
		}
		body += len(fd.DataBody)
		msgs = append(msgs, fd)
	}
	rd, err := aflight.NewRecordReader(&replay{msgs: msgs})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	var recs []arrow.RecordBatch
	for rd.Next() {
		r := rd.RecordBatch()
		r.Retain()
		recs = append(recs, r)
	}
	if err := rd.Err(); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("%s: %v", ticket, err)
	}
	tab := arrarray.NewTableFromRecords(rd.Schema(), recs)
	for _, r := range recs {
		r.Release()
	}
	return tab, body
}

// putSlices is doPut of rec in batches of 20000 rows (gRPC's default
// message limit is 4 MiB).
func putSlices(ctx context.Context, c aflight.Client, fd *aflight.FlightDescriptor, rec arrow.RecordBatch) error {
	stream, err := c.DoPut(ctx)
	if err != nil {
		return err
	}
	w := aflight.NewRecordWriter(stream)
	w.SetFlightDescriptor(fd)
	for i := int64(0); i < rec.NumRows(); i += 20000 {
		part := rec.NewSlice(i, min(i+20000, rec.NumRows()))
		err := w.Write(part)
		part.Release()
		if err != nil {
			_, rerr := stream.Recv()
			return rerr
		}
	}
	w.Close()
	stream.CloseSend()
	_, err = stream.Recv()
	return err
}

type replay struct{ msgs []*aflight.FlightData }

func (r *replay) Recv() (*aflight.FlightData, error) {
	if len(r.msgs) == 0 {
		return nil, io.EOF
	}
	m := r.msgs[0]
	r.msgs = r.msgs[1:]
	return m, nil
}

// zstdPassServer serves a new, empty array "z" of zstdPassSchema.
func zstdPassServer(t *testing.T) aflight.Client {
	t.Helper()
	st := storage.NewMem()
	s, err := schema.FromJSON([]byte(zstdPassSchema))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArray(context.Background(), st, "z", s); err != nil {
		t.Fatal(err)
	}
	return serve(t, Config{Store: st})
}

// With "compression": "zstd" a DoGet returns exactly what it returns
// without, for every mix of columns, batch size, subarray and layout;
// whole tiles of zstd-only attributes cross the wire still compressed.
func TestZstdPassThrough(t *testing.T) {
	ctx := context.Background()
	c := zstdPassServer(t)
	for _, rows := range [][2]int{{0, 2099}, {800, 1100}} { // the second overwrites tile 1 in part
		rec := zstdPassRecord(rows[0], rows[1])
		err := putSlices(ctx, c, &aflight.FlightDescriptor{Type: aflight.DescriptorCMD,
			Cmd: []byte(fmt.Sprintf(`{"array":"z","subarray":{"x":[[%d,%d]],"y":[[0,99]]}}`, rows[0], rows[1]))}, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	queries := []string{
		`{"array":"z"}`,
		`{"array":"z","columns":["v"]}`,
		`{"array":"z","columns":["w","v","s"],"batch_rows":6000}`,
		`{"array":"z","columns":["v","w"],"batch_rows":2999}`, // no cut fits: decoded
		`{"array":"z","columns":["v"],"batch_rows":1000}`,
		`{"array":"z","columns":["v"],"batch_rows":999}`,
		`{"array":"z","columns":["v","x"],"batch_rows":3}`,
		`{"array":"z","columns":["t","v","n","d","l","s"],"batch_rows":4500}`,
		`{"array":"z","subarray":{"x":[[3,1500]]}}`,
		`{"array":"z","subarray":{"x":[[0,699],[1400,2099]]},"columns":["v","y"]}`,
		`{"array":"z","subarray":{"x":[[1400,2099],[0,699]]},"columns":["v","y"]}`,
		`{"array":"z","layout":"col-major","columns":["v","w"]}`,
		`{"array":"z","layout":"global","columns":["v","w","s"]}`,
		`{"array":"z","columns":["v"],"limit":12345}`,
		`{"array":"z","columns":["v"],"filter":"w > 100"}`,
	}
	for _, q := range queries {
		t.Run(q, func(t *testing.T) {
			want, _ := getRaw(t, c, q)
			defer want.Release()
			zq := q[:len(q)-1] + `,"compression":"zstd"}`
			got, _ := getRaw(t, c, zq)
			defer got.Release()
			// NaN is the fill value of float64 (cells failing the filter).
			if !arrarray.TableApproxEqual(want, got, arrarray.WithNaNsEqual(true), arrarray.WithAbsTolerance(0)) {
				t.Fatalf("%s differs from %s", zq, q)
			}
			if want.NumRows() == 0 {
				t.Fatal("no rows")
			}
		})
	}
	// Tile 2 (x 1400..2099) is one fragment's whole tile: its v crosses
	// the wire compressed (the values are a ramp, which zstd shrinks to a
	// fraction).
	_, plain := getRaw(t, c, `{"array":"z","subarray":{"x":[[1400,2099]]},"columns":["v"]}`)
	_, packed := getRaw(t, c, `{"array":"z","subarray":{"x":[[1400,2099]]},"columns":["v"],"compression":"zstd"}`)
	if plain < 8*70000 || packed*3 > plain {
		t.Fatalf("body bytes: %d compressed, %d plain", packed, plain)
	}
	// The same with columns that cannot pass (sent uncompressed in the
	// same messages): v's savings remain.
	mixed := `{"array":"z","subarray":{"x":[[1400,2099]]},"columns":["x","v","n","t","d","l"]`
	_, plain = getRaw(t, c, mixed+`}`)
	_, packed = getRaw(t, c, mixed+`,"compression":"zstd"}`)
	if packed > plain-8*70000/2 {
		t.Fatalf("mixed columns: body bytes: %d compressed, %d plain", packed, plain)
	}
}

// The compression key is a read option: a DoPut descriptor with it is
// refused, and only none and zstd are values.
func TestZstdPassThroughKey(t *testing.T) {
	ctx := context.Background()
	c := zstdPassServer(t)
	rec := zstdPassRecord(0, 699)
	defer rec.Release()
	if _, err := doPut(ctx, c, &aflight.FlightDescriptor{Type: aflight.DescriptorCMD, Cmd: []byte(`{"array":"z","compression":"zstd"}`)}, rec); err == nil {
		t.Fatal("DoPut with compression was accepted")
	}
	stream, err := c.DoGet(ctx, &aflight.Ticket{Ticket: []byte(`{"array":"z","compression":"lz4"}`)})
	if err == nil {
		_, err = stream.Recv()
	}
	if err == nil {
		t.Fatal("compression lz4 was accepted")
	}
}
