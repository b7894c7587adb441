package writer

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/tileflight/tileflight/filters"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/fragmeta"
	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/format/pipeline"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/storage"
)

// field is one dimension or attribute with everything a fragment needs to
// write its tiles.
type field struct {
	name      string
	dim       bool
	schemaIdx int
	metaIdx   int // index among the fragment metadata's fields
	typ       datatype.Datatype
	cvn       uint32
	isVar     bool
	nullable  bool
	cellSize  int // fixed cell size; 0 for var fields
	kind      statKind
	hasMinMax bool
	hasSum    bool

	pipe, offPipe, valPipe *filters.Pipeline
	fixedFile, varFile     string
	validFile              string
}

func newFields(s *schema.ArraySchema, withDims bool, key []byte) ([]*field, error) {
	var out []*field
	mk := func(name string, dim bool, si, mi int, t datatype.Datatype, cvn uint32, nullable bool, p pipeline.Pipeline) (*field, error) {
		f := &field{name: name, dim: dim, schemaIdx: si, metaIdx: mi, typ: t, cvn: cvn, isVar: cvn == schema.VarNum, nullable: nullable}
		if !f.isVar {
			f.cellSize = t.Size() * int(cvn)
		}
		f.kind = kindOf(t)
		f.hasMinMax = hasMinMax(t, dim, f.isVar, cvn)
		f.hasSum = hasSum(t, f.isVar, cvn)
		var err error
		if f.pipe, err = filters.New(p, t, cvn, FormatVersion, filters.Options{EncryptionKey: key, Concurrency: 1}); err != nil {
			return nil, fmt.Errorf("%s %q: %w", role(dim), name, err)
		}
		if f.isVar {
			if f.offPipe, err = filters.New(s.OffsetsFilters, datatype.Uint64, 1, FormatVersion, filters.Options{IsOffsets: true, EncryptionKey: key, Concurrency: 1}); err != nil {
				return nil, fmt.Errorf("%s %q offsets: %w", role(dim), name, err)
			}
		}
		if nullable {
			if f.valPipe, err = filters.New(s.ValidityFilters, datatype.Uint8, 1, FormatVersion, filters.Options{EncryptionKey: key, Concurrency: 1}); err != nil {
				return nil, fmt.Errorf("%s %q validity: %w", role(dim), name, err)
			}
		}
		fileOf := names.AttrFile
		if dim {
			fileOf = names.DimFile
		}
		f.fixedFile = fileOf(FormatVersion, si, name, names.Fixed)
		f.varFile = fileOf(FormatVersion, si, name, names.Var)
		f.validFile = fileOf(FormatVersion, si, name, names.Validity)
		return f, nil
	}
	// A schema given per-cell timestamps or delete metadata
	// (withSpecials) ends its attributes with those pseudo-attributes; the
	// fragment metadata lists them after the dimensions, in t.tdb, dt.tdb
	// and dci.tdb.
	nsp := specialCount(s)
	na := len(s.Attributes) - nsp
	for i, a := range s.Attributes {
		if i >= na {
			f, err := mk(a.Name, false, i, na+1+len(s.Dimensions)+(i-na), a.Type, a.CellValNum, false, a.Filters)
			if err != nil {
				return nil, err
			}
			f.fixedFile = specialFiles[a.Name]
			out = append(out, f)
			continue
		}
		f, err := mk(a.Name, false, i, i, a.Type, a.CellValNum, a.Nullable, a.Filters)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	if withDims {
		for i, d := range s.Dimensions {
			f, err := mk(d.Name, true, i, na+1+i, d.Type, d.CellValNum, false, s.DimensionFilters(i))
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		}
	}
	return out, nil
}

func role(dim bool) string {
	if dim {
		return "dimension"
	}
	return "attribute"
}

// tileOut is one field's tile after filtering.
type tileOut struct {
	fixed, varData, valid []byte
	varSize               uint64
	stats                 tileStats
}

// fragment collects the tiles of one fragment and writes it.
type fragment struct {
	s       *schema.ArraySchema
	layout  fragmeta.Layout
	fields  []*field
	dense   bool
	ned     fragmeta.MBR   // non-empty domain
	mbrs    []fragmeta.MBR // sparse: one per tile
	cellNum []uint64       // cells per tile
	ntiles  int
	hasTS   bool // per-cell timestamps (a consolidated fragment)
	hasDel  bool // per-cell delete metadata (a consolidation over deletes)
	// processed names the delete commits whose effect the delete
	// metadata already holds (TileDB's processed conditions).
	processed []string
	// tile builds tile t of fields[f] when a worker is ready for it, so
	// that only the tiles being filtered are held unfiltered.
	tile func(t, f int, sc *scratch) statTile
}

// scratch is one worker's reusable tile memory: a tile is dead once
// filtered (the pipeline's output never aliases its input), so the next
// tile the worker builds can take its buffers.
type scratch struct {
	data, valid []byte
	offs        []uint64
}

// grow returns n elements of scratch memory, zeroed only if zero is set.
func grow[T byte | uint64](b *[]T, n int, zero bool) []T {
	if cap(*b) < n {
		*b = make([]T, n)
		return *b
	}
	out := (*b)[:n]
	if zero {
		clear(out)
	}
	return out
}

// build makes, summarizes and filters every tile of every field on at
// most conc goroutines, in tile order, so the unfiltered data held at any
// moment is about conc tiles.
func (fr *fragment) build(ctx context.Context, conc int) ([][]tileOut, error) {
	if conc <= 0 {
		conc = runtime.GOMAXPROCS(0)
	}
	out := make([][]tileOut, fr.ntiles)
	for t := range out {
		out[t] = make([]tileOut, len(fr.fields))
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	nf := len(fr.fields)
	total := fr.ntiles * nf
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < min(conc, total); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sc scratch
			for ctx.Err() == nil {
				j := int(next.Add(1) - 1)
				if j >= total {
					return
				}
				t, fi := j/nf, j%nf
				tl := fr.tile(t, fi, &sc)
				res, err := fr.filterOne(fr.fields[fi], &tl)
				if err != nil {
					cancel(fmt.Errorf("%s %q: tile %d: %w", role(fr.fields[fi].dim), fr.fields[fi].name, t, err))
					return
				}
				out[t][fi] = res
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return out, nil
}

func (fr *fragment) filterOne(f *field, t *statTile) (tileOut, error) {
	var r tileOut
	var err error
	if f.isVar {
		if r.fixed, r.varData, err = f.pipe.FilterVarTile(f.offPipe, t.offs, t.data); err != nil {
			return r, err
		}
		r.varSize = uint64(len(t.data))
	} else if r.fixed, err = f.pipe.FilterTile(t.data); err != nil {
		return r, err
	}
	if f.nullable {
		if r.valid, err = f.valPipe.FilterTile(t.valid); err != nil {
			return r, fmt.Errorf("validity: %w", err)
		}
	}
	if !(fr.dense && f.dim) {
		r.stats = f.stats(t)
		// Bounds may point into the tile, whose memory is reused.
		r.stats.min, r.stats.max = clone(r.stats.min), clone(r.stats.max)
	}
	return r, nil
}

// write stores the fragment's data files and metadata under
// dir/__fragments/<name>; it does not commit.
func (fr *fragment) write(ctx context.Context, st storage.Store, dir string, n names.Name, conc int, gen gentile.Filterer) (*fragmeta.Metadata, error) {
	outs, err := fr.build(ctx, conc)
	if err != nil {
		return nil, err
	}
	return fr.writeOuts(ctx, st, dir, n, outs, gen)
}

// writeOuts stores the fragment whose filtered tiles are outs (outs[t][f]
// for tile t of fields[f]); it lets each filtered tile go once copied.
func (fr *fragment) writeOuts(ctx context.Context, st storage.Store, dir string, n names.Name, outs [][]tileOut, gen gentile.Filterer) (*fragmeta.Metadata, error) {
	num := fr.layout.FieldNum(FormatVersion, fr.hasTS, fr.hasDel)
	ntiles := fr.ntiles
	m := &fragmeta.Metadata{}
	m.TileOffsets = zeroLists(num, ntiles)
	m.TileVarOffsets = zeroLists(num, ntiles)
	m.TileVarSizes = zeroLists(num, ntiles)
	m.TileValidityOffsets = zeroLists(num, ntiles)
	m.TileMins = make([]fragmeta.MinMax, num)
	m.TileMaxes = make([]fragmeta.MinMax, num)
	m.TileSums = make([][]uint64, num)
	m.TileNullCounts = make([][]uint64, num)
	m.FragmentStats = make([]fragmeta.FieldStats, num)
	ft := &m.Footer
	ft.Version = FormatVersion
	ft.SchemaName = fr.s.Name
	ft.Dense = fr.dense
	ft.NonEmptyDomain = fr.ned
	ft.Layout = fr.layout
	ft.HasTimestamps = fr.hasTS
	ft.HasDeleteMeta = fr.hasDel
	m.ProcessedConditions = fr.processed
	ft.FileSizes = make([]uint64, num)
	ft.FileVarSizes = make([]uint64, num)
	ft.FileValiditySizes = make([]uint64, num)
	if fr.dense {
		ft.LastTileCellNum = fr.cellNum[0]
	} else {
		ft.SparseTileNum = uint64(ntiles)
		ft.LastTileCellNum = fr.cellNum[ntiles-1]
	}
	fragKey := storage.Join(dir, names.FragmentKey(n))
	var files []storage.File
	for fi, f := range fr.fields {
		mi := f.metaIdx
		var fixed, vdata, valid []byte
		sizeF, sizeV, sizeN := 0, 0, 0
		for t := range outs {
			o := &outs[t][fi]
			sizeF += len(o.fixed)
			sizeV += len(o.varData)
			sizeN += len(o.valid)
		}
		fixed = make([]byte, 0, sizeF)
		if f.isVar {
			vdata = make([]byte, 0, sizeV)
		}
		if f.nullable {
			valid = make([]byte, 0, sizeN)
		}
		stats := make([]tileStats, ntiles)
		for t := range outs {
			o := &outs[t][fi]
			m.TileOffsets[mi][t] = uint64(len(fixed))
			fixed = append(fixed, o.fixed...)
			if f.isVar {
				m.TileVarOffsets[mi][t] = uint64(len(vdata))
				m.TileVarSizes[mi][t] = o.varSize
				vdata = append(vdata, o.varData...)
			}
			if f.nullable {
				m.TileValidityOffsets[mi][t] = uint64(len(valid))
				valid = append(valid, o.valid...)
			}
			stats[t] = o.stats
			outs[t][fi] = tileOut{} // let the filtered tile go
		}
		ft.FileSizes[mi] = uint64(len(fixed))
		ft.FileVarSizes[mi] = uint64(len(vdata))
		ft.FileValiditySizes[mi] = uint64(len(valid))
		files = append(files, storage.File{Name: f.fixedFile, Data: fixed})
		if f.isVar {
			files = append(files, storage.File{Name: f.varFile, Data: vdata})
		}
		if f.nullable {
			files = append(files, storage.File{Name: f.validFile, Data: valid})
		}
		if fr.dense && f.dim {
			continue
		}
		fr.fieldMeta(m, f, stats)
	}
	fr.coordsMeta(m, ntiles)
	if !fr.dense {
		rt, err := fragmeta.BuildRTree(fr.mbrs, fragmeta.DefaultFanout, &fr.layout)
		if err != nil {
			return nil, fmt.Errorf("fragment %s: %w", n, err)
		}
		m.RTree = *rt
	} else {
		m.RTree = fragmeta.RTree{Fanout: fragmeta.DefaultFanout}
	}
	b, _, err := fragmeta.Encode(m, gen)
	if err != nil {
		return nil, fmt.Errorf("fragment %s: %w", n, err)
	}
	files = append(files, storage.File{Name: names.FragmentMetadataFile, Data: b})
	// The fragment's files appear together (on a local disk) or at
	// least concurrently; nothing names the fragment before its commit
	// object, written after this.
	if err := storage.PutDir(ctx, st, fragKey, files); err != nil {
		return nil, fmt.Errorf("fragment %s: %w", n, err)
	}
	return m, nil
}

func zeroLists(num, n int) [][]uint64 {
	out := make([][]uint64, num)
	for i := range out {
		out[i] = make([]uint64, n)
	}
	return out
}

// fieldMeta fills the tile statistics sections of field f and its
// fragment-level statistics, as TileDB derives them from the tiles.
func (fr *fragment) fieldMeta(m *fragmeta.Metadata, f *field, stats []tileStats) {
	mi := f.metaIdx
	n := len(stats)
	if f.nullable {
		nc := make([]uint64, n)
		var total uint64
		for t, s := range stats {
			nc[t] = s.nulls
			total += s.nulls
		}
		m.TileNullCounts[mi] = nc
		m.FragmentStats[mi].NullCount = total
	}
	allNull := func(t int) bool { return f.nullable && stats[t].nulls == fr.cellNum[t] }
	if f.hasMinMax {
		if f.isVar {
			var mins, maxs fragmeta.MinMax
			mins.Fixed = make([]byte, 0, 8*n)
			maxs.Fixed = make([]byte, 0, 8*n)
			mins.Var, maxs.Var = []byte{}, []byte{}
			for _, s := range stats {
				mins.Fixed = append(mins.Fixed, le64(uint64(len(mins.Var)))...)
				mins.Var = append(mins.Var, s.min...)
				maxs.Fixed = append(maxs.Fixed, le64(uint64(len(maxs.Var)))...)
				maxs.Var = append(maxs.Var, s.max...)
			}
			m.TileMins[mi], m.TileMaxes[mi] = mins, maxs
			var mn, mx []byte
			set := false
			for t, s := range stats {
				if allNull(t) {
					continue
				}
				if !set {
					mn, mx, set = s.min, s.max, true
					continue
				}
				if c := strncmp(mn, s.min, min(len(mn), len(s.min))); c > 0 || (c == 0 && len(s.min) < len(mn)) {
					mn = s.min
				}
				if c := strncmp(mx, s.max, min(len(mx), len(s.max))); c < 0 || (c == 0 && len(s.max) > len(mx)) {
					mx = s.max
				}
			}
			if set {
				m.FragmentStats[mi].Min = append([]byte{}, mn...)
				m.FragmentStats[mi].Max = append([]byte{}, mx...)
			}
		} else {
			cs := f.cellSize
			mins := make([]byte, n*cs)
			maxs := make([]byte, n*cs)
			for t, s := range stats {
				copy(mins[t*cs:], s.min)
				copy(maxs[t*cs:], s.max)
			}
			m.TileMins[mi] = fragmeta.MinMax{Fixed: mins, Var: []byte{}}
			m.TileMaxes[mi] = fragmeta.MinMax{Fixed: maxs, Var: []byte{}}
			m.FragmentStats[mi].Min, m.FragmentStats[mi].Max = foldMinMax(f, mins, maxs, n, allNull)
		}
	}
	if f.hasSum {
		sums := make([]uint64, n)
		for t, s := range stats {
			sums[t] = s.sum
		}
		m.TileSums[mi] = sums
		m.FragmentStats[mi].Sum = foldSums(f.kind, sums, allNull)
	}
}

// foldMinMax is TileDB's fragment-level min/max over the tile bounds.
func foldMinMax(f *field, mins, maxs []byte, n int, allNull func(int) bool) ([]byte, []byte) {
	if f.kind == statChar {
		// TileDB walks the bound buffers cell_val_num bytes per
		// non-null tile, whatever the tile index.
		w := int(f.cvn)
		var mn, mx []byte
		k := 0
		for t := 0; t < n; t++ {
			if allNull(t) {
				continue
			}
			cm := mins[k*w : (k+1)*w]
			cx := maxs[k*w : (k+1)*w]
			k++
			if mn == nil || strncmp(mn, cm, w) > 0 {
				mn = cm
			}
			if mx == nil || strncmp(mx, cx, w) < 0 {
				mx = cx
			}
		}
		return clone(mn), clone(mx)
	}
	switch f.typ.Size() {
	case 1:
		if f.kind == statInt {
			return foldT[int8](mins, maxs, n, allNull)
		}
		return foldT[uint8](mins, maxs, n, allNull)
	case 2:
		if f.kind == statInt {
			return foldT[int16](mins, maxs, n, allNull)
		}
		return foldT[uint16](mins, maxs, n, allNull)
	case 4:
		switch f.kind {
		case statInt:
			return foldT[int32](mins, maxs, n, allNull)
		case statFloat:
			return foldT[float32](mins, maxs, n, allNull)
		}
		return foldT[uint32](mins, maxs, n, allNull)
	case 8:
		switch f.kind {
		case statInt:
			return foldT[int64](mins, maxs, n, allNull)
		case statFloat:
			return foldT[float64](mins, maxs, n, allNull)
		}
		return foldT[uint64](mins, maxs, n, allNull)
	}
	return nil, nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func foldT[T number](mins, maxs []byte, n int, allNull func(int) bool) ([]byte, []byte) {
	mn, mx := limits[T]()
	a, b := asSlice[T](mins), asSlice[T](maxs)
	for t := 0; t < n; t++ {
		if allNull(t) {
			continue
		}
		if !(mn < a[t]) {
			mn = a[t]
		}
		if !(mx > b[t]) {
			mx = b[t]
		}
	}
	return toBytes(mn), toBytes(mx)
}

func foldSums(kind statKind, sums []uint64, allNull func(int) bool) uint64 {
	switch kind {
	case statFloat:
		var s float64
		for t, raw := range sums {
			if allNull(t) {
				continue
			}
			v := math.Float64frombits(raw)
			if (s < 0) == (v < 0) && math.Abs(s) > math.MaxFloat64-math.Abs(v) {
				if s < 0 {
					s = -math.MaxFloat64
				} else {
					s = math.MaxFloat64
				}
				break
			}
			s += v
		}
		return math.Float64bits(s)
	case statUint:
		var s uint64
		for t, v := range sums {
			if allNull(t) {
				continue
			}
			if s > ^uint64(0)-v {
				s = ^uint64(0)
				break
			}
			s += v
		}
		return s
	default:
		var s int64
		for t, raw := range sums {
			if allNull(t) {
				continue
			}
			v := int64(raw)
			if s > 0 && v > 0 && s > math.MaxInt64-v {
				s = math.MaxInt64
				break
			}
			if s < 0 && v < 0 && s < math.MinInt64-v {
				s = math.MinInt64
				break
			}
			s += v
		}
		return uint64(s)
	}
}

// coordsMeta fills the sections of the zipped-coordinates placeholder
// field, which TileDB sizes like a real field of the first dimension's
// type (all zeros) and summarizes accordingly.
func (fr *fragment) coordsMeta(m *fragmeta.Metadata, ntiles int) {
	ci := fr.layout.CoordsIndex()
	d0 := fr.s.Dimensions[0]
	t := d0.Type
	cs := len(fr.s.Dimensions) * t.Size()
	f := &field{typ: t, cvn: 1, kind: kindOf(t), cellSize: t.Size()}
	if hasMinMax(t, false, false, 1) {
		z := make([]byte, ntiles*cs)
		m.TileMins[ci] = fragmeta.MinMax{Fixed: z, Var: []byte{}}
		m.TileMaxes[ci] = fragmeta.MinMax{Fixed: z, Var: []byte{}}
		never := func(int) bool { return false }
		m.FragmentStats[ci].Min, m.FragmentStats[ci].Max = foldMinMax(f, z, z, ntiles, never)
	}
	if hasSum(t, false, 1) {
		m.TileSums[ci] = make([]uint64, ntiles)
	}
}

// specialFiles are the data files of the pseudo-attributes a
// consolidated sparse fragment carries after its dimensions.
var specialFiles = map[string]string{
	fragmeta.TimestampsName:         names.TimestampsFile,
	fragmeta.DeleteTimestampsName:   names.DeleteTimestampsFile,
	fragmeta.DeleteConditionIdxName: names.DeleteConditionIndexFile,
}

// withSpecials returns s with the per-cell timestamps pseudo-attribute
// (ts) and the delete metadata pair (del: __delete_timestamps,
// __delete_condition_index) appended, in TileDB's field order: uint64,
// the coordinates' filters, as TileDB stores them. A write then carries
// them as more columns.
func withSpecials(s *schema.ArraySchema, ts, del bool) *schema.ArraySchema {
	if specialCount(s) > 0 || !ts && !del {
		return s
	}
	c := *s
	c.Attributes = append([]schema.Attribute(nil), s.Attributes...)
	add := func(name string) {
		c.Attributes = append(c.Attributes, schema.Attribute{
			Name: name, Type: datatype.Uint64, CellValNum: 1, Filters: s.CoordsFilters,
			FillValue: make([]byte, 8),
		})
	}
	if ts {
		add(fragmeta.TimestampsName)
	}
	if del {
		add(fragmeta.DeleteTimestampsName)
		add(fragmeta.DeleteConditionIdxName)
	}
	return &c
}

// specialCount is how many pseudo-attributes end s's attributes.
func specialCount(s *schema.ArraySchema) int {
	n := 0
	for i := len(s.Attributes) - 1; i >= 0 && specialFiles[s.Attributes[i].Name] != ""; i-- {
		n++
	}
	return n
}

func hasTimestampsAttr(s *schema.ArraySchema) bool {
	for i := len(s.Attributes) - specialCount(s); i < len(s.Attributes); i++ {
		if s.Attributes[i].Name == fragmeta.TimestampsName {
			return true
		}
	}
	return false
}

func hasDeleteAttrs(s *schema.ArraySchema) bool {
	for i := len(s.Attributes) - specialCount(s); i < len(s.Attributes); i++ {
		if s.Attributes[i].Name == fragmeta.DeleteTimestampsName {
			return true
		}
	}
	return false
}
