package writer

import (
	"context"
	"testing"

	"github.com/tileflight/tileflight/format/arraymeta"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
)

// A metadata file is stamped [t, t] with a name in the current form and
// reads back; an empty change writes no file, as TileDB does.
func TestPutMetadataStamp(t *testing.T) {
	ctx := context.Background()
	st := storage.NewMem()
	mustCreate(t, st, "w", denseJSON)
	got, err := PutMetadata(ctx, st, "w", map[string]arraymeta.Value{"x": arraymeta.Float64s(1.25)}, 7)
	if err != nil {
		t.Fatal(err)
	}
	n, err := names.Parse(got)
	if err != nil || n.T1 != 7 || n.T2 != 7 || n.Form != names.Form2 {
		t.Fatalf("PutMetadata: %q %+v %v", got, n, err)
	}
	snap, err := tdbarray.LoadMetadata(ctx, st, "w", 0, arraymeta.Latest, nil)
	if err != nil || !snap.Values["x"].Equal(arraymeta.Float64s(1.25)) || len(snap.Applied) != 1 {
		t.Fatalf("load after write: %v %v", snap, err)
	}
	if got, err := PutMetadata(ctx, st, "w", nil, 8); err != nil || got != "" {
		t.Fatalf("empty write: %q %v", got, err)
	}
	ents, err := st.List(ctx, "w/"+names.MetaDir)
	if err != nil || len(ents) != 1 {
		t.Fatalf("__meta holds %v (%v), want the one file", ents, err)
	}
}
