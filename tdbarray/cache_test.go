package tdbarray

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/storage/errorfs"
	"github.com/tileflight/tileflight/writer"
)

func writeSparse(t *testing.T, st storage.Store, s *schema.ArraySchema, ts uint64, xs ...int64) {
	t.Helper()
	x := make([]byte, 8*len(xs))
	v := make([]byte, 8*len(xs))
	for i, c := range xs {
		binary.LittleEndian.PutUint64(x[8*i:], uint64(c))
		binary.LittleEndian.PutUint64(v[8*i:], uint64(c*10))
	}
	cols := map[string]writer.Column{"x": {Data: x}, "v": {Data: v}}
	if _, err := writer.WriteSparse(context.Background(), st, "a", s, cols, writer.Options{Timestamp: ts}); err != nil {
		t.Fatal(err)
	}
}

// A second Open with the cache reads no schema and no fragment metadata
// file, and a fragment committed in between is seen.
func TestCacheServesImmutableFilesAndSeesNewCommits(t *testing.T) {
	ctx := context.Background()
	mem := storage.NewMem()
	s, err := schema.FromJSON([]byte(`{"type":"sparse","dimensions":[{"name":"x","type":"int64","domain":[0,1000],"tile":10}],
		"attributes":[{"name":"v","type":"int64"}],"enumerations":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArray(ctx, mem, "a", s); err != nil {
		t.Fatal(err)
	}
	if s, err = writer.LoadSchema(ctx, mem, "a"); err != nil {
		t.Fatal(err)
	}
	writeSparse(t, mem, s, 10, 1, 2, 3)
	writeSparse(t, mem, s, 20, 4, 5)

	// After the first Open, reading a schema or fragment metadata file
	// fails: the cache must serve them.
	sw := &errorfs.Switch{Inj: errorfs.FailMatching(errorfs.Reads, func(k string) bool {
		return strings.Contains(k, "/__schema/") || strings.HasSuffix(k, "__fragment_metadata.tdb")
	})}
	st := errorfs.Wrap(mem, sw)
	cache := NewCache(0)
	first, err := Open(ctx, st, "a", Options{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Fragments[0].Meta.RTree(); err != nil { // load a section now
		t.Fatal(err)
	}
	sw.Set(true)
	again, err := Open(ctx, st, "a", Options{Cache: cache})
	if err != nil {
		t.Fatalf("second open read an immutable file again: %v", err)
	}
	if len(again.Fragments) != 2 || again.Schema != first.Schema {
		t.Fatalf("%d fragments, same schema %v", len(again.Fragments), again.Schema == first.Schema)
	}
	if _, err := again.Fragments[0].Meta.RTree(); err != nil {
		t.Fatalf("a section loaded before is read again: %v", err)
	}

	// A new commit is seen by the next Open (only its own metadata is read).
	sw.Set(false)
	writeSparse(t, mem, s, 30, 6)
	third, err := Open(ctx, st, "a", Options{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if len(third.Fragments) != 3 {
		t.Fatalf("new commit not seen: %d fragments", len(third.Fragments))
	}
}

// Entries decoded with an encryption key are never served to an Open
// without it: the encrypted array stays closed to a keyless caller.
func TestCacheKeepsEncryptedArraysClosed(t *testing.T) {
	ctx := context.Background()
	mem := storage.NewMem()
	key := []byte("0123456789abcdef0123456789abcdef")
	s, err := schema.FromJSON([]byte(`{"type":"sparse","dimensions":[{"name":"x","type":"int64","domain":[0,1000],"tile":10}],
		"attributes":[{"name":"v","type":"int64"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArrayWith(ctx, mem, "a", s, writer.ArrayOptions{EncryptionKey: key}); err != nil {
		t.Fatal(err)
	}
	if s, err = writer.LoadSchemaWith(ctx, mem, "a", writer.ArrayOptions{EncryptionKey: key}); err != nil {
		t.Fatal(err)
	}
	cols := map[string]writer.Column{"x": {Data: make([]byte, 8)}, "v": {Data: make([]byte, 8)}}
	if _, err := writer.WriteSparse(ctx, mem, "a", s, cols, writer.Options{Timestamp: 5, EncryptionKey: key}); err != nil {
		t.Fatal(err)
	}
	cache := NewCache(0)
	a, err := Open(ctx, mem, "a", Options{Cache: cache, EncryptionKey: key})
	if err != nil || !a.Encrypted || len(a.Fragments) != 1 {
		t.Fatalf("with the key: %v", err)
	}
	if _, err := Open(ctx, mem, "a", Options{Cache: cache}); err == nil {
		t.Fatal("an encrypted array opened without its key through cached entries")
	}
}

func TestCacheIsBounded(t *testing.T) {
	c := NewCache(2)
	c.put("a", 1)
	c.put("b", 2)
	c.get("a") // a is now the most recently used
	c.put("c", 3)
	if _, ok := c.get("b"); ok {
		t.Fatal("the least recently used entry was kept")
	}
	if _, ok := c.get("a"); !ok || c.Len() != 2 {
		t.Fatalf("len %d", c.Len())
	}
	var nilCache *Cache
	nilCache.put("x", 1)
	if _, ok := nilCache.get("x"); ok {
		t.Fatal("nil cache cached")
	}
}

// growing is a cached value whose size changes after it is stored, as a
// fragment's metadata does when its sections load.
type growing struct{ n int64 }

func (g *growing) memoryBytes() int64 { return g.n }

// The cache is bounded in bytes too: an entry that grew since it was
// stored is weighed again when it is touched, and older entries make room.
func TestCacheIsBoundedInBytes(t *testing.T) {
	c := NewCacheBytes(100, 1000)
	a, b, d := &growing{300}, &growing{300}, &growing{300}
	c.put("a", a)
	c.put("b", b)
	c.put("d", d)
	if c.Bytes() != 900 || c.Len() != 3 {
		t.Fatalf("%d bytes in %d entries, want 900 in 3", c.Bytes(), c.Len())
	}
	d.n = 500 // d loaded sections
	if _, ok := c.get("d"); !ok {
		t.Fatal("the entry just used was evicted")
	}
	if _, ok := c.get("a"); ok {
		t.Fatal("the least recently used entry was kept past the byte bound")
	}
	if c.Bytes() != 800 || c.Len() != 2 {
		t.Fatalf("%d bytes in %d entries, want 800 in 2", c.Bytes(), c.Len())
	}
	// An entry larger than the whole bound stays alone (it is in use).
	c.put("huge", &growing{5000})
	if c.Len() != 1 {
		t.Fatalf("%d entries beside one larger than the bound", c.Len()-1)
	}
	// Fragment metadata reports its footer and the sections it loaded.
	ctx := context.Background()
	mem := storage.NewMem()
	s, err := schema.FromJSON([]byte(`{"type":"sparse","dimensions":[{"name":"x","type":"int64","domain":[0,1000],"tile":10}],
		"attributes":[{"name":"v","type":"int64"}],"enumerations":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArray(ctx, mem, "a", s); err != nil {
		t.Fatal(err)
	}
	writeSparse(t, mem, s, 1, 1, 2, 3)
	arr, err := Open(ctx, mem, "a", Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := arr.Fragments[0].Meta
	before := m.MemoryBytes()
	if _, err := m.TileOffset(0, 0); err != nil {
		t.Fatal(err)
	}
	if after := m.MemoryBytes(); after <= before {
		t.Errorf("loading tile offsets left the estimate at %d bytes (before %d)", after, before)
	}
}

// A SchemaOnly Open (what a write needs) reads no commit, fragment list or
// fragment metadata, serves the schema from the cache, and sees a schema
// evolved since the previous Open.
func TestSchemaOnlyOpen(t *testing.T) {
	ctx := context.Background()
	mem := storage.NewMem()
	s, err := schema.FromJSON([]byte(`{"type":"sparse","dimensions":[{"name":"x","type":"int64","domain":[0,1000],"tile":10}],
		"attributes":[{"name":"v","type":"int64"}],"enumerations":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArray(ctx, mem, "a", s); err != nil {
		t.Fatal(err)
	}
	if s, err = writer.LoadSchema(ctx, mem, "a"); err != nil {
		t.Fatal(err)
	}
	writeSparse(t, mem, s, 10, 1, 2, 3)
	writeSparse(t, mem, s, 20, 4, 5)

	// After a first Open, listing or reading anything under __fragments
	// or __commits fails, and so does reading a schema file.
	sw := &errorfs.Switch{Inj: errorfs.FailMatching(errorfs.Reads, func(k string) bool {
		return strings.Contains(k, "__fragments") || strings.Contains(k, "__commits") || strings.Contains(k, "/__schema/")
	})}
	st := errorfs.Wrap(mem, sw)
	cache := NewCache(0)
	if _, err := Open(ctx, st, "a", Options{Cache: cache, SchemaOnly: true}); err != nil {
		t.Fatal(err)
	}
	sw.Set(true)
	a, err := Open(ctx, st, "a", Options{Cache: cache, SchemaOnly: true})
	if err != nil {
		t.Fatalf("schema-only open read more than the listings of the array and its schemas: %v", err)
	}
	if a.Schema == nil || a.Schema.Name != s.Name || len(a.Fragments) != 0 {
		t.Fatalf("schema-only open: schema %v, %d fragments; want %s and none", a.Schema, len(a.Fragments), s.Name)
	}
	if _, err := Open(ctx, st, "a", Options{Cache: cache}); err == nil {
		t.Fatal("a full open read no fragment: the injected failure did not bite")
	}
	sw.Set(false)

	// An evolution adds a schema file: the next SchemaOnly Open has it.
	evolved, err := writer.EvolveSchema(ctx, mem, "a", []json.RawMessage{json.RawMessage(`{"name": "w", "type": "int32"}`)}, nil, 30, writer.ArrayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(ctx, st, "a", Options{Cache: cache, SchemaOnly: true, End: 40, EndSet: true})
	if err != nil {
		t.Fatal(err)
	}
	if b.Schema.Name != evolved.Name || b.Schema.AttributeIndex("w") < 0 {
		t.Fatalf("after the evolution: schema %s, want %s with attribute w", b.Schema.Name, evolved.Name)
	}
}
