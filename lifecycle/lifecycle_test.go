package lifecycle

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/filters"
	"github.com/tileflight/tileflight/format/arraymeta"
	"github.com/tileflight/tileflight/format/commits"
	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/reader/tileio"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/storage/errorfs"
	"github.com/tileflight/tileflight/tdbarray"
	"github.com/tileflight/tileflight/writer"
)

const denseJSON = `{"type": "dense",
 "dimensions": [{"name": "r", "type": "int32", "domain": [1, 20], "tile": 4},
                {"name": "c", "type": "int32", "domain": [1, 12], "tile": 5}],
 "attributes": [{"name": "a", "type": "int32"}]}`

const sparseJSON = `{"type": "sparse", "capacity": 4,
 "dimensions": [{"name": "x", "type": "int64", "domain": [0, 999], "tile": 10}],
 "attributes": [{"name": "v", "type": "int64"}]}`

func i32s(n int, base int32) []byte {
	b := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(base+int32(i)))
	}
	return b
}

func i64s(v ...int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

// build makes an array with three overlapping writes at t = 1, 2, 3 and
// three metadata files.
func build(t *testing.T, js string) *storage.Mem {
	t.Helper()
	ctx := context.Background()
	st := storage.NewMem()
	s, err := schema.FromJSON([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArray(ctx, st, "a", s); err != nil {
		t.Fatal(err)
	}
	if s, err = writer.LoadSchema(ctx, st, "a"); err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= 3; k++ {
		if s.IsDense() {
			sub := [][2]int64{{int64(2 * k), int64(2*k + 5)}, {1, 10}}
			if _, err := writer.WriteDense(ctx, st, "a", s, sub, schema.RowMajor, map[string]writer.Column{"a": {Data: i32s(60, int32(100*k))}}, writer.Options{Timestamp: uint64(k)}); err != nil {
				t.Fatal(err)
			}
		} else {
			cols := map[string]writer.Column{"x": {Data: i64s(int64(k), int64(k+1), int64(50+k))}, "v": {Data: i64s(int64(k), int64(10*k), int64(100*k))}}
			if _, err := writer.WriteSparse(ctx, st, "a", s, cols, writer.Options{Timestamp: uint64(k)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := writer.PutMetadata(ctx, st, "a", map[string]arraymeta.Value{"k": arraymeta.Int64s(int64(k)), fmt.Sprint("m", k): arraymeta.String("x")}, uint64(k)); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// view is everything a reader sees: the cells at every timestamp and the
// metadata.
func view(t *testing.T, st storage.Store) string {
	t.Helper()
	ctx := context.Background()
	var sb strings.Builder
	for _, ts := range []uint64{1, 2, 3, 100} {
		r, err := reader.Open(ctx, st, &query.Query{Array: "a", Limit: -1, Layout: query.LayoutRowMajor, Timestamp: &query.Timestamp{End: ts}}, reader.Options{Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		for {
			rec, err := r.Next(ctx)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < int(rec.NumRows()); i++ {
				for c := 0; c < int(rec.NumCols()); c++ {
					fmt.Fprintf(&sb, "%s=%s ", rec.ColumnName(c), rec.Column(c).ValueStr(i))
				}
				sb.WriteString(";")
			}
			rec.Release()
		}
		r.Close()
		sb.WriteString("\n")
	}
	snap, err := tdbarray.LoadMetadata(ctx, st, "a", 0, arraymeta.Latest, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(snap.Values))
	for k := range snap.Values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&sb, "%s=%v ", k, snap.Values[k])
	}
	return sb.String()
}

func TestConsolidateVacuumKeepView(t *testing.T) {
	ctx := context.Background()
	for _, js := range []string{denseJSON, sparseJSON} {
		for _, m := range []Mode{Commits, FragmentMeta, ArrayMeta, Fragments} {
			st := build(t, js)
			want := view(t, st)
			res, err := Consolidate(ctx, st, "a", m, Options{})
			if err != nil || len(res.Written) == 0 {
				t.Fatalf("%s: %+v %v", m, res, err)
			}
			if got := view(t, st); got != want {
				t.Fatalf("%s: after consolidate:\n%s\nwant\n%s", m, got, want)
			}
			if _, err := Vacuum(ctx, st, "a", m, VacuumOptions{}); err != nil {
				t.Fatal(err)
			}
			got := view(t, st)
			// After a fragments vacuum, a dense consolidated fragment
			// [1, 3] is not seen by opens ending before 3 (as in TileDB);
			// a sparse one, with per-cell timestamps, is.
			if (m != Fragments || strings.Contains(js, "sparse")) && m != ArrayMeta && got != want {
				t.Fatalf("%s: after vacuum:\n%s\nwant\n%s", m, got, want)
			}
			if last := strings.Split(got, "\n"); last[3] != strings.Split(want, "\n")[3] || last[4] != strings.Split(want, "\n")[4] {
				t.Fatalf("%s: latest view changed by vacuum:\n%s\nwant\n%s", m, got, want)
			}
		}
	}
}

// TestFailEveryStep fails each store operation of a consolidation and
// then of a vacuum (before and after it takes effect): the latest view
// never changes, and rerunning without faults completes.
func TestFailEveryStep(t *testing.T) {
	ctx := context.Background()
	type run struct {
		m  Mode
		js string
		// then adds to build's history.
		then func(*testing.T, storage.Store)
	}
	runs := []run{{Commits, denseJSON, nil}, {FragmentMeta, denseJSON, nil}, {ArrayMeta, denseJSON, nil}, {Fragments, denseJSON, nil},
		{Fragments, sparseJSON, nil}, {Fragments, sparseJSON, evolvedOverDelete}}
	for _, r := range runs {
		m := r.m
		for _, stage := range []string{"consolidate", "vacuum"} {
			for _, late := range []bool{false, true} {
				for i := int64(0); ; i++ {
					st := build(t, r.js)
					if r.then != nil {
						r.then(t, st)
					}
					want := view(t, st)
					if stage == "vacuum" {
						if _, err := Consolidate(ctx, st, "a", m, Options{}); err != nil {
							t.Fatal(err)
						}
					}
					var inj errorfs.Injector = errorfs.FailNth(i, errorfs.Mutating)
					if late {
						inj = errorfs.Late(inj)
					}
					fs := errorfs.Wrap(st, inj)
					var err error
					if stage == "consolidate" {
						_, err = Consolidate(ctx, fs, "a", m, Options{})
					} else {
						_, err = Vacuum(ctx, fs, "a", m, VacuumOptions{})
					}
					if err == nil {
						if i == 0 && stage == "consolidate" {
							t.Fatalf("%s %s: no store operation to fail", m, stage)
						}
						break
					}
					if !errors.Is(err, errorfs.ErrInjected) {
						t.Fatalf("%s %s step %d: %v", m, stage, i, err)
					}
					latest := func() string { return strings.Join(strings.Split(view(t, st), "\n")[3:], "\n") }
					wantLatest := strings.Join(strings.Split(want, "\n")[3:], "\n")
					if got := latest(); got != wantLatest {
						t.Fatalf("%s %s step %d (late %v): view changed:\n%s\nwant\n%s", m, stage, i, late, got, wantLatest)
					}
					if _, err := Consolidate(ctx, st, "a", m, Options{}); err != nil {
						t.Fatalf("%s %s step %d: rerun consolidate: %v", m, stage, i, err)
					}
					if _, err := Vacuum(ctx, st, "a", m, VacuumOptions{}); err != nil {
						t.Fatalf("%s %s step %d: rerun vacuum: %v", m, stage, i, err)
					}
					if got := latest(); got != wantLatest {
						t.Fatalf("%s %s step %d: after rerun:\n%s\nwant\n%s", m, stage, i, got, wantLatest)
					}
					if m == Fragments {
						// Once the grace has passed, a vacuum leaves no intent
						// file and no uncommitted fragment of the failed run.
						later := VacuumOptions{Grace: time.Hour, Now: time.Now().Add(2 * time.Hour)}
						if _, err := Vacuum(ctx, st, "a", m, later); err != nil {
							t.Fatalf("%s %s step %d: grace vacuum: %v", m, stage, i, err)
						}
						if left := leftovers(t, st); left != "" {
							t.Fatalf("%s %s step %d (late %v): left after the grace vacuum: %s", m, stage, i, late, left)
						}
					}
				}
			}
		}
	}
}

// evolvedOverDelete adds to build's sparse history a delete, a schema
// evolution adding a fixed and a nullable var-sized attribute, and a
// write of them: its consolidation takes the general path
// (consolidateSparseGeneral) and fills the added attributes for the
// fragments written before.
func evolvedOverDelete(t *testing.T, st storage.Store) {
	t.Helper()
	if _, err := Delete(context.Background(), st, "a", "v > 100", 5, nil); err != nil {
		t.Fatal(err)
	}
	evolveAndWrite(t, st, 6)
}

// evolveAndWrite adds a fixed and a nullable var-sized attribute to
// build's sparse array at ts, and writes x = 2, 7 with them at ts+1.
func evolveAndWrite(t *testing.T, st storage.Store, ts uint64) {
	t.Helper()
	ctx := context.Background()
	s, err := writer.EvolveSchema(ctx, st, "a", []json.RawMessage{json.RawMessage(`{"name": "w", "type": "int32"}`),
		json.RawMessage(`{"name": "s", "type": "string_utf8", "cell_val_num": "var", "nullable": true}`)}, nil, ts, writer.ArrayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.WriteSparse(ctx, st, "a", s, map[string]writer.Column{"x": {Data: i64s(2, 7)}, "v": {Data: i64s(-2, -7)},
		"w": {Data: i32s(2, 1)}, "s": {Data: []byte("ab"), Offsets: i64s(0, 1), Validity: []byte{0, 1}}}, writer.Options{Timestamp: ts + 1}); err != nil {
		t.Fatal(err)
	}
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	st := build(t, sparseJSON)
	before := view(t, st)
	for _, bad := range []string{"v >", "nope == 1", "v == 'x'", ""} {
		if _, err := Delete(ctx, st, "a", bad, 10, nil); !errors.Is(err, errkind.InvalidArgument) {
			t.Errorf("filter %q: %v", bad, err)
		}
	}
	if view(t, st) != before {
		t.Fatal("refused deletes changed the array")
	}
	rel, err := Delete(ctx, st, "a", "v >= 20 or x == 1", 10, nil)
	if err != nil || !strings.HasPrefix(rel, "__commits/__10_10_") || !strings.HasSuffix(rel, "_22.del") {
		t.Fatalf("%q %v", rel, err)
	}
	after := strings.Split(view(t, st), "\n")
	if want := strings.Split(before, "\n"); after[2] != want[2] {
		t.Fatalf("a read at 3 (before the delete) changed:\n%s\nwant\n%s", after[2], want[2])
	}
	if got := after[3]; got != "x=2 v=2 ;x=3 v=3 ;" {
		t.Fatalf("after the delete: %s", got)
	}
	dense := build(t, denseJSON)
	if _, err := Delete(ctx, dense, "a", "a > 1", 0, nil); !errors.Is(err, errkind.InvalidArgument) {
		t.Fatalf("dense delete: %v", err)
	}
}

// TestEncrypted consolidates and vacuums an encrypted array in every mode
// with its key: the view is kept; without the key nothing is done.
func TestEncrypted(t *testing.T) {
	ctx := context.Background()
	key := []byte("0123456789abcdeF0123456789abcdeF")
	for _, m := range []Mode{Commits, FragmentMeta, ArrayMeta, Fragments} {
		st := storage.NewMem()
		s, err := schema.FromJSON([]byte(denseJSON))
		if err != nil {
			t.Fatal(err)
		}
		if err := writer.CreateArrayWith(ctx, st, "a", s, writer.ArrayOptions{EncryptionKey: key}); err != nil {
			t.Fatal(err)
		}
		if s, err = writer.LoadSchemaWith(ctx, st, "a", writer.ArrayOptions{EncryptionKey: key}); err != nil {
			t.Fatal(err)
		}
		for k := 1; k <= 3; k++ {
			sub := [][2]int64{{int64(2 * k), int64(2*k + 5)}, {1, 10}}
			if _, err := writer.WriteDense(ctx, st, "a", s, sub, schema.RowMajor, map[string]writer.Column{"a": {Data: i32s(60, int32(100*k))}}, writer.Options{Timestamp: uint64(k), EncryptionKey: key}); err != nil {
				t.Fatal(err)
			}
			if _, err := writer.PutMetadataWith(ctx, st, "a", map[string]arraymeta.Value{"k": arraymeta.Int64s(int64(k))}, uint64(k), writer.ArrayOptions{EncryptionKey: key}); err != nil {
				t.Fatal(err)
			}
		}
		read := func() string {
			r, err := reader.Open(ctx, st, &query.Query{Array: "a", Limit: -1, Layout: query.LayoutRowMajor}, reader.Options{Workers: 1, EncryptionKey: key})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var sb strings.Builder
			for {
				rec, err := r.Next(ctx)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < int(rec.NumRows()); i++ {
					sb.WriteString(rec.Column(2).ValueStr(i) + " ")
				}
				rec.Release()
			}
			snap, err := tdbarray.LoadMetadata(ctx, st, "a", 0, arraymeta.Latest, gentileCodec(key))
			if err != nil {
				t.Fatal(err)
			}
			return sb.String() + fmt.Sprint(snap.Values)
		}
		want := read()
		if _, err := Consolidate(ctx, st, "a", m, Options{}); err == nil {
			t.Fatalf("%s without the key: no error", m)
		}
		if _, err := Consolidate(ctx, st, "a", m, Options{EncryptionKey: key}); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if _, err := Vacuum(ctx, st, "a", m, VacuumOptions{}); err == nil {
			t.Fatalf("%s: vacuum without the key: no error", m)
		}
		if _, err := Vacuum(ctx, st, "a", m, VacuumOptions{EncryptionKey: key}); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if got := read(); got != want {
			t.Fatalf("%s: %s\nwant %s", m, got, want)
		}
	}
}

func gentileCodec(key []byte) gentile.Unfilterer { return filters.GenericTileCodec{EncryptionKey: key} }

// TestSparseOverDeletes: a sparse consolidation over delete commits
// writes the per-cell timestamps and delete metadata TileDB 2.30 writes
// for the same history (values read from TileDB's own consolidation of
// it: cells newest first, __delete_timestamps the first delete that
// removes the cell, __delete_condition_index its index among the
// processed conditions); readers see what they saw at every timestamp,
// and a second consolidation over it (and one more write and delete)
// renumbers and keeps that metadata.
func TestSparseOverDeletes(t *testing.T) {
	ctx := context.Background()
	st := storage.NewMem()
	s, err := schema.FromJSON([]byte(`{"type": "sparse", "capacity": 100,
	  "dimensions": [{"name": "k", "type": "int64", "domain": [0, 1000], "tile": 100}],
	  "attributes": [{"name": "v", "type": "int64"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArray(ctx, st, "a", s); err != nil {
		t.Fatal(err)
	}
	w := func(ts uint64, ks, vs []int64) {
		t.Helper()
		if _, err := writer.WriteSparse(ctx, st, "a", s, map[string]writer.Column{"k": {Data: i64s(ks...)}, "v": {Data: i64s(vs...)}}, writer.Options{Timestamp: ts}); err != nil {
			t.Fatal(err)
		}
	}
	del := func(ts uint64, c string) string {
		t.Helper()
		p, err := Delete(ctx, st, "a", c, ts, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	w(11, []int64{1, 2, 3, 4}, []int64{10, 20, 30, 40})
	w(12, []int64{2, 3, 5}, []int64{21, 31, 51})
	d3 := del(13, "v > 25")
	w(14, []int64{3, 6}, []int64{32, 62})
	d5 := del(15, "k == 2")
	w(16, []int64{7}, []int64{70})
	at := []uint64{11, 12, 13, 14, 15, 16}
	before := readAt(t, st, at...)
	if _, err := Consolidate(ctx, st, "a", Fragments, Options{}); err != nil {
		t.Fatal(err)
	}
	const M = ^uint64(0)
	checkFrag(t, st, 11, 16, []string{d3, d5}, []int64{1, 2, 2, 3, 3, 3, 4, 5, 6, 7}, []uint64{11, 12, 11, 14, 12, 11, 11, 12, 14, 16},
		[]uint64{M, 15, 15, M, 13, 13, 13, 13, M, M}, []uint64{M, 1, 1, M, 0, 0, 0, 0, M, M})
	if got := readAt(t, st, at...); got != before {
		t.Fatalf("after consolidation:\n%s\nwant\n%s", got, before)
	}
	// Again, over the consolidated fragment: a delete older than every
	// fragment (listed first, so the stored indices are renumbered), one
	// after.
	d0 := del(5, "v == 1000")
	w(18, []int64{3, 8}, []int64{33, 80})
	d9 := del(19, "v < 35")
	at = []uint64{5, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}
	before = readAt(t, st, at...)
	if _, err := Consolidate(ctx, st, "a", Fragments, Options{}); err != nil {
		t.Fatal(err)
	}
	checkFrag(t, st, 11, 18, []string{d0, d3, d5, d9}, []int64{1, 2, 2, 3, 3, 3, 3, 4, 5, 6, 7, 8},
		[]uint64{11, 12, 11, 18, 14, 12, 11, 11, 12, 14, 16, 18},
		[]uint64{19, 15, 15, 19, 19, 13, 13, 13, 13, M, M, M}, []uint64{3, 2, 2, 3, 3, 1, 1, 1, 1, M, M, M})
	if got := readAt(t, st, at...); got != before {
		t.Fatalf("after reconsolidation:\n%s\nwant\n%s", got, before)
	}
}

// readAt renders what reads of "a" at each timestamp see.
func readAt(t *testing.T, st storage.Store, ts ...uint64) string {
	t.Helper()
	ctx := context.Background()
	var sb strings.Builder
	for _, x := range ts {
		r, err := reader.Open(ctx, st, &query.Query{Array: "a", Limit: -1, Layout: query.LayoutRowMajor, Timestamp: &query.Timestamp{End: x}}, reader.Options{Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		for {
			rec, err := r.Next(ctx)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < int(rec.NumRows()); i++ {
				for c := 0; c < int(rec.NumCols()); c++ {
					fmt.Fprintf(&sb, "%s ", rec.Column(c).ValueStr(i))
				}
				sb.WriteString(";")
			}
			rec.Release()
		}
		r.Close()
		fmt.Fprintf(&sb, " @%d\n", x)
	}
	return sb.String()
}

// checkFrag checks that "a" has one fragment [t1, t2] holding exactly the
// given cells, timestamps and delete metadata, and the processed
// conditions.
func checkFrag(t *testing.T, st storage.Store, t1, t2 uint64, processed []string, ks []int64, ts, dts, dci []uint64) {
	t.Helper()
	ctx := context.Background()
	a, err := tdbarray.Open(ctx, st, "a", tdbarray.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Fragments) != 1 || a.Fragments[0].Start != t1 || a.Fragments[0].End != t2 {
		t.Fatalf("fragments %v", a.Fragments)
	}
	f := a.Fragments[0]
	if ft := f.Meta.Footer(); !ft.HasTimestamps || !ft.HasDeleteMeta {
		t.Fatalf("footer: timestamps %v, delete meta %v", ft.HasTimestamps, ft.HasDeleteMeta)
	}
	pc, err := f.Meta.ProcessedConditions()
	if err != nil || fmt.Sprint(pc) != fmt.Sprint(processed) {
		t.Fatalf("processed conditions %v (%v), want %v", pc, err, processed)
	}
	l := tileio.NewLoader(a, tileio.Options{})
	u64 := func(name string) []uint64 {
		tl, err := l.Load(ctx, f, name, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer tl.Release()
		out := make([]uint64, len(tl.Data)/8)
		for i := range out {
			out[i] = binary.LittleEndian.Uint64(tl.Data[8*i:])
		}
		return out
	}
	var gotK []int64
	for _, k := range u64("k") {
		gotK = append(gotK, int64(k))
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{{"k", gotK, ks}, {"__timestamps", u64(tileio.FieldTimestamps), ts},
		{"__delete_timestamps", u64(tileio.FieldDeleteTimestamp), dts}, {"__delete_condition_index", u64(tileio.FieldDeleteCondition), dci}} {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}

// A delete on an enumerated attribute stores its condition rewritten to
// indexes and negated, as TileDB 2.30 does (c == 'blue' keeps c != 1);
// the conditions TileDB cannot store (a value the enumeration lacks, a
// null test) are InvalidArgument and write nothing.
func TestDeleteEnumerated(t *testing.T) {
	ctx := context.Background()
	st := storage.NewMem()
	s, err := schema.FromJSON([]byte(`{"type": "sparse", "capacity": 4,
	  "dimensions": [{"name": "x", "type": "int64", "domain": [0, 999], "tile": 10}],
	  "attributes": [{"name": "c", "type": "uint8", "nullable": true, "enumeration": "e"}, {"name": "v", "type": "int64"}],
	  "enumerations": [{"name": "e", "type": "string_ascii", "cell_val_num": "var", "values": ["red", "blue"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArray(ctx, st, "a", s); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.WriteSparse(ctx, st, "a", s, map[string]writer.Column{"x": {Data: i64s(1, 2, 3)},
		"c": {Data: []byte{0, 1, 0}, Validity: []byte{1, 1, 0}}, "v": {Data: i64s(1, 2, 3)}}, writer.Options{Timestamp: 1}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"c == 'nope'", "c != 'nope'", "c in ['nope']", "c == None", "c != None or v > 1"} {
		if _, err := Delete(ctx, st, "a", c, 10, nil); !errors.Is(err, errkind.InvalidArgument) {
			t.Errorf("delete %q: %v, want InvalidArgument", c, err)
		}
	}
	p, err := Delete(ctx, st, "a", "c in ['blue', 'nope'] or v == 1", 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.Get(ctx, "a/"+p)
	if err != nil {
		t.Fatal(err)
	}
	n, err := commits.DecodeDelete(b)
	if err != nil {
		t.Fatal(err)
	}
	// TileDB's form: AND(c NOT_IN [1], v NE 1).
	if len(n.Children) != 2 || n.Children[0].Field != "c" || n.Children[0].Op != commits.OpNotIn || fmt.Sprint(n.Children[0].Members()) != "[[1]]" {
		t.Fatalf("stored tree %+v", n)
	}
	// Every cell goes: x=3's null c fails the stored NOT_IN as well, so
	// TileDB deletes it too (test_delete_enumerated_matches_tiledb).
	if got := readAt(t, st, 5, 20); got != "1 red 1 ;2 blue 2 ;3 (null) 3 ; @5\n @20\n" {
		t.Fatalf("reads before and after the delete: %q", got)
	}
}

// leftovers lists intent files in __commits and fragments that no commit
// names.
func leftovers(t *testing.T, st storage.Store) string {
	t.Helper()
	ctx := context.Background()
	var out []string
	files, err := listFiles(ctx, st, "a", names.CommitsDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, pendingVac) {
			out = append(out, f)
		}
	}
	committed, err := writer.Committed(ctx, st, "a")
	if err != nil {
		t.Fatal(err)
	}
	es, err := st.List(ctx, storage.Join("a", names.FragmentsDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.IsDir && !committed(e.Name) {
			out = append(out, "uncommitted "+e.Name)
		}
	}
	return strings.Join(out, ", ")
}

// TestSparseOverDeletesEvolved: a sparse consolidation over deletes of
// fragments written before schema evolutions (an attribute dropped;
// fixed, nullable and var-sized ones added, one with a fill value) writes
// one fragment in the latest schema, the missing attributes' cells holding
// the fill value (null for the nullable one), as TileDB 2.30 does
// (python_tests/test_lifecycle.py test_sparse_consolidation_evolved_*
// compares the files and reads with TileDB's); reads at every timestamp
// see what they saw before (a delete on an added attribute removed the
// older cells, which lack it), and so after a vacuum and a second
// consolidation over the first.
func TestSparseOverDeletesEvolved(t *testing.T) {
	ctx := context.Background()
	st := storage.NewMem()
	s0, err := schema.FromJSON([]byte(`{"type": "sparse", "capacity": 4,
	  "dimensions": [{"name": "x", "type": "int64", "domain": [0, 999], "tile": 10}],
	  "attributes": [{"name": "v", "type": "int64"}, {"name": "old", "type": "int32"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArray(ctx, st, "a", s0); err != nil {
		t.Fatal(err)
	}
	if s0, err = writer.LoadSchema(ctx, st, "a"); err != nil {
		t.Fatal(err)
	}
	// As build's: x = k, k+1, 50+k and v = k, 10k, 100k at k = 1, 2, 3.
	for k := int64(1); k <= 3; k++ {
		cols := map[string]writer.Column{"x": {Data: i64s(k, k+1, 50+k)}, "v": {Data: i64s(k, 10*k, 100*k)}, "old": {Data: i32s(3, int32(10*k))}}
		if _, err := writer.WriteSparse(ctx, st, "a", s0, cols, writer.Options{Timestamp: uint64(k)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Delete(ctx, st, "a", "v > 100", 5, nil); err != nil {
		t.Fatal(err)
	}
	add := []json.RawMessage{json.RawMessage(`{"name": "w", "type": "int32"}`),
		json.RawMessage(`{"name": "n", "type": "float32", "nullable": true}`),
		json.RawMessage(`{"name": "s", "type": "string_utf8", "cell_val_num": "var"}`),
		json.RawMessage(`{"name": "f", "type": "int16", "fill": 7}`)}
	s, err := writer.EvolveSchema(ctx, st, "a", add, []string{"old"}, 6, writer.ArrayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.WriteSparse(ctx, st, "a", s, map[string]writer.Column{"x": {Data: i64s(1, 60)}, "v": {Data: i64s(-1, -60)},
		"w": {Data: i32s(2, 5)}, "n": {Data: []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40}, Validity: []byte{1, 0}},
		"s": {Data: []byte("abc"), Offsets: i64s(0, 1)}, "f": {Data: []byte{1, 0, 2, 0}}}, writer.Options{Timestamp: 7}); err != nil {
		t.Fatal(err)
	}
	if _, err := Delete(ctx, st, "a", "w < 6", 8, nil); err != nil {
		t.Fatal(err)
	}
	at := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9}
	want := readAt(t, st, at...)
	// The consolidated fragment lacks the dropped attribute: reads before
	// the evolution see its fill value there, as TileDB's do.
	lines := strings.Split(want, "\n")
	for i := range 5 { // the reads @1 to @5; "x v old ;" per cell
		lines[i] = regexp.MustCompile(`(-?\d+ -?\d+ )-?\d+ ;`).ReplaceAllString(lines[i], "${1}-2147483648 ;")
	}
	want = strings.Join(lines, "\n")
	if _, err := Consolidate(ctx, st, "a", Fragments, Options{}); err != nil {
		t.Fatal(err)
	}
	a, err := tdbarray.Open(ctx, st, "a", tdbarray.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Fragments) != 1 || a.Fragments[0].Start != 1 || a.Fragments[0].End != 7 {
		t.Fatalf("fragments %v", a.Fragments)
	}
	f := a.Fragments[0]
	if f.Schema.Name != s.Name || !f.Meta.Footer().HasDeleteMeta {
		t.Fatalf("consolidated fragment: schema %s (want the latest, %s), delete metadata %v", f.Schema.Name, s.Name, f.Meta.Footer().HasDeleteMeta)
	}
	// The stored cells: the 9 written at 1-3 hold the fill values.
	l := tileio.NewLoader(a, tileio.Options{})
	var cells []string
	ntiles, _ := f.Meta.TileNum()
	for tile := uint64(0); tile < ntiles; tile++ {
		get := func(name string) *tileio.Tile {
			tl, err := l.Load(ctx, f, name, tile)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(tl.Release)
			return tl
		}
		x, ts, w, n, str, fv := get("x"), get(tileio.FieldTimestamps), get("w"), get("n"), get("s"), get("f")
		for i := 0; i < len(x.Data)/8; i++ {
			cells = append(cells, fmt.Sprintf("%d@%d:%d,%v,%q,%d", int64(binary.LittleEndian.Uint64(x.Data[8*i:])), binary.LittleEndian.Uint64(ts.Data[8*i:]),
				int32(binary.LittleEndian.Uint32(w.Data[4*i:])), n.Validity[i], str.Data[str.Offset(i):str.Offset(i+1)], int16(binary.LittleEndian.Uint16(fv.Data[2*i:]))))
		}
	}
	if got := strings.Join(cells, " "); got != `1@7:5,1,"a",1 1@1:-2147483648,0,"\x00",7 2@2:-2147483648,0,"\x00",7 2@1:-2147483648,0,"\x00",7 `+
		`3@3:-2147483648,0,"\x00",7 3@2:-2147483648,0,"\x00",7 4@3:-2147483648,0,"\x00",7 `+
		`51@1:-2147483648,0,"\x00",7 52@2:-2147483648,0,"\x00",7 53@3:-2147483648,0,"\x00",7 60@7:6,0,"bc",2` {
		t.Fatalf("stored cells (x@timestamp:w,n valid,s,f):\n%s", got)
	}
	if got := readAt(t, st, at...); got != want {
		t.Fatalf("after consolidation:\n%s\nwant\n%s", got, want)
	}
	if _, err := Vacuum(ctx, st, "a", Fragments, VacuumOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := readAt(t, st, at...); got != want {
		t.Fatalf("after vacuum:\n%s\nwant\n%s", got, want)
	}
	// Once more over the consolidated fragment and a newer write.
	if _, err := writer.WriteSparse(ctx, st, "a", s, map[string]writer.Column{"x": {Data: i64s(2)}, "v": {Data: i64s(-2)},
		"w": {Data: i32s(1, 9)}, "n": {Data: []byte{0, 0, 0, 0}, Validity: []byte{1}},
		"s": {Data: []byte("z"), Offsets: i64s(0)}, "f": {Data: []byte{3, 0}}}, writer.Options{Timestamp: 10}); err != nil {
		t.Fatal(err)
	}
	at = append(at, 10, 11)
	want = readAt(t, st, at...)
	if _, err := Consolidate(ctx, st, "a", Fragments, Options{}); err != nil {
		t.Fatal(err)
	}
	if got := readAt(t, st, at...); got != want {
		t.Fatalf("after the second consolidation:\n%s\nwant\n%s", got, want)
	}
}

// TestSparseEvolvedNoDeletes: without deletes or earlier consolidations,
// fragments written before an evolution added attributes still take the
// general path (a read at their timestamp has no such column: this
// failed with InvalidArgument "no column"), filled in as TileDB's.
func TestSparseEvolvedNoDeletes(t *testing.T) {
	ctx := context.Background()
	st := build(t, sparseJSON)
	evolveAndWrite(t, st, 4)
	at := []uint64{1, 2, 3, 4, 5, 6}
	want := readAt(t, st, at...)
	res, err := Consolidate(ctx, st, "a", Fragments, Options{})
	if err != nil || len(res.Consolidated) != 4 {
		t.Fatalf("%+v %v", res, err)
	}
	if got := readAt(t, st, at...); got != want {
		t.Fatalf("after consolidation:\n%s\nwant\n%s", got, want)
	}
	a, err := tdbarray.Open(ctx, st, "a", tdbarray.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ft := a.Fragments[0].Meta.Footer(); len(a.Fragments) != 1 || !ft.HasTimestamps || ft.HasDeleteMeta {
		t.Fatalf("fragments %v", a.Fragments)
	}
}

// TestSparseWindowBeforeEvolution: a window holding only fragments
// written before an evolution added a var-sized attribute. TileDB 2.30
// dies there (an integer division by zero, SIGFPE, averaging the
// attribute's cell sizes over the fragments that have it: none); ours
// writes the fill values as for any other fragment lacking it, and reads
// at every timestamp see what they saw before.
func TestSparseWindowBeforeEvolution(t *testing.T) {
	ctx := context.Background()
	st := build(t, sparseJSON)
	evolvedOverDelete(t, st)
	at := []uint64{1, 2, 3, 5, 6, 7, 100}
	want := readAt(t, st, at...)
	res, err := Consolidate(ctx, st, "a", Fragments, Options{Start: 1, End: 3})
	if err != nil || len(res.Consolidated) != 3 {
		t.Fatalf("%+v %v", res, err)
	}
	a, err := tdbarray.Open(ctx, st, "a", tdbarray.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Fragments) != 2 || a.Fragments[0].End != 3 || a.Fragments[0].Schema.Name != a.Schema.Name {
		t.Fatalf("fragments %v", a.Fragments)
	}
	if got := readAt(t, st, at...); got != want {
		t.Fatalf("after consolidation:\n%s\nwant\n%s", got, want)
	}
}

// TestDeleteOnDroppedAttribute: a delete whose condition names an
// attribute a later evolution drops. TileDB 2.30 then fails reads at
// timestamps from the drop on, and consolidations ("Field doesn't
// exist"); so do we (FailedPrecondition), writing nothing, while reads
// before the drop still work.
func TestDeleteOnDroppedAttribute(t *testing.T) {
	ctx := context.Background()
	st := build(t, sparseJSON)
	if _, err := writer.EvolveSchema(ctx, st, "a", []json.RawMessage{json.RawMessage(`{"name": "w", "type": "int32"}`)}, nil, 4, writer.ArrayOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Delete(ctx, st, "a", "w > 100", 5, nil); err != nil {
		t.Fatal(err)
	}
	if got := readAt(t, st, 3, 5); got != "1 1 ;2 2 ;3 3 ;4 30 ;51 100 ;52 200 ;53 300 ; @3\n @5\n" {
		t.Fatalf("before the drop: %q", got)
	}
	if _, err := writer.EvolveSchema(ctx, st, "a", nil, []string{"w"}, 6, writer.ArrayOptions{}); err != nil {
		t.Fatal(err)
	}
	files := func() string {
		var out []any
		for _, d := range []string{"a/__fragments", "a/__commits"} {
			ks, err := st.List(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ks)
		}
		return fmt.Sprint(out...)
	}
	was := files()
	for _, ts := range []uint64{6, 100} {
		_, err := reader.Open(ctx, st, &query.Query{Array: "a", Limit: -1, Timestamp: &query.Timestamp{End: ts}}, reader.Options{})
		if !errors.Is(err, errkind.FailedPrecondition) || !strings.Contains(err.Error(), `field "w"`) {
			t.Errorf("read at %d: %v, want FailedPrecondition naming w", ts, err)
		}
	}
	if _, err := Consolidate(ctx, st, "a", Fragments, Options{}); !errors.Is(err, errkind.FailedPrecondition) {
		t.Errorf("consolidation: %v, want FailedPrecondition", err)
	}
	if got := readAt(t, st, 3, 5); got != "1 1 ;2 2 ;3 3 ;4 30 ;51 100 ;52 200 ;53 300 ; @3\n @5\n" || files() != was {
		t.Fatalf("after the refused consolidation: %q", got)
	}
}

// An encrypted sparse array consolidated over a delete and then again
// (per-cell timestamps and delete metadata, encrypted like every other
// tile) reads as before; without the key nothing happens.
func TestEncryptedSparseOverDeletes(t *testing.T) {
	ctx := context.Background()
	key := []byte("0123456789abcdeF0123456789abcdeF")
	st := storage.NewMem()
	s, err := schema.FromJSON([]byte(sparseJSON))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArrayWith(ctx, st, "a", s, writer.ArrayOptions{EncryptionKey: key}); err != nil {
		t.Fatal(err)
	}
	if s, err = writer.LoadSchemaWith(ctx, st, "a", writer.ArrayOptions{EncryptionKey: key}); err != nil {
		t.Fatal(err)
	}
	w := func(ts uint64, ks ...int64) {
		t.Helper()
		vs := make([]int64, len(ks))
		for i, k := range ks {
			vs[i] = k*10 + int64(ts)
		}
		if _, err := writer.WriteSparse(ctx, st, "a", s, map[string]writer.Column{"x": {Data: i64s(ks...)}, "v": {Data: i64s(vs...)}}, writer.Options{Timestamp: ts, EncryptionKey: key}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(ts uint64) string {
		t.Helper()
		r, err := reader.Open(ctx, st, &query.Query{Array: "a", Limit: -1, Layout: query.LayoutRowMajor, Timestamp: &query.Timestamp{End: ts}}, reader.Options{Workers: 1, EncryptionKey: key})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var sb strings.Builder
		for {
			rec, err := r.Next(ctx)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < int(rec.NumRows()); i++ {
				sb.WriteString(rec.Column(0).ValueStr(i) + "=" + rec.Column(1).ValueStr(i) + " ")
			}
			rec.Release()
		}
		return sb.String()
	}
	w(1, 1, 2, 3)
	w(2, 2, 3, 4)
	if _, err := Delete(ctx, st, "a", "v > 25", 3, key); err != nil {
		t.Fatal(err)
	}
	w(4, 3, 5)
	views := func() []string { return []string{read(1), read(2), read(3), read(4)} }
	want := views()
	if _, err := Consolidate(ctx, st, "a", Fragments, Options{}); err == nil {
		t.Fatal("consolidation without the key: no error")
	}
	for round := 0; round < 2; round++ {
		if _, err := Consolidate(ctx, st, "a", Fragments, Options{EncryptionKey: key}); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if got := views(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: %v\nwant %v", round, got, want)
		}
		w(5+uint64(round), 9)
		want = views()
	}
}

// TestFragmentsDefaultWindowTakesFuture: with no timestamp window, a
// fragments consolidation takes fragments stamped ahead of the clock too
// (TileDB's window ends at UINT64_MAX), and the new fragment's name ends
// at the newest of them.
func TestFragmentsDefaultWindowTakesFuture(t *testing.T) {
	ctx := context.Background()
	ahead := uint64(time.Now().Add(24 * time.Hour).UnixMilli())
	for _, js := range []string{denseJSON, sparseJSON} {
		st := build(t, js)
		s, err := writer.LoadSchema(ctx, st, "a")
		if err != nil {
			t.Fatal(err)
		}
		if s.IsDense() {
			_, err = writer.WriteDense(ctx, st, "a", s, [][2]int64{{15, 16}, {1, 10}}, schema.RowMajor, map[string]writer.Column{"a": {Data: i32s(20, 900)}}, writer.Options{Timestamp: ahead})
		} else {
			_, err = writer.WriteSparse(ctx, st, "a", s, map[string]writer.Column{"x": {Data: i64s(700)}, "v": {Data: i64s(7)}}, writer.Options{Timestamp: ahead})
		}
		if err != nil {
			t.Fatal(err)
		}
		res, err := Consolidate(ctx, st, "a", Fragments, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Consolidated) != 4 || len(res.Written) == 0 {
			t.Fatalf("dense=%v: consolidated %v, wrote %v; want the 4 fragments, the one stamped %d included", s.IsDense(), res.Consolidated, res.Written, ahead)
		}
		if want := fmt.Sprintf("__1_%d_", ahead); !strings.Contains(res.Written[0], want) {
			t.Fatalf("dense=%v: wrote %v, want a fragment named %s...", s.IsDense(), res.Written, want)
		}
	}
}
