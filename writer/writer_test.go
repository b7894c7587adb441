package writer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/storage/errorfs"
)

const sparseJSON = `{"type": "sparse", "capacity": 4, "cell_order": "row-major", "tile_order": "row-major",
 "dimensions": [{"name": "x", "type": "int64", "domain": [0, 999], "tile": 10},
                {"name": "y", "type": "int64", "domain": [0, 999], "tile": 10}],
 "attributes": [{"name": "v", "type": "float64", "nullable": true, "filters": [{"name": "zstd", "level": 3}]},
                {"name": "s", "type": "string_utf8", "cell_val_num": "var"}]}`

const denseJSON = `{"type": "dense",
 "dimensions": [{"name": "r", "type": "int32", "domain": [1, 20], "tile": 4},
                {"name": "c", "type": "int32", "domain": [1, 12], "tile": 5}],
 "attributes": [{"name": "a", "type": "int32"}, {"name": "s", "type": "string_ascii", "cell_val_num": "var", "nullable": true}]}`

func mustCreate(t *testing.T, st storage.Store, dir, js string) *schema.ArraySchema {
	t.Helper()
	s, err := schema.FromJSON([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	if err := CreateArray(context.Background(), st, dir, s); err != nil {
		t.Fatal(err)
	}
	return s
}

func i64s(v ...int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

func i32s(v ...int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

func strs(v ...string) Column {
	var c Column
	for _, s := range v {
		c.Offsets = binary.LittleEndian.AppendUint64(c.Offsets, uint64(len(c.Data)))
		c.Data = append(c.Data, s...)
	}
	return c
}

func ones(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 1
	}
	return b
}

func sparseCols(base int64, n int) map[string]Column {
	var xs, ys []int64
	var vs []int64
	var ss []string
	for i := 0; i < n; i++ {
		xs = append(xs, (base+int64(i)*7)%1000)
		ys = append(ys, (base*3+int64(i)*13)%1000)
		vs = append(vs, 0)
		ss = append(ss, fmt.Sprint("s", i))
	}
	return map[string]Column{
		"x": {Data: i64s(xs...)}, "y": {Data: i64s(ys...)},
		"v": {Data: i64s(vs...), Validity: ones(n)}, "s": strs(ss...),
	}
}

func denseCols(n int) map[string]Column {
	var a []int32
	var ss []string
	for i := 0; i < n; i++ {
		a = append(a, int32(i))
		ss = append(ss, strings.Repeat("z", i%5))
	}
	c := strs(ss...)
	c.Validity = ones(n)
	return map[string]Column{"a": {Data: i32s(a...)}, "s": c}
}

// listAll returns every key under dir.
func listAll(t *testing.T, st storage.Store, dir string) []string {
	t.Helper()
	var out []string
	var walk func(string)
	walk = func(d string) {
		ents, err := st.List(context.Background(), d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			k := storage.Join(d, e.Name)
			if e.IsDir {
				walk(k)
			} else {
				out = append(out, k)
			}
		}
	}
	walk(dir)
	sort.Strings(out)
	return out
}

// snapshot returns every file under dir with its bytes.
func snapshot(t *testing.T, st storage.Store, dir string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	for _, k := range listAll(t, st, dir) {
		b, err := st.Get(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		snap[k] = string(b)
	}
	return snap
}

// requireKept fails unless every file of snap is still there with the
// same bytes.
func requireKept(t *testing.T, st storage.Store, snap map[string]string, what string) {
	t.Helper()
	for k, v := range snap {
		if b, err := st.Get(context.Background(), k); err != nil || string(b) != v {
			t.Fatalf("%s: %s changed (%v)", what, k, err)
		}
	}
}

func commitsOf(t *testing.T, st storage.Store, dir string) []string {
	var out []string
	for _, k := range listAll(t, st, storage.Join(dir, names.CommitsDir)) {
		out = append(out, k[strings.LastIndexByte(k, '/')+1:])
	}
	return out
}

func TestCreateArray(t *testing.T) {
	ctx := context.Background()
	st := storage.NewMem()
	s := mustCreate(t, st, "arr", sparseJSON)
	if !strings.HasPrefix(s.Name, "__") {
		t.Fatalf("schema name %q", s.Name)
	}
	got, err := LoadSchema(ctx, st, "arr")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != s.Name || len(got.Attributes) != 2 || got.Capacity != 4 {
		t.Fatalf("loaded %+v", got)
	}
	s2, _ := schema.FromJSON([]byte(sparseJSON))
	if err := CreateArray(ctx, st, "arr", s2); !errors.Is(err, errkind.AlreadyExists) {
		t.Fatalf("second create: %v", err)
	}
	bad, _ := schema.FromJSON([]byte(sparseJSON))
	bad.Dimensions[0].Domain = i64s(5, 1)
	if err := CreateArray(ctx, st, "bad", bad); !errors.Is(err, errkind.InvalidArgument) {
		t.Fatalf("invalid schema: %v", err)
	}
	if k := listAll(t, st, "bad"); len(k) != 0 {
		t.Fatalf("invalid schema left %v", k)
	}
	if err := DropArray(ctx, st, "arr"); err != nil {
		t.Fatal(err)
	}
	if k := listAll(t, st, "arr"); len(k) != 0 {
		t.Fatalf("drop left %v", k)
	}
	if err := DropArray(ctx, st, "arr"); !errors.Is(err, errkind.NotFound) {
		t.Fatalf("drop missing: %v", err)
	}
}

func TestValidationWritesNothing(t *testing.T) {
	ctx := context.Background()
	st := storage.NewMem()
	sp := mustCreate(t, st, "sp", sparseJSON)
	de := mustCreate(t, st, "de", denseJSON)
	type tc struct {
		name string
		run  func() error
		want string
	}
	mod := func(f func(m map[string]Column)) map[string]Column {
		m := sparseCols(1, 6)
		f(m)
		return m
	}
	cases := []tc{
		{"missing column", func() error {
			_, err := WriteSparse(ctx, st, "sp", sp, mod(func(m map[string]Column) { delete(m, "s") }), Options{})
			return err
		}, `missing column for attribute "s"`},
		{"extra column", func() error {
			_, err := WriteSparse(ctx, st, "sp", sp, mod(func(m map[string]Column) { m["zz"] = Column{} }), Options{})
			return err
		}, `"zz"`},
		{"wrong size", func() error {
			_, err := WriteSparse(ctx, st, "sp", sp, mod(func(m map[string]Column) { m["x"] = Column{Data: i64s(1, 2)} }), Options{})
			return err
		}, "cells"},
		{"null in non-nullable", func() error {
			_, err := WriteSparse(ctx, st, "sp", sp, mod(func(m map[string]Column) {
				c := m["x"]
				c.Validity = []byte{1, 1, 0, 1, 1, 1}
				m["x"] = c
			}), Options{})
			return err
		}, "not nullable"},
		{"outside domain", func() error {
			_, err := WriteSparse(ctx, st, "sp", sp, mod(func(m map[string]Column) { m["y"] = Column{Data: i64s(1, 2, 3, 4000, 5, 6)} }), Options{})
			return err
		}, `dimension "y": coordinate 4000`},
		{"duplicates", func() error {
			_, err := WriteSparse(ctx, st, "sp", sp, mod(func(m map[string]Column) {
				m["x"] = Column{Data: i64s(1, 2, 3, 4, 5, 1)}
				m["y"] = Column{Data: i64s(9, 2, 3, 4, 5, 9)}
			}), Options{})
			return err
		}, "duplicate coordinates (x=1, y=9)"},
		{"dense row count", func() error {
			_, err := WriteDense(ctx, st, "de", de, [][2]int64{{1, 3}, {1, 3}}, schema.RowMajor, denseCols(8), Options{})
			return err
		}, "8 rows for a subarray of 9 cells"},
		{"dense outside domain", func() error {
			_, err := WriteDense(ctx, st, "de", de, [][2]int64{{1, 3}, {10, 13}}, schema.RowMajor, denseCols(12), Options{})
			return err
		}, "outside the domain"},
		{"dense takes no dims", func() error {
			m := denseCols(9)
			m["r"] = Column{Data: i32s(1, 2, 3, 1, 2, 3, 1, 2, 3)}
			_, err := WriteDense(ctx, st, "de", de, [][2]int64{{1, 3}, {1, 3}}, schema.RowMajor, m, Options{})
			return err
		}, `"r"`},
	}
	before := listAll(t, st, "")
	snap := snapshot(t, st, "")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.run()
			if !errors.Is(err, errkind.InvalidArgument) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want InvalidArgument containing %q", err, c.want)
			}
			if after := listAll(t, st, ""); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("store changed: %v", after)
			}
			requireKept(t, st, snap, c.name)
		})
	}
}

// TestFailEveryStep makes each mutating store operation of a write fail in
// turn: the write reports the error, and the array still shows exactly
// the earlier write (its commit and files untouched, no new commit).
func TestFailEveryStep(t *testing.T) {
	ctx := context.Background()
	writes := []struct {
		name string
		js   string
		do   func(st storage.Store, s *schema.ArraySchema, base int64) error
	}{
		{"sparse one fragment", sparseJSON, func(st storage.Store, s *schema.ArraySchema, base int64) error {
			_, err := WriteSparse(ctx, st, "a", s, sparseCols(base, 30), Options{Timestamp: uint64(base)})
			return err
		}},
		{"sparse split", sparseJSON, func(st storage.Store, s *schema.ArraySchema, base int64) error {
			_, err := WriteSparse(ctx, st, "a", s, sparseCols(base, 30), Options{Timestamp: uint64(base), MaxFragmentBytes: 300})
			return err
		}},
		{"dense split", denseJSON, func(st storage.Store, s *schema.ArraySchema, base int64) error {
			_, err := WriteDense(ctx, st, "a", s, [][2]int64{{1, 20}, {1, 12}}, schema.RowMajor, denseCols(240), Options{Timestamp: uint64(base), MaxFragmentBytes: 1000})
			return err
		}},
	}
	for _, w := range writes {
		t.Run(w.name, func(t *testing.T) {
			// Count the steps of the second write.
			mem := storage.NewMem()
			s := mustCreate(t, mem, "a", w.js)
			if err := w.do(mem, s, 1); err != nil {
				t.Fatal(err)
			}
			probe := errorfs.Wrap(mem, nil)
			if err := w.do(probe, s, 2); err != nil {
				t.Fatal(err)
			}
			steps := probe.MutatingOps()
			if steps < 3 {
				t.Fatalf("only %d mutating steps", steps)
			}
			if strings.Contains(w.name, "split") && !strings.HasSuffix(commitsOf(t, mem, "a")[1], ".con") {
				t.Fatalf("split write committed by %v", commitsOf(t, mem, "a"))
			}
			for i := int64(0); i < steps; i++ {
				mem := storage.NewMem()
				s := mustCreate(t, mem, "a", w.js)
				if err := w.do(mem, s, 1); err != nil {
					t.Fatal(err)
				}
				snap := snapshot(t, mem, "a")
				goodCommits := commitsOf(t, mem, "a")
				fs := errorfs.Wrap(mem, errorfs.FailNth(i, errorfs.Mutating))
				if err := w.do(fs, s, 2); !errors.Is(err, errorfs.ErrInjected) {
					t.Fatalf("step %d: got %v", i, err)
				}
				if c := commitsOf(t, mem, "a"); fmt.Sprint(c) != fmt.Sprint(goodCommits) {
					t.Fatalf("step %d: commits %v, want %v", i, c, goodCommits)
				}
				requireKept(t, mem, snap, fmt.Sprintf("step %d", i))
			}
		})
	}
}

func TestConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	st := storage.NewMem()
	s := mustCreate(t, st, "a", sparseJSON)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	frags := make([]string, n)
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			res, err := WriteSparse(ctx, st, "a", s, sparseCols(int64(g), 50), Options{Timestamp: 42})
			errs[g] = err
			if err == nil {
				frags[g] = res.Fragments[0]
			}
		}(g)
	}
	wg.Wait()
	seen := map[string]bool{}
	for g := 0; g < n; g++ {
		if errs[g] != nil {
			t.Fatal(errs[g])
		}
		if seen[frags[g]] {
			t.Fatalf("fragment name %s reused", frags[g])
		}
		seen[frags[g]] = true
	}
	if c := commitsOf(t, st, "a"); len(c) != n {
		t.Fatalf("%d commits: %v", len(c), c)
	}
}

func TestStrncmp(t *testing.T) {
	cases := []struct {
		a, b string
		n    int
		want int
	}{
		{"abc", "abd", 3, -1}, {"abc", "abd", 2, 0}, {"a\x00x", "a\x00y", 3, 0},
		{"\xff", "a", 1, 1}, {"ab", "abc", 3, -1}, {"", "", 0, 0},
	}
	for _, c := range cases {
		if got := strncmp([]byte(c.a), []byte(c.b), c.n); got != c.want {
			t.Errorf("strncmp(%q, %q, %d) = %d, want %d", c.a, c.b, c.n, got, c.want)
		}
	}
}
