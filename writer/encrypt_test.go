package writer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/arraymeta"
	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
)

var (
	testKey  = []byte("0123456789abcdeF0123456789abcdeF")
	otherKey = []byte("FEDCBA9876543210FEDCBA9876543210")
)

// readRows reads every cell of the array at dir through the read engine
// (global order) and renders one line per cell.
func readRows(t *testing.T, st storage.Store, dir string, key []byte) []string {
	t.Helper()
	ctx := context.Background()
	r, err := reader.Open(ctx, st, &query.Query{Array: dir, Layout: query.LayoutGlobal, Limit: -1}, reader.Options{EncryptionKey: key, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []string
	for {
		rec, err := r.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			var sb strings.Builder
			for c := 0; c < int(rec.NumCols()); c++ {
				fmt.Fprintf(&sb, "%s=%s ", rec.ColumnName(c), rec.Column(c).ValueStr(i))
			}
			out = append(out, sb.String())
		}
		rec.Release()
	}
	return out
}

// encryptedWrite is one way of writing the test cells.
type encryptedWrite struct {
	name  string
	js    string
	write func(st storage.Store, dir string, s *schema.ArraySchema, opt Options) error
}

var encryptedWrites = []encryptedWrite{
	{"sparse", sparseJSON, func(st storage.Store, dir string, s *schema.ArraySchema, opt Options) error {
		_, err := WriteSparse(context.Background(), st, dir, s, sparseCols(5, 37), opt)
		return err
	}},
	{"sparse-stream", sparseJSON, func(st storage.Store, dir string, s *schema.ArraySchema, opt Options) error {
		opt.MaxFragmentBytes = 600 // several fragments: the duplicate check reads tiles back
		w, err := NewSparseWriter(context.Background(), st, dir, s, opt)
		if err != nil {
			return err
		}
		defer w.Abort()
		for b := int64(0); b < 3; b++ {
			if err := w.AppendColumns(sparseCols(b*300, 20)); err != nil {
				return err
			}
		}
		_, err = w.Commit()
		return err
	}},
	{"dense", denseJSON, func(st storage.Store, dir string, s *schema.ArraySchema, opt Options) error {
		_, err := WriteDense(context.Background(), st, dir, s, [][2]int64{{2, 9}, {3, 12}}, schema.RowMajor, denseCols(80), opt)
		return err
	}},
	{"dense-stream", denseJSON, func(st storage.Store, dir string, s *schema.ArraySchema, opt Options) error {
		opt.MaxFragmentBytes = 200
		w, err := NewDenseWriter(context.Background(), st, dir, s, [][2]int64{{1, 8}, {1, 12}}, schema.ColMajor, opt)
		if err != nil {
			return err
		}
		defer w.Abort()
		if err := w.AppendColumns(denseCols(96)); err != nil {
			return err
		}
		_, err = w.Commit()
		return err
	}},
}

// TestEncryptedRoundTrip writes the same cells into a plain and an
// encrypted array: the read engine, given the key, reads the same cells
// from both; every generic tile of the encrypted array says AES-256-GCM
// and no file holds a plaintext string cell.
func TestEncryptedRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, tc := range encryptedWrites {
		t.Run(tc.name, func(t *testing.T) {
			st := storage.NewMem()
			plain := mustCreate(t, st, "plain", tc.js)
			enc, err := schema.FromJSON([]byte(tc.js))
			if err != nil {
				t.Fatal(err)
			}
			if err := CreateArrayWith(ctx, st, "enc", enc, ArrayOptions{EncryptionKey: testKey}); err != nil {
				t.Fatal(err)
			}
			loaded, err := LoadSchemaWith(ctx, st, "enc", ArrayOptions{EncryptionKey: testKey})
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.write(st, "plain", plain, Options{Timestamp: 10}); err != nil {
				t.Fatal(err)
			}
			if err := tc.write(st, "enc", loaded, Options{Timestamp: 10, EncryptionKey: testKey}); err != nil {
				t.Fatal(err)
			}
			if _, err := PutMetadataWith(ctx, st, "enc", map[string]arraymeta.Value{"k": arraymeta.String("secretvalue")}, 11, ArrayOptions{EncryptionKey: testKey}); err != nil {
				t.Fatal(err)
			}
			want := readRows(t, st, "plain", nil)
			got := readRows(t, st, "enc", testKey)
			if len(want) == 0 || strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("encrypted array reads\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			a, err := tdbarray.Open(ctx, st, "enc", tdbarray.Options{EncryptionKey: testKey})
			if err != nil {
				t.Fatal(err)
			}
			snap, err := a.Metadata(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if v := snap.Values["k"]; !v.Equal(arraymeta.String("secretvalue")) {
				t.Fatalf("metadata k = %v", v)
			}
			nfrag := 0
			for _, k := range listAll(t, st, "enc") {
				b, _ := st.Get(ctx, k)
				for _, plainText := range []string{"secretvalue", "zzzz"} {
					if bytes.Contains(b, []byte(plainText)) {
						t.Errorf("%s holds the plaintext %q", k, plainText)
					}
				}
				if strings.Contains(k, names.SchemaDir) || strings.Contains(k, names.MetaDir) || strings.HasSuffix(k, names.FragmentMetadataFile) {
					h, err := gentile.DecodeHeader(b)
					if err != nil || h.EncryptionType != encryptionAES {
						t.Errorf("%s: generic tile header %+v, %v: want encryption type %d", k, h, err, encryptionAES)
					}
				}
				if strings.HasSuffix(k, names.FragmentMetadataFile) {
					nfrag++
				}
			}
			if nfrag == 0 {
				t.Fatal("no fragment written")
			}
		})
	}
}

// TestEncryptionKeyRefused: every way of touching an encrypted array
// without its key (or a plain one with a key) fails with the right kind
// before anything is stored.
func TestEncryptionKeyRefused(t *testing.T) {
	ctx := context.Background()
	st := storage.NewMem()
	mustCreate(t, st, "plain", sparseJSON)
	es, _ := schema.FromJSON([]byte(sparseJSON))
	if err := CreateArrayWith(ctx, st, "enc", es, ArrayOptions{EncryptionKey: testKey}); err != nil {
		t.Fatal(err)
	}
	ds, _ := schema.FromJSON([]byte(denseJSON))
	if err := CreateArrayWith(ctx, st, "dense", ds, ArrayOptions{EncryptionKey: testKey}); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSchema(ctx, st, "enc"); !errors.Is(err, errkind.InvalidArgument) || !strings.Contains(err.Error(), "encrypted") {
		t.Fatalf("LoadSchema without the key: %v", err)
	}
	if s, _ := schema.FromJSON([]byte(sparseJSON)); CreateArrayWith(ctx, st, "short", s, ArrayOptions{EncryptionKey: testKey[:16]}) == nil {
		t.Fatal("a 16-byte key was accepted")
	}
	ps, err := LoadSchema(ctx, st, "plain")
	if err != nil {
		t.Fatal(err)
	}
	key := func(k []byte) Options { return Options{EncryptionKey: k} }
	cases := []struct {
		name string
		dir  string
		kind error
		do   func() error
	}{
		{"sparse write without key", "enc", errkind.InvalidArgument, func() error {
			_, err := WriteSparse(ctx, st, "enc", es, sparseCols(0, 5), Options{})
			return err
		}},
		{"empty sparse write without key", "enc", errkind.InvalidArgument, func() error {
			_, err := WriteSparse(ctx, st, "enc", es, map[string]Column{"x": {}, "y": {}, "v": {}, "s": {}}, Options{})
			return err
		}},
		{"sparse write with wrong key", "enc", errkind.FailedPrecondition, func() error {
			_, err := WriteSparse(ctx, st, "enc", es, sparseCols(0, 5), key(otherKey))
			return err
		}},
		{"sparse write with a short key", "enc", errkind.InvalidArgument, func() error {
			_, err := WriteSparse(ctx, st, "enc", es, sparseCols(0, 5), key(testKey[:31]))
			return err
		}},
		{"key for a plain array", "plain", errkind.InvalidArgument, func() error {
			_, err := WriteSparse(ctx, st, "plain", ps, sparseCols(0, 5), key(testKey))
			return err
		}},
		{"dense write without key", "dense", errkind.InvalidArgument, func() error {
			_, err := WriteDense(ctx, st, "dense", ds, [][2]int64{{1, 1}, {1, 2}}, schema.RowMajor, denseCols(2), Options{})
			return err
		}},
		{"sparse stream without key", "enc", errkind.InvalidArgument, func() error {
			_, err := NewSparseWriter(ctx, st, "enc", es, Options{})
			return err
		}},
		{"dense stream with wrong key", "dense", errkind.FailedPrecondition, func() error {
			_, err := NewDenseWriter(ctx, st, "dense", ds, [][2]int64{{1, 1}, {1, 2}}, schema.RowMajor, key(otherKey))
			return err
		}},
		{"metadata without key", "enc", errkind.InvalidArgument, func() error {
			_, err := PutMetadata(ctx, st, "enc", map[string]arraymeta.Value{"k": arraymeta.Int64s(1)}, 0)
			return err
		}},
		{"metadata delete with wrong key", "enc", errkind.FailedPrecondition, func() error {
			_, err := DeleteMetadataWith(ctx, st, "enc", []string{"k"}, 0, ArrayOptions{EncryptionKey: otherKey})
			return err
		}},
		{"metadata with a key for a plain array", "plain", errkind.InvalidArgument, func() error {
			_, err := PutMetadataWith(ctx, st, "plain", map[string]arraymeta.Value{"k": arraymeta.Int64s(1)}, 0, ArrayOptions{EncryptionKey: testKey})
			return err
		}},
		{"schema with wrong key", "enc", errkind.FailedPrecondition, func() error {
			_, err := LoadSchemaWith(ctx, st, "enc", ArrayOptions{EncryptionKey: otherKey})
			return err
		}},
		{"drop without key", "enc", errkind.InvalidArgument, func() error {
			return DropArray(ctx, st, "enc")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := listAll(t, st, tc.dir)
			snap := snapshot(t, st, tc.dir)
			err := tc.do()
			if !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want kind %v", err, tc.kind)
			}
			if after := listAll(t, st, tc.dir); strings.Join(after, ",") != strings.Join(before, ",") {
				t.Fatalf("the store changed: %v -> %v", before, after)
			}
			requireKept(t, st, snap, tc.name)
		})
	}
	if err := DropArrayWith(ctx, st, "enc", ArrayOptions{EncryptionKey: testKey}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := Exists(ctx, st, "enc"); ok {
		t.Fatal("enc still exists after the drop")
	}
}

// FuzzOpenGeneric: any bytes as a schema file, with or without a key,
// give a payload or a classified error, never a panic.
func FuzzOpenGeneric(f *testing.F) {
	for _, key := range [][]byte{nil, testKey} {
		b, err := encodeGeneric([]byte("payload bytes"), FormatVersion, key)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, key != nil)
	}
	f.Fuzz(func(t *testing.T, b []byte, withKey bool) {
		var key []byte
		if withKey {
			key = testKey
		}
		p, err := openGeneric(b, "fuzz", key)
		if err != nil && errkind.Of(err) == nil {
			t.Fatalf("unclassified error: %v", err)
		}
		if err == nil && p == nil {
			t.Fatal("no payload and no error")
		}
	})
}
