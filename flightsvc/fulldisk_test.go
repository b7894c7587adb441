package flightsvc

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	arrarray "github.com/apache/arrow-go/v18/arrow/array"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/storage/errorfs"
)

// A full, over-quota, read-only or failing disk under every write path
// (DoPut, create_array, put_metadata, consolidate, drop_array, vacuum) is
// answered with the code its errno deserves and a message saying what
// happened, never Internal; reads keep being served meanwhile.
func TestFullDiskWritePaths(t *testing.T) {
	ctx := context.Background()
	errnos := []struct {
		errno syscall.Errno
		code  codes.Code
		msg   string
	}{
		{syscall.ENOSPC, codes.ResourceExhausted, "storage is full"},
		{syscall.EDQUOT, codes.ResourceExhausted, "storage quota exceeded"},
		{syscall.EROFS, codes.FailedPrecondition, "storage is read-only"},
		{syscall.EIO, codes.DataLoss, "storage I/O error"},
	}
	sch := func(name string) string {
		return `{"array":"` + name + `","type":"sparse","dimensions":[{"name":"k","type":"int64","domain":[0,1000],"tile":10}],
			"attributes":[{"name":"v","type":"int32"}]}`
	}
	b := arrarray.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: arrow.PrimitiveTypes.Int32}}, nil))
	b.Field(0).(*arrarray.Int64Builder).AppendValues([]int64{9, 2, 5}, nil)
	b.Field(1).(*arrarray.Int32Builder).AppendValues([]int32{90, 20, 50}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	fd := &aflight.FlightDescriptor{Type: aflight.DescriptorPATH, Path: []string{"a"}}

	paths := []struct {
		name string
		ops  errorfs.Op
		call func(c aflight.Client) error
	}{
		{"DoPut", errorfs.OpPut, func(c aflight.Client) error { _, err := doPut(ctx, c, fd, rec); return err }},
		{"create_array", errorfs.OpPut, func(c aflight.Client) error { _, err := action(ctx, c, "create_array", sch("b")); return err }},
		{"put_metadata", errorfs.OpPut, func(c aflight.Client) error {
			_, err := action(ctx, c, "put_metadata", `{"array":"a","metadata":{"unit":"m"}}`)
			return err
		}},
		{"consolidate", errorfs.OpPut, func(c aflight.Client) error {
			_, err := action(ctx, c, "consolidate", `{"array":"a","mode":"fragments"}`)
			return err
		}},
		{"vacuum", errorfs.OpDelete | errorfs.OpDeletePrefix, func(c aflight.Client) error {
			_, err := action(ctx, c, "vacuum", `{"array":"a","mode":"fragments"}`)
			return err
		}},
		{"drop_array", errorfs.OpDelete | errorfs.OpDeletePrefix, func(c aflight.Client) error {
			_, err := action(ctx, c, "drop_array", `{"array":"a"}`)
			return err
		}},
	}
	for _, e := range errnos {
		for _, p := range paths {
			t.Run(e.errno.Error()+"/"+p.name, func(t *testing.T) {
				mem := storage.NewMem()
				sw := &errorfs.Switch{Inj: errorfs.Errno(errorfs.FailMatching(p.ops, nil), e.errno)}
				c := serve(t, Config{Store: errorfs.Wrap(mem, sw)})
				// Two fragments (the same cells) to consolidate, then vacuum has
				// work.
				if _, err := action(ctx, c, "create_array", sch("a")); err != nil {
					t.Fatal(err)
				}
				for range 2 {
					if _, err := doPut(ctx, c, fd, rec); err != nil {
						t.Fatal(err)
					}
				}
				if p.name == "vacuum" {
					if _, err := action(ctx, c, "consolidate", `{"array":"a","mode":"fragments"}`); err != nil {
						t.Fatal(err)
					}
				}
				sw.Set(true)
				err := p.call(c)
				if status.Code(err) != e.code || !strings.Contains(status.Convert(err).Message(), e.msg) {
					t.Fatalf("got %v, want %v saying %q", err, e.code, e.msg)
				}
				// Reads go on; nothing partial became visible.
				ks, err := doGetKs(ctx, c, "a")
				if err != nil || len(ks) != 3 {
					t.Fatalf("read after the fault: %v, %d rows, want 3", err, len(ks))
				}
			})
		}
	}
}
