package writer

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	arrowarray "github.com/apache/arrow-go/v18/arrow/array"
	"github.com/tileflight/tileflight/format/fragmeta"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/storage"
)

// globalCells reads the cells (s string, i int64, v int32) of a golden
// array in global order.
func globalCells(t *testing.T, st storage.Store, dir string) (ss []string, is []int64, vs []int32) {
	t.Helper()
	ctx := context.Background()
	r, err := reader.Open(ctx, st, &query.Query{Array: dir, Layout: query.LayoutGlobal, Limit: -1}, reader.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		rec, err := r.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		col := func(name string) int {
			for c := 0; c < int(rec.NumCols()); c++ {
				if rec.ColumnName(c) == name {
					return c
				}
			}
			t.Fatalf("no column %q", name)
			return -1
		}
		sc := rec.Column(col("s")).(interface{ Value(int) string })
		ic := rec.Column(col("i")).(*arrowarray.Int64)
		vc := rec.Column(col("v")).(*arrowarray.Int32)
		for k := 0; k < int(rec.NumRows()); k++ {
			ss, is, vs = append(ss, sc.Value(k)), append(is, ic.Value(k)), append(vs, vc.Value(k))
		}
		rec.Release()
	}
	return
}

func onlyFragmentMeta(t *testing.T, st storage.Store, dir string) *fragmeta.Metadata {
	t.Helper()
	ctx := context.Background()
	s, err := LoadSchema(ctx, st, dir)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := st.List(ctx, storage.Join(dir, names.FragmentsDir))
	if err != nil || len(ents) != 1 {
		t.Fatalf("fragments of %s: %v, %v", dir, ents, err)
	}
	n, err := names.Parse(ents[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.Get(ctx, storage.Join(dir, names.FragmentKey(n), names.FragmentMetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	read := func(off, k uint64) ([]byte, error) {
		if off+k > uint64(len(b)) {
			return nil, fmt.Errorf("read past the end")
		}
		return b[off : off+k], nil
	}
	fr, err := fragmeta.Open(read, uint64(len(b)), layoutOf(s), n.FormatVersion(), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := fragmeta.LoadAll(fr)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestStringDimsOrderGolden writes the cells of TileDB-written arrays with
// a string and an int64 dimension (row-major and Hilbert; strings sharing
// prefixes longer than 8 bytes, empty strings) in a shuffled order: the
// fragment must cut the same tiles (MBRs, R-tree, tile bounds) as
// TileDB's and read back in TileDB's global order.
// Goldens: python_tests/golden/writer_strdims.py.
func TestStringDimsOrderGolden(t *testing.T) {
	ctx := context.Background()
	golden, err := storage.NewLocal("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"strdims_row", "strdims_hilbert"} {
		t.Run(name, func(t *testing.T) {
			ss, is, vs := globalCells(t, golden, name)
			if len(ss) < 20 {
				t.Fatalf("golden has %d cells", len(ss))
			}
			s, err := LoadSchema(ctx, golden, name)
			if err != nil {
				t.Fatal(err)
			}
			st := storage.NewMem()
			if err := CreateArray(ctx, st, "a", s); err != nil {
				t.Fatal(err)
			}
			perm := rand.New(rand.NewSource(1)).Perm(len(ss))
			var sCol, iCol, vCol Column
			for _, k := range perm {
				sCol.Offsets = binary.LittleEndian.AppendUint64(sCol.Offsets, uint64(len(sCol.Data)))
				sCol.Data = append(sCol.Data, ss[k]...)
				iCol.Data = binary.LittleEndian.AppendUint64(iCol.Data, uint64(is[k]))
				vCol.Data = binary.LittleEndian.AppendUint32(vCol.Data, uint32(vs[k]))
			}
			if _, err := WriteSparse(ctx, st, "a", s, map[string]Column{"s": sCol, "i": iCol, "v": vCol}, Options{Timestamp: 1}); err != nil {
				t.Fatal(err)
			}
			gs, gi, gv := globalCells(t, st, "a")
			if !reflect.DeepEqual(gs, ss) || !reflect.DeepEqual(gi, is) || !reflect.DeepEqual(gv, vs) {
				t.Fatalf("global order differs from TileDB's:\n got s=%q i=%v\nwant s=%q i=%v", gs, gi, ss, is)
			}
			want, got := onlyFragmentMeta(t, golden, name), onlyFragmentMeta(t, st, "a")
			if want.Footer.SparseTileNum < 5 {
				t.Fatalf("golden has %d tiles: too few to test tile cuts", want.Footer.SparseTileNum)
			}
			checks := []struct {
				what      string
				got, want any
			}{
				{"R-tree", got.RTree, want.RTree},
				{"tile mins", got.TileMins, want.TileMins},
				{"tile maxes", got.TileMaxes, want.TileMaxes},
				{"tile var sizes", got.TileVarSizes, want.TileVarSizes},
				{"tile sums", got.TileSums, want.TileSums},
				{"non-empty domain", got.Footer.NonEmptyDomain, want.Footer.NonEmptyDomain},
				{"tiles", got.Footer.SparseTileNum, want.Footer.SparseTileNum},
			}
			for _, c := range checks {
				if !reflect.DeepEqual(c.got, c.want) {
					t.Errorf("%s differs from TileDB's:\n got %s\nwant %s", c.what, short(c.got), short(c.want))
				}
			}
		})
	}
}

func short(x any) string {
	s := fmt.Sprintf("%+v", x)
	if len(s) > 600 {
		s = s[:600] + "..."
	}
	return strings.TrimSpace(s)
}
