// Package tdbarray opens a TileDB array stored in a storage.Store the way
// TileDB does at a timestamp range: it loads the array schemas (every
// schema file, for schema evolution, plus the enumerations of the newest),
// resolves which fragments and delete commits are visible (package
// commits), and opens each fragment's metadata lazily (footer now, sections
// on demand; consolidated fragment metadata files when present). It also
// finds arrays under a directory. It is policy on top of the pure format
// packages, and holds no query logic.
package tdbarray

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tileflight/tileflight/b2nd"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/filters"
	"github.com/tileflight/tileflight/format/arraymeta"
	"github.com/tileflight/tileflight/format/commits"
	"github.com/tileflight/tileflight/format/fragmeta"
	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/format/wire"
	"github.com/tileflight/tileflight/storage"
)

// Options select what Open sees.
type Options struct {
	// Start and End bound the timestamp range (ms since the epoch,
	// inclusive). End 0 means now, unless EndSet says that 0 was asked.
	Start, End uint64
	// EndSet makes End 0 mean the timestamp 0 (TileDB then sees no
	// fragment written after it), not now.
	EndSet bool
	// FullOverlapOnly keeps only fragments whose range lies inside
	// [Start, End] (TileDB does so for dense reads).
	FullOverlapOnly bool
	// EncryptionKey opens AES-256-GCM encrypted arrays.
	EncryptionKey []byte
	// Cache, when set, keeps decoded schemas and fragment metadata across
	// Opens (directory listings are always read anew).
	Cache *Cache
	// SchemaOnly opens the schemas and nothing else: Fragments and View
	// stay empty. A write needs no more, and its cost then does not grow
	// with the fragments the array holds (the commits and fragments are
	// neither listed nor resolved). The schema directory is still listed,
	// so a schema evolved since the last Open is seen.
	SchemaOnly bool
}

// Array is an opened array.
type Array struct {
	Store storage.Store
	// Dir is the array's key prefix in Store.
	Dir string
	// Schema is the schema in force at End: the newest schema file whose
	// timestamp is not after End.
	Schema *schema.ArraySchema
	// Schemas holds every schema file by name (for fragments written under
	// an older schema).
	Schemas map[string]*schema.ArraySchema
	// Fragments are the visible fragments, oldest first, in TileDB's order.
	Fragments []*Fragment
	// View is the full commit resolution (deletes, consolidation state).
	View *commits.View
	// Start and End are the resolved timestamp range.
	Start, End uint64
	// Encrypted reports an AES-256-GCM encrypted array (its schema file's
	// generic tile says so). Only then do data tiles carry the encryption
	// filter, so a key must be applied to this array's tiles only.
	Encrypted bool
	// B2ND is set when the array is a Blosc2 NDArray (.b2nd) rather than a
	// TileDB array: Schema is then synthesized from it (dense, dimensions
	// dim0.. of int64 over [0, shape-1] with the chunk shape as tile
	// extents, one attribute per dtype field), it has no fragments, its
	// whole domain is non-empty and it has no time travel.
	B2ND *b2nd.Array

	codec filters.GenericTileCodec
	cache *Cache
}

// Fragment is one visible fragment.
type Fragment struct {
	commits.Fragment
	// Schema is the schema the fragment was written with.
	Schema *schema.ArraySchema
	// Layout describes Schema to the fragment metadata decoder.
	Layout fragmeta.Layout
	// Meta is the fragment metadata: the footer is loaded, sections load
	// on demand.
	Meta *fragmeta.Fragment
}

// Key returns the store key of a file of the fragment.
func (f *Fragment) Key(a *Array, file string) string { return join(a.Dir, f.Path, file) }

func join(parts ...string) string {
	var nonEmpty []string
	for _, p := range parts {
		if p != "" {
			nonEmpty = append(nonEmpty, p)
		}
	}
	return path.Join(nonEmpty...)
}

// IsArray reports whether dir holds a TileDB array.
func IsArray(ctx context.Context, st storage.Store, dir string) (bool, error) {
	entries, err := st.List(ctx, dir)
	if err != nil {
		return false, err
	}
	return isArrayListing(entries), nil
}

func isArrayListing(entries []storage.Entry) bool {
	for _, e := range entries {
		if (e.IsDir && e.Name == names.SchemaDir) || (!e.IsDir && e.Name == names.LegacySchemaFile) {
			return true
		}
	}
	return false
}

// openAttempts bounds Open's tries when files it listed vanish before it
// reads them.
const openAttempts = 64

// Open opens the array at dir. A vacuum running at the same moment may
// remove a file between the listing and its read (a commit, a .vac file,
// a superseded fragment's metadata): the array is then listed again, so
// that an open racing a vacuum sees the state after it instead of
// failing. A vacuum removes its files one by one (its .vac files last,
// one after another), so each new listing can meet the next removal: the
// open is tried again as long as a different file went missing each time
// (up to openAttempts). The same file missing twice is not a vacuum's
// doing: a listed file that cannot be read is the array's damage, and is
// reported at once.
func Open(ctx context.Context, st storage.Store, dir string, opt Options) (*Array, error) {
	var missing string
	for attempt := 1; ; attempt++ {
		a, err := open(ctx, st, dir, opt)
		if err == nil || attempt == openAttempts || !errors.Is(err, storage.ErrNotFound) || ctx.Err() != nil ||
			err.Error() == missing {
			return a, err
		}
		missing = err.Error()
	}
}

func open(ctx context.Context, st storage.Store, dir string, opt Options) (*Array, error) {
	a := &Array{Store: st, Dir: dir, Start: opt.Start, End: opt.End,
		codec: filters.GenericTileCodec{EncryptionKey: opt.EncryptionKey}, cache: opt.Cache}
	if a.End == 0 && !opt.EndSet {
		a.End = uint64(time.Now().UnixMilli())
	}
	if a.Start > a.End {
		return nil, errkind.Errorf(errkind.InvalidArgument, "array %s: timestamp start %d is after end %d", dir, a.Start, a.End)
	}
	root, err := st.List(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("array %s: %w", dir, err)
	}
	if !isArrayListing(root) {
		return nil, errkind.Errorf(errkind.NotFound, "array %s: no such array", dir)
	}
	if err := a.loadSchemas(ctx, root); err != nil {
		return nil, fmt.Errorf("array %s: %w", dir, err)
	}
	if opt.SchemaOnly {
		return a, nil
	}
	if err := a.resolve(ctx, root, opt.FullOverlapOnly); err != nil {
		return nil, fmt.Errorf("array %s: %w", dir, err)
	}
	if err := a.openFragments(ctx); err != nil {
		return nil, fmt.Errorf("array %s: %w", dir, err)
	}
	return a, nil
}

// dataLoss marks format decoding failures as DataLoss for the outside.
func dataLoss(err error) error {
	if err == nil || errkind.Of(err) != nil {
		return err
	}
	if errors.Is(err, wire.ErrCorrupt) || errors.Is(err, wire.ErrTruncated) || errors.Is(err, storage.ErrNotFound) {
		return errkind.Wrap(errkind.DataLoss, err)
	}
	return err
}

func (a *Array) readFile(ctx context.Context, rel string) ([]byte, error) {
	return a.Store.Get(ctx, join(a.Dir, rel))
}

func (a *Array) loadSchemas(ctx context.Context, root []storage.Entry) error {
	var files []string
	for _, e := range root {
		if !e.IsDir && e.Name == names.LegacySchemaFile {
			files = append(files, names.LegacySchemaFile)
		}
	}
	entries, err := a.Store.List(ctx, join(a.Dir, names.SchemaDir))
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir || !names.IsTimestamped(e.Name) {
			continue
		}
		files = append(files, path.Join(names.SchemaDir, e.Name))
	}
	if len(files) == 0 {
		return errkind.Errorf(errkind.DataLoss, "no schema file")
	}
	sort.Slice(files, func(i, j int) bool {
		return names.CompareSchemaFiles(path.Base(files[i]), path.Base(files[j])) < 0
	})
	a.Schemas = make(map[string]*schema.ArraySchema, len(files))
	var current *schema.ArraySchema
	for _, f := range files {
		s, encrypted, err := a.loadSchema(ctx, f)
		if err != nil {
			return err
		}
		a.Encrypted = a.Encrypted || encrypted
		a.Schemas[s.Name] = s
		// The schema in force is the last one (in TileDB's order) whose
		// timestamp is not after the end of the open range; when every
		// schema is newer, TileDB falls back to the oldest one.
		if s.Name == names.LegacySchemaFile {
			if current == nil {
				current = s
			}
			continue
		}
		n, err := names.Parse(s.Name)
		if err != nil {
			continue
		}
		if _, t2 := n.Range(); t2 <= a.End || current == nil {
			current = s
		}
	}
	withEnums, err := a.loadEnumerations(ctx, current)
	if err != nil {
		return err
	}
	a.Schema = withEnums
	a.Schemas[withEnums.Name] = withEnums
	if withEnums != current && withEnums.Name != names.LegacySchemaFile {
		a.cache.put(a.schemaKey(path.Join(names.SchemaDir, withEnums.Name)), &cachedSchema{s: withEnums, encrypted: a.Encrypted})
	}
	return nil
}

func (a *Array) schemaKey(rel string) string {
	return cacheKey(a.Store, "schema", a.Dir, rel, 0, a.codec.EncryptionKey)
}

// loadSchema decodes one schema file (rel to the array), or takes it from
// the cache: schema files never change under their timestamped names.
func (a *Array) loadSchema(ctx context.Context, rel string) (*schema.ArraySchema, bool, error) {
	key := a.schemaKey(rel)
	if v, ok := a.cache.get(key); ok {
		cs := v.(*cachedSchema)
		return cs.s, cs.encrypted, nil
	}
	b, err := a.readFile(ctx, rel)
	if err != nil {
		return nil, false, dataLoss(fmt.Errorf("schema %s: %w", rel, err))
	}
	h, payload, _, err := gentile.Decode(b, a.codec)
	if err != nil {
		return nil, false, dataLoss(fmt.Errorf("schema %s: %w", rel, err))
	}
	s, err := schema.Decode(payload)
	if err != nil {
		return nil, false, dataLoss(fmt.Errorf("schema %s: %w", rel, err))
	}
	s.Name = path.Base(rel)
	encrypted := h.EncryptionType != 0
	// The legacy __array_schema.tdb can be rewritten in place by old
	// TileDB versions; only timestamped schema files are cached.
	if s.Name != names.LegacySchemaFile {
		a.cache.put(key, &cachedSchema{s: s, encrypted: encrypted})
	}
	return s, encrypted, nil
}

// loadEnumerations returns s with its enumerations loaded: s itself when
// they already are, else a copy (a cached schema is shared and never
// modified).
func (a *Array) loadEnumerations(ctx context.Context, s *schema.ArraySchema) (*schema.ArraySchema, error) {
	complete := true
	for _, ref := range s.Enumerations {
		complete = complete && ref.Enum != nil
	}
	if complete {
		return s, nil
	}
	cp := *s
	cp.Enumerations = append([]schema.EnumerationRef(nil), s.Enumerations...)
	s = &cp
	for i := range s.Enumerations {
		ref := &s.Enumerations[i]
		if ref.Enum != nil {
			continue
		}
		rel := path.Join(names.SchemaDir, names.EnumerationsDir, ref.PathName)
		b, err := a.readFile(ctx, rel)
		if err != nil {
			return nil, dataLoss(fmt.Errorf("enumeration %q (%s): %w", ref.Name, rel, err))
		}
		_, payload, _, err := gentile.Decode(b, a.codec)
		if err != nil {
			return nil, dataLoss(fmt.Errorf("enumeration %q: %w", ref.Name, err))
		}
		e, err := schema.DecodeEnumeration(payload)
		if err != nil {
			return nil, dataLoss(fmt.Errorf("enumeration %q: %w", ref.Name, err))
		}
		ref.Enum = e
	}
	return s, nil
}

func toEntries(es []storage.Entry) []commits.Entry {
	out := make([]commits.Entry, len(es))
	for i, e := range es {
		out[i] = commits.Entry{Name: e.Name, Dir: e.IsDir}
	}
	return out
}

func (a *Array) resolve(ctx context.Context, root []storage.Entry, fullOverlap bool) error {
	commitEntries, err := a.Store.List(ctx, join(a.Dir, names.CommitsDir))
	if err != nil {
		return err
	}
	metaEntries, err := a.Store.List(ctx, join(a.Dir, names.FragmentMetaDir))
	if err != nil {
		return err
	}
	l := commits.Listing{
		Root:         toEntries(root),
		Commits:      toEntries(commitEntries),
		FragmentMeta: toEntries(metaEntries),
		ReadFile:     func(rel string) ([]byte, error) { return a.readFile(ctx, rel) },
		HasFragmentMetadata: func(name string) bool {
			_, err := a.Store.Stat(ctx, join(a.Dir, name, names.FragmentMetadataFile))
			return err == nil
		},
	}
	v, err := commits.Resolve(l, commits.Options{Start: a.Start, End: a.End, FullOverlapOnly: fullOverlap})
	if err != nil {
		return dataLoss(err)
	}
	a.View = v
	return nil
}

// LayoutOf describes a schema to the fragment metadata decoder.
func LayoutOf(s *schema.ArraySchema) fragmeta.Layout {
	l := fragmeta.Layout{Dense: s.IsDense()}
	for _, d := range s.Dimensions {
		l.Dims = append(l.Dims, fragmeta.Field{Name: d.Name, Type: d.Type, CellValNum: d.CellValNum})
	}
	for _, at := range s.Attributes {
		l.Attrs = append(l.Attrs, fragmeta.Field{Name: at.Name, Type: at.Type, CellValNum: at.CellValNum, Nullable: at.Nullable})
	}
	if s.IsDense() {
		l.CellsPerTile = cellsPerTile(s)
	} else {
		l.CellsPerTile = s.Capacity
	}
	return l
}

// cellsPerTile is the number of cells of one dense space tile.
func cellsPerTile(s *schema.ArraySchema) uint64 {
	n := uint64(1)
	for _, d := range s.Dimensions {
		ext, ok := d.TileExtentUint64()
		if !ok || ext == 0 {
			return 0
		}
		n *= ext
	}
	return n
}

const openParallelism = 16

func (a *Array) openFragments(ctx context.Context) error {
	a.Fragments = make([]*Fragment, len(a.View.Fragments))
	missing := false
	for i, cf := range a.View.Fragments {
		a.Fragments[i] = a.cachedFragment(cf)
		missing = missing || a.Fragments[i] == nil
	}
	if !missing {
		return nil
	}
	footers, err := a.consolidatedFooters(ctx)
	if err != nil {
		return err
	}
	errs := make([]error, len(a.View.Fragments))
	sem := make(chan struct{}, openParallelism)
	var wg sync.WaitGroup
	for i, cf := range a.View.Fragments {
		if a.Fragments[i] != nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(i int, cf commits.Fragment) {
			defer wg.Done()
			defer func() { <-sem }()
			f, err := a.openFragment(ctx, cf, footers[cf.Name])
			if err != nil {
				errs[i] = dataLoss(fmt.Errorf("fragment %s: %w", cf.Name, err))
				return
			}
			a.Fragments[i] = f
			a.cache.put(a.fragmentKey(cf), &cachedFragment{schemaName: f.Schema.Name, layout: f.Layout, meta: f.Meta})
		}(i, cf)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// cachedFragment is what the cache keeps of an opened fragment: a
// committed fragment never changes, and its metadata object keeps the
// sections queries have loaded.
type cachedFragment struct {
	schemaName string
	layout     fragmeta.Layout
	meta       *fragmeta.Fragment
}

// memoryBytes is the fragment's decoded metadata: its footer and the
// sections loaded so far.
func (c *cachedFragment) memoryBytes() int64 { return c.meta.MemoryBytes() }

func (a *Array) fragmentKey(cf commits.Fragment) string {
	return cacheKey(a.Store, "fragment", a.Dir, cf.Path, 0, a.codec.EncryptionKey)
}

// cachedFragment returns the fragment from the cache, or nil.
func (a *Array) cachedFragment(cf commits.Fragment) *Fragment {
	v, ok := a.cache.get(a.fragmentKey(cf))
	if !ok {
		return nil
	}
	c := v.(*cachedFragment)
	s := a.Schemas[c.schemaName]
	if s == nil {
		return nil
	}
	return &Fragment{Fragment: cf, Schema: s, Layout: c.layout, Meta: c.meta}
}

// consolidatedFooter locates one fragment's footer in a consolidated
// fragment metadata file.
type consolidatedFooter struct {
	file  *fragmeta.Consolidated
	index int
}

// consolidatedFooters finds the footers that consolidated fragment metadata
// files hold, by fragment name (the first file naming a fragment wins, as
// TileDB orders them).
func (a *Array) consolidatedFooters(ctx context.Context) (map[string]*consolidatedFooter, error) {
	out := map[string]*consolidatedFooter{}
	for _, rel := range a.View.FragmentMeta {
		b, err := a.readFile(ctx, rel)
		if err != nil {
			return nil, dataLoss(fmt.Errorf("consolidated fragment metadata %s: %w", rel, err))
		}
		c, err := fragmeta.DecodeConsolidated(b, a.codec)
		if err != nil {
			return nil, dataLoss(fmt.Errorf("consolidated fragment metadata %s: %w", rel, err))
		}
		for i, e := range c.Entries {
			name := e.FragmentName()
			if _, ok := out[name]; !ok {
				out[name] = &consolidatedFooter{file: c, index: i}
			}
		}
	}
	return out, nil
}

func (a *Array) openFragment(ctx context.Context, cf commits.Fragment, cons *consolidatedFooter) (*Fragment, error) {
	key := join(a.Dir, cf.Path, names.FragmentMetadataFile)
	info, err := a.Store.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	size := uint64(info.Size)
	// Sections load lazily, possibly during a later query when the
	// fragment comes from the cache: the reads must not die with the
	// context of the Open that made them.
	rctx := context.WithoutCancel(ctx)
	read := func(off, n uint64) ([]byte, error) {
		return a.Store.GetRange(rctx, key, int64(off), int64(n))
	}
	f := &Fragment{Fragment: cf}
	version := cf.Version
	// The footer names the schema the fragment was written with (v10+);
	// its layout depends on that schema, so peek at the name first.
	schemaName := names.LegacySchemaFile
	if cons != nil {
		e := cons.file.Entries[cons.index]
		if e.Offset < uint64(len(cons.file.Payload)) {
			if v, n, ok := peekFooterSchema(cons.file.Payload[e.Offset:]); ok {
				version, schemaName = v, n
			}
		}
	} else if version >= 10 {
		if v, n, ok := peekSchemaName(read, size); ok {
			version, schemaName = v, n
		}
	}
	s := a.Schemas[schemaName]
	if s == nil {
		if schemaName != names.LegacySchemaFile || len(a.Schemas) != 1 {
			return nil, fmt.Errorf("%w: written with schema %q, which the array does not have", wire.ErrCorrupt, schemaName)
		}
		s = a.Schema
	}
	f.Schema = s
	f.Layout = LayoutOf(s)
	opt := &fragmeta.Options{Unfilterer: a.codec, Validate: true}
	if cons != nil {
		footer, err := cons.file.Footer(cons.index, f.Layout, version)
		if err != nil {
			return nil, fmt.Errorf("footer from consolidated metadata: %w", err)
		}
		f.Meta = fragmeta.OpenWithFooter(read, size, footer, opt)
	} else if f.Meta, err = fragmeta.Open(read, size, f.Layout, version, opt); err != nil {
		if !strings.Contains(err.Error(), names.FragmentMetadataFile) {
			// Name the file a damaged fragment's operator has to look at.
			err = fmt.Errorf("%s: %w", names.FragmentMetadataFile, err)
		}
		return nil, err
	}
	// Validated once here, before any read path prunes with it (and before
	// the cache keeps it): a damaged non-empty domain would make subarray
	// reads drop the fragment without a word.
	if err := f.Meta.Footer().Validate(domainOf(s)); err != nil {
		return nil, err
	}
	return f, nil
}

// domainOf is the array's domain as fragment metadata ranges (nil bounds
// for var-sized dimensions, which have none).
func domainOf(s *schema.ArraySchema) fragmeta.MBR {
	out := make(fragmeta.MBR, len(s.Dimensions))
	for i := range s.Dimensions {
		d := &s.Dimensions[i]
		if !d.IsVar() && d.Domain != nil {
			out[i] = fragmeta.Range{Start: d.Lo(), End: d.Hi()}
		}
	}
	return out
}

// peekSchemaName reads the version and schema name at the start of a v10+
// footer, whose length is the file's last 8 bytes.
func peekSchemaName(read fragmeta.ReadFunc, size uint64) (uint32, string, bool) {
	if size < 8 {
		return 0, "", false
	}
	tail, err := read(size-8, 8)
	if err != nil {
		return 0, "", false
	}
	flen := wire.NewReader(tail).Uint64("footer length")
	if flen > size-8 {
		return 0, "", false
	}
	head, err := read(size-8-flen, min(flen, 4+8+4096))
	if err != nil {
		return 0, "", false
	}
	return peekFooterSchema(head)
}

func peekFooterSchema(footer []byte) (uint32, string, bool) {
	r := wire.NewReader(footer)
	v := r.Uint32("footer version")
	if v < 10 {
		return v, names.LegacySchemaFile, r.Err() == nil
	}
	n := r.Uint64("schema name length")
	name := r.BytesU64(n, "schema name")
	if r.Err() != nil {
		return 0, "", false
	}
	return v, string(name), true
}

// Metadata returns the array metadata at the array's timestamp range.
func (a *Array) Metadata(ctx context.Context) (*arraymeta.Snapshot, error) {
	snap, err := LoadMetadata(ctx, a.Store, a.Dir, a.Start, a.End, a.codec)
	if err != nil {
		return nil, dataLoss(fmt.Errorf("array %s: metadata: %w", a.Dir, err))
	}
	return snap, nil
}
