package flightsvc

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	arrarray "github.com/apache/arrow-go/v18/arrow/array"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/internal/idletrim"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/storage/errorfs"
	"github.com/tileflight/tileflight/writer"
)

// TestIdleTrim: the service trims once no call has run for
// Config.IdleTrim: after a DoPut, after a DoGet and after an action, and
// never while a DoGet runs (held here inside its read of a tile file).
func TestIdleTrim(t *testing.T) {
	const after = 20 * time.Millisecond
	ctx := context.Background()
	var holding atomic.Bool
	reached, hold := make(chan struct{}, 1), make(chan struct{})
	st := errorfs.Wrap(storage.NewMem(), errorfs.InjectorFunc(func(i errorfs.Info) error {
		if holding.Load() && i.Op&(errorfs.OpGet|errorfs.OpGetRange) != 0 && strings.HasSuffix(i.Key, ".tdb") {
			select {
			case reached <- struct{}{}:
			default:
			}
			<-hold
		}
		return nil
	}))
	svc := NewService(Config{Store: st, Log: zerolog.Nop(), IdleTrim: after})
	if svc.idle == nil {
		t.Fatal("Config.IdleTrim made no trimmer")
	}
	// The daemon's stages act on the whole process; count runs instead.
	svc.idle = idletrim.New(idletrim.Stage{After: after, Do: func() {}})
	c := serveService(t, svc)
	waitTrims := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for svc.idle.Runs() < want {
			if time.Now().After(deadline) {
				t.Fatalf("%d trims after 5 s, want %d", svc.idle.Runs(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}

	sc, err := schema.FromJSON([]byte(`{"type":"sparse","dimensions":[{"name":"k","type":"int64","domain":[0,1000],"tile":10}],
		"attributes":[{"name":"v","type":"float64"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArray(ctx, st, "g/a", sc); err != nil {
		t.Fatal(err)
	}
	b := arrarray.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: arrow.PrimitiveTypes.Float64}}, nil))
	b.Field(0).(*arrarray.Int64Builder).AppendValues([]int64{7, 3, 5}, nil)
	b.Field(1).(*arrarray.Float64Builder).AppendValues([]float64{0.7, 0.3, 0.5}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	if _, err := doPut(ctx, c, &aflight.FlightDescriptor{Type: aflight.DescriptorPATH, Path: []string{"g", "a"}}, rec); err != nil {
		t.Fatal(err)
	}
	waitTrims(1)

	holding.Store(true)
	rows := make(chan int64, 1)
	go func() {
		n, err := countRows(ctx, c, `{"array":"g/a"}`)
		if err != nil {
			t.Error(err)
		}
		rows <- n
	}()
	<-reached
	time.Sleep(10 * after)
	if n := svc.idle.Runs(); n != 1 {
		t.Fatalf("%d trims while a DoGet ran, want still 1", n)
	}
	holding.Store(false)
	close(hold)
	if n := <-rows; n != 3 {
		t.Fatalf("DoGet read %d rows, want 3", n)
	}
	waitTrims(2)

	if _, err := action(ctx, c, "list_arrays", `{}`); err != nil {
		t.Fatal(err)
	}
	waitTrims(3)
}

// countRows reads a whole DoGet and counts its rows.
func countRows(ctx context.Context, c aflight.Client, ticket string) (int64, error) {
	stream, err := c.DoGet(ctx, &aflight.Ticket{Ticket: []byte(ticket)})
	if err != nil {
		return 0, err
	}
	rd, err := aflight.NewRecordReader(stream)
	if err != nil {
		return 0, err
	}
	defer rd.Release()
	var n int64
	for rd.Next() {
		n += rd.RecordBatch().NumRows()
	}
	if err := rd.Err(); err != nil && !errors.Is(err, io.EOF) {
		return n, err
	}
	return n, nil
}

// TestIdleStages: the pooled buffers are dropped after -idle-trim, or at
// -idle-release when that comes first (just before the release, which
// would otherwise leave them resident); 0 turns a stage off.
func TestIdleStages(t *testing.T) {
	const s = time.Second
	for _, c := range []struct {
		name                  string
		trim, release         time.Duration
		wantTrim, wantRelease time.Duration
	}{
		{"defaults: trim, then release", 30 * s, 60 * s, 30 * s, 60 * s},
		{"release first: the trim moves to it", 30 * s, 1 * s, 1 * s, 1 * s},
		{"same time", 5 * s, 5 * s, 5 * s, 5 * s},
		{"no release", 30 * s, 0, 30 * s, 0},
		{"no trim: pools kept even by a release", 0, 1 * s, 0, 1 * s},
		{"neither", 0, 0, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ran []string
			st := idleStages(c.trim, c.release, func() { ran = append(ran, "trim") }, func() { ran = append(ran, "release") })
			if len(st) != 2 {
				t.Fatalf("%d stages, want 2", len(st))
			}
			if st[0].After != c.wantTrim || st[1].After != c.wantRelease {
				t.Fatalf("stages after %v and %v, want %v and %v", st[0].After, st[1].After, c.wantTrim, c.wantRelease)
			}
			st[0].Do()
			st[1].Do()
			if strings.Join(ran, ",") != "trim,release" {
				t.Fatalf("stages do %v, want trim then release", ran)
			}
		})
	}
}
