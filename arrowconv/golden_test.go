package arrowconv

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	dt "github.com/tileflight/tileflight/format/datatype"
)

// TestTileDBGolden converts the buffers TileDB's query returned (written by
// python_tests/golden/arrowconv_buffers.py) and compares the result with the
// Arrow table TileDB's own Arrow adapter built from the same buffers; then
// converts back and expects TileDB's exact bytes.
func TestTileDBGolden(t *testing.T) {
	dir := filepath.Join("testdata", "tiledb")
	mb, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest []struct {
		Name, Type    string
		Var, Nullable bool
		N             int
	}
	if err := json.Unmarshal(mb, &manifest); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(filepath.Join(dir, "tiledb.arrow"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	rd, err := ipc.NewFileReader(fh, ipc.WithAllocator(memory.NewGoAllocator()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	rec, err := rd.RecordBatch(0)
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if len(manifest) != 8 {
		t.Fatalf("%d columns in the manifest", len(manifest))
	}
	for _, m := range manifest {
		t.Run(m.Name, func(t *testing.T) {
			typ, err := dt.Parse(m.Type)
			if err != nil {
				t.Fatal(err)
			}
			f := Field{Name: m.Name, Type: typ, CellValNum: 1, Nullable: m.Nullable}
			if m.Var {
				f.CellValNum = VarNum
			}
			data, offs, valid := read(m.Name+".data.bin"), read(m.Name+".offsets.bin"), read(m.Name+".validity.bin")
			ours, err := NewColumn(f, data, offs, valid, m.N)
			if err != nil {
				t.Fatal(err)
			}
			idx := rec.Schema().FieldIndices(m.Name)
			if len(idx) != 1 {
				t.Fatalf("column %q not in TileDB's table", m.Name)
			}
			theirs := rec.Column(idx[0])
			if f.Type == dt.Bool {
				// TileDB's adapter exports BOOL as uint8 0/1; we export bool.
				if theirs.DataType().ID() != arrow.UINT8 || ours.DataType().ID() != arrow.BOOL {
					t.Fatalf("types %s / %s", theirs.DataType(), ours.DataType())
				}
				for i := 0; i < m.N; i++ {
					if ours.(*array.Boolean).Value(i) != (theirs.(*array.Uint8).Value(i) == 1) {
						t.Fatalf("cell %d differs", i)
					}
				}
			} else {
				if !arrow.TypeEqual(ours.DataType(), theirs.DataType()) {
					t.Fatalf("type %s, TileDB's adapter says %s", ours.DataType(), theirs.DataType())
				}
				if !array.Equal(ours, theirs) {
					t.Fatalf("values %s, TileDB's adapter says %s", ours, theirs)
				}
			}
			d, o, v, err := ToTileDB(f, ours)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(d, data) || !bytes.Equal(o, offs) || !bytes.Equal(v, valid) {
				t.Fatalf("back to TileDB: %x %x %x, TileDB wrote %x %x %x", d, o, v, data, offs, valid)
			}
			// TileDB's own Arrow column is accepted by the write path too.
			if f.Type != dt.Bool {
				d, o, v, err = ToTileDB(f, theirs)
				if err != nil || !bytes.Equal(d, data) || !bytes.Equal(o, offs) {
					t.Fatalf("TileDB's Arrow column: %v", err)
				}
				_ = v
			}
		})
	}
}
