package flightsvc

// This file holds the Blosc2 NDArray (.b2nd) side of the service:
// create_array with "type": "b2nd", describe, vlmeta as the array's
// metadata, DoPut of a box of cells, drop. Reads go through the shared
// query path (ndarray.OpenB2ND synthesizes the schema package plan needs).

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	arrowarray "github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/b2nd"
	"github.com/tileflight/tileflight/b2nd/chunk"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
)

var codecNames = map[string]int{"blosclz": chunk.CodecBloscLZ, "lz4": chunk.CodecLZ4, "lz4hc": chunk.CodecLZ4HC, "zlib": chunk.CodecZlib, "zstd": chunk.CodecZstd}

var filterNames = map[string]uint8{"shuffle": chunk.FilterShuffle, "bitshuffle": chunk.FilterBitshuffle, "delta": chunk.FilterDelta,
	"trunc_prec": chunk.FilterTruncPrec, "bytedelta": chunk.FilterBytedelta}

func codecName(c int) string {
	for k, v := range codecNames {
		if v == c {
			return k
		}
	}
	return fmt.Sprintf("codec_%d", c)
}

func filterName(f uint8) string {
	for k, v := range filterNames {
		if v == f {
			return k
		}
	}
	if f == chunk.FilterBytedeltaBuggy {
		return "bytedelta_buggy"
	}
	return fmt.Sprintf("filter_%d", f)
}

// b2ndCreate is create_array's body for "type": "b2nd".
type b2ndCreate struct {
	Array       string            `json:"array"`
	Type        string            `json:"type"`
	Shape       []int64           `json:"shape"`
	Chunks      []int64           `json:"chunks"`
	Blocks      []int64           `json:"blocks"`
	Dtype       string            `json:"dtype"`
	Codec       *string           `json:"codec"`
	CLevel      *int              `json:"clevel"`
	Filters     []string          `json:"filters"`
	FiltersMeta []int             `json:"filters_meta"`
	Contiguous  *bool             `json:"contiguous"`
	UseDict     bool              `json:"use_dict"`
	Meta        map[string]any    `json:"vlmeta"`
	Extra       map[string]string `json:"-"`
}

func (s *Service) createB2ND(ctx context.Context, name string, body []byte) (any, error) {
	var c b2ndCreate
	if err := parseBody(body, &c); err != nil {
		return nil, err
	}
	if c.Type != "b2nd" {
		return nil, errkind.Errorf(errkind.InvalidArgument, `array %q: a .b2nd array is created with "type": "b2nd"`, name)
	}
	if c.Meta != nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, `array %q: set vlmeta with put_metadata after create_array`, name)
	}
	if len(c.Shape) == 0 {
		return nil, errkind.Errorf(errkind.InvalidArgument, `array %q: "shape" is required (a list of 1 to %d sizes)`, name, b2nd.MaxDims)
	}
	if c.Dtype == "" {
		c.Dtype = "<f8"
	}
	dt, err := b2nd.ParseDtype(c.Dtype)
	if err != nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, "array %q: %v", name, err)
	}
	o := b2nd.CreateOptions{Shape: c.Shape, Chunks: c.Chunks, Blocks: c.Blocks, Dtype: c.Dtype, Codec: chunk.CodecZstd, CLevel: 5}
	o.Filters[5] = chunk.FilterShuffle
	if o.Chunks == nil || o.Blocks == nil {
		// python-blosc2's choice on this machine (see b2nd.DefaultChunksBlocks).
		if o.Chunks, o.Blocks, err = b2nd.DefaultChunksBlocks(c.Shape, c.Chunks, c.Blocks, dt.ItemSize, b2nd.MachineCaches()); err != nil {
			return nil, fmt.Errorf("array %q: %w", name, err)
		}
	}
	if c.Codec != nil {
		v, ok := codecNames[strings.ToLower(*c.Codec)]
		if !ok {
			return nil, errkind.Errorf(errkind.InvalidArgument, "array %q: codec %q is not one of blosclz, lz4, lz4hc, zlib, zstd", name, *c.Codec)
		}
		o.Codec = v
	}
	if c.CLevel != nil {
		if *c.CLevel < 0 || *c.CLevel > 9 {
			return nil, errkind.Errorf(errkind.InvalidArgument, "array %q: clevel %d is not 0..9", name, *c.CLevel)
		}
		o.CLevel = *c.CLevel
	}
	if c.Filters != nil {
		if len(c.Filters) > 6 || (c.FiltersMeta != nil && len(c.FiltersMeta) != len(c.Filters)) {
			return nil, errkind.Errorf(errkind.InvalidArgument, "array %q: at most 6 filters, and filters_meta as long as filters", name)
		}
		o.Filters = [6]uint8{}
		// python-blosc2 fills the pipeline from the end, so a single
		// filter sits in the last slot as its default shuffle does.
		off := 6 - len(c.Filters)
		for i, f := range c.Filters {
			v, ok := filterNames[strings.ToLower(f)]
			if !ok {
				return nil, errkind.Errorf(errkind.InvalidArgument, "array %q: filter %q is not one of shuffle, bitshuffle, delta, trunc_prec, bytedelta", name, f)
			}
			o.Filters[off+i] = v
			if c.FiltersMeta != nil {
				o.FiltersMeta[off+i] = uint8(int8(c.FiltersMeta[i]))
			}
			if v == chunk.FilterTruncPrec && (dt.ItemSize != 4 && dt.ItemSize != 8 || len(dt.Fields) != 1 || dt.Fields[0].Kind != 'f') {
				return nil, errkind.Errorf(errkind.InvalidArgument, "array %q: trunc_prec needs a float32 or float64 dtype", name)
			}
		}
	}
	o.Sparse = c.Contiguous != nil && !*c.Contiguous
	o.UseDict = c.UseDict
	if _, err := s.cfg.Store.Stat(ctx, name); err == nil {
		return nil, errkind.Errorf(errkind.AlreadyExists, "array %q already exists", name)
	}
	if err := s.checkParents(ctx, name); err != nil {
		return nil, err
	}
	a, err := b2nd.Create(ctx, s.cfg.Store, name, o)
	if err != nil {
		return nil, fmt.Errorf("array %q: %w", name, storageErr(err))
	}
	return DescribeB2ND(a), nil
}

// DescribeB2ND is describe's JSON for a .b2nd array (also flightd inspect's).
func DescribeB2ND(a *b2nd.Array) map[string]any {
	var filters []string
	var meta []int
	for i, f := range a.Header.Filters {
		if f != chunk.FilterNone {
			filters = append(filters, filterName(f))
			meta = append(meta, int(int8(a.Header.FiltersMeta[i])))
		}
	}
	dims := []map[string]any{}
	for i, n := range a.Shape {
		dims = append(dims, map[string]any{"name": fmt.Sprintf("dim%d", i), "type": "int64", "domain": []int64{0, n - 1}, "tile": a.ChunkShape[i]})
	}
	attrs := []map[string]any{}
	for _, f := range a.Dtype.Fields {
		attrs = append(attrs, map[string]any{"name": f.Name, "dtype": f.Dtype})
	}
	kinds := map[string]int{}
	for _, o := range a.Offsets {
		switch o.Special() {
		case 0:
			kinds["stored"]++
		case chunk.SpecialZero:
			kinds["zeros"]++
		case chunk.SpecialNaN:
			kinds["nan"]++
		case chunk.SpecialUninit:
			kinds["uninitialized"]++
		default:
			kinds["special"]++
		}
	}
	if filters == nil {
		filters = []string{}
		meta = []int{}
	}
	return map[string]any{
		"array": a.Name, "type": "b2nd", "shape": a.Shape, "chunks": a.ChunkShape, "blocks": a.BlockShape,
		"dtype": a.Dtype.Str, "codec": codecName(a.Header.Codec), "clevel": a.Header.CLevel, "filters": filters,
		"filters_meta": meta, "use_dict": a.Header.UseDict, "contiguous": !a.Sparse, "nchunks": len(a.Offsets), "chunk_kinds": kinds,
		"dimensions": dims, "attributes": attrs, "vlmeta": vlmetaKeys(a),
	}
}

func vlmetaKeys(a *b2nd.Array) []string {
	out := []string{}
	for _, m := range a.VLMeta {
		out = append(out, m.Name)
	}
	return out
}

// B2NDMetadata decodes vlmeta (msgpack, as python-blosc2 writes it) to
// JSON values; a value msgpack cannot decode is returned as
// {"msgpack_base64": ...}.
func B2NDMetadata(a *b2nd.Array) (map[string]any, error) {
	vals, err := a.VLMetaValues()
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for k, v := range vals {
		var x any
		dec := msgpack.NewDecoder(bytes.NewReader(v))
		dec.SetMapDecoder(func(d *msgpack.Decoder) (any, error) { return d.DecodeUntypedMap() })
		if err := dec.Decode(&x); err != nil {
			out[k] = map[string]string{"msgpack_base64": base64.StdEncoding.EncodeToString(v)}
			continue
		}
		out[k] = jsonable(x)
	}
	return out, nil
}

func jsonable(x any) any {
	switch v := x.(type) {
	case map[any]any:
		m := map[string]any{}
		for k, e := range v {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case map[string]any:
		for k, e := range v {
			v[k] = jsonable(e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = jsonable(e)
		}
		return v
	case []byte:
		return base64.StdEncoding.EncodeToString(v)
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Sprint(v)
		}
	}
	return x
}

func fromJSONNumbers(x any) any {
	switch v := x.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	case map[string]any:
		for k, e := range v {
			v[k] = fromJSONNumbers(e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = fromJSONNumbers(e)
		}
		return v
	}
	return x
}

func (s *Service) putB2NDMetadata(ctx context.Context, name string, raw map[string]json.RawMessage) (any, error) {
	a, err := b2nd.Open(ctx, s.cfg.Store, name)
	if err != nil {
		return nil, s.openErr(ctx, name, err)
	}
	vals := map[string][]byte{}
	for k, r := range raw {
		if k == "" || strings.ContainsRune(k, 0) {
			return nil, errkind.Errorf(errkind.InvalidArgument, "array %q: metadata key %q: empty or holds a NUL byte", name, k)
		}
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.UseNumber()
		var x any
		if err := dec.Decode(&x); err != nil {
			return nil, errkind.Errorf(errkind.InvalidArgument, "array %q: metadata key %q: %v", name, k, err)
		}
		b, err := msgpack.Marshal(fromJSONNumbers(x))
		if err != nil {
			return nil, errkind.Errorf(errkind.InvalidArgument, "array %q: metadata key %q: %v", name, k, err)
		}
		vals[k] = b
	}
	if len(vals) > 0 {
		if err := a.SetVLMeta(ctx, vals); err != nil {
			return nil, fmt.Errorf("array %q: %w", name, storageErr(err))
		}
	}
	return map[string]int{"keys": len(vals)}, nil
}

func (s *Service) dropB2ND(ctx context.Context, name string) error {
	e, err := s.cfg.Store.Stat(ctx, name)
	if err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return notFound(name)
		}
		return storageErr(err)
	}
	if e.IsDir {
		// The index first: a half-dropped sframe no longer opens.
		if err := s.cfg.Store.Delete(ctx, name+"/"+b2nd.IndexFile); err != nil {
			return storageErr(err)
		}
		return storageErr(s.cfg.Store.DeletePrefix(ctx, name))
	}
	return storageErr(s.cfg.Store.Delete(ctx, name))
}

// doPutB2ND writes the cells of a DoPut stream into a .b2nd array: the
// descriptor's subarray (one range per dimension, default the whole array)
// in row-major (or col-major) order, one column per dtype field.
func (s *Service) doPutB2ND(ctx context.Context, q *query.Query, a *tdbarray.Array, rdr RecordSource) (*putResult, error) {
	ba := a.B2ND
	if q.Timestamp != nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, "DoPut to %q: a .b2nd array has no timestamps", q.Array)
	}
	if q.Stage {
		return nil, errkind.Errorf(errkind.Unimplemented, "DoPut to %q: staged writes are for TileDB arrays; a .b2nd has no fragments to stage", q.Array)
	}
	in := rdr.Schema()
	cols := make([]int, len(ba.Dtype.Fields))
	for i, f := range ba.Dtype.Fields {
		idx := in.FieldIndices(f.Name)
		if len(idx) != 1 {
			return nil, errkind.Errorf(errkind.InvalidArgument, "DoPut to %q: the stream needs one column %q (fields: %s)", q.Array, f.Name, fieldList(ba))
		}
		cols[i] = idx[0]
	}
	if len(in.Fields()) != len(cols) {
		return nil, errkind.Errorf(errkind.InvalidArgument, "DoPut to %q: the stream has %d columns, the array has %d fields (%s); dimensions come from the subarray", q.Array, len(in.Fields()), len(cols), fieldList(ba))
	}
	target, err := denseSubarray(q, a.Schema)
	if err != nil {
		return nil, err
	}
	limit := s.cfg.MemoryBudget
	if limit <= 0 {
		limit = 512 << 20
	}
	if target.cells > limit/int64(ba.ItemSize) {
		return nil, errkind.Errorf(errkind.ResourceExhausted, "DoPut to %q: %d cells of %d bytes exceed the memory budget of %d bytes for one write; write smaller subarrays", q.Array, target.cells, ba.ItemSize, limit)
	}
	data := make([]byte, 0, target.cells*int64(ba.ItemSize))
	var rows int64
	for rdr.Next() {
		rec := rdr.RecordBatch()
		n := rec.NumRows()
		if rows+n > target.cells {
			return nil, errkind.Errorf(errkind.InvalidArgument, "DoPut to %q: more rows than the %d cells of the subarray", q.Array, target.cells)
		}
		start := len(data)
		data = data[:start+int(n)*ba.ItemSize]
		for i, f := range ba.Dtype.Fields {
			if err := fieldBytes(f, rec.Column(cols[i]), data[start:], ba.ItemSize); err != nil {
				return nil, errkind.Errorf(errkind.InvalidArgument, "DoPut to %q: column %q: %v", q.Array, f.Name, err)
			}
		}
		rows += n
	}
	if err := rdr.Err(); err != nil {
		return nil, fmt.Errorf("DoPut to %q: %w", q.Array, err)
	}
	if rows != target.cells {
		return nil, errkind.Errorf(errkind.InvalidArgument, "DoPut to %q: %d rows for the %d cells of the subarray", q.Array, rows, target.cells)
	}
	if target.ColMajor {
		data = colToRowMajor(data, target.Lo, target.Hi, ba.ItemSize)
	}
	if err := ba.Write(context.WithoutCancel(ctx), b2nd.Box{Lo: target.Lo, Hi: target.Hi}, data); err != nil {
		return nil, fmt.Errorf("DoPut to %q: %w", q.Array, storageErr(err))
	}
	return &putResult{Fragments: []string{}, Rows: rows}, nil
}

func fieldList(a *b2nd.Array) string {
	var n []string
	for _, f := range a.Dtype.Fields {
		n = append(n, f.Name)
	}
	return strings.Join(n, ", ")
}

// colToRowMajor reorders the items of box lo..hi from col-major to C order.
func colToRowMajor(data []byte, lo, hi []int64, is int) []byte {
	nd := len(lo)
	ext := make([]int64, nd)
	for d := range lo {
		ext[d] = hi[d] - lo[d] + 1
	}
	out := make([]byte, len(data))
	n := len(data) / is
	x := make([]int64, nd)
	for k := 0; k < n; k++ {
		// k is the col-major index: x[0] varies fastest.
		var r int64
		for d := 0; d < nd; d++ {
			r = r*ext[d] + x[d]
		}
		copy(out[int(r)*is:(int(r)+1)*is], data[k*is:(k+1)*is])
		for d := 0; d < nd; d++ {
			x[d]++
			if x[d] < ext[d] {
				break
			}
			x[d] = 0
		}
	}
	return out
}

// fieldBytes writes column c's values into the items of out (one item of
// size is per row, the field at its offset, in the dtype's byte order).
func fieldBytes(f b2nd.Field, c arrow.Array, out []byte, is int) error {
	n := c.Len()
	put := func(i int, b []byte) { copy(out[i*is+f.Offset:i*is+f.Offset+f.Size], b) }
	var tmp [16]byte
	if c.NullN() > 0 && f.Kind != 'M' && f.Kind != 'm' {
		return fmt.Errorf("%d nulls, but dtype %s has no null", c.NullN(), f.Dtype)
	}
	if f.Count > 0 {
		// A subarray field: a fixed_size_list column of Count elements,
		// each converted as a value of the element type.
		v, ok := c.(*arrowarray.FixedSizeList)
		if !ok || v.DataType().(*arrow.FixedSizeListType).Len() != int32(f.Count) {
			want, _, _ := arrowconv.B2NDType(f)
			return fmt.Errorf("want %s, got %s", want, c.DataType())
		}
		e := f
		e.Count, e.Shape, e.Size, e.Offset = 0, nil, f.ElemSize(), 0
		off := int64(v.Data().Offset()) * int64(f.Count)
		elems := arrowarray.NewSlice(v.ListValues(), off, off+int64(n*f.Count))
		defer elems.Release()
		raw := make([]byte, n*f.Size)
		if err := fieldBytes(e, elems, raw, e.Size); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			put(i, raw[i*f.Size:(i+1)*f.Size])
		}
		return nil
	}
	order := func(b []byte, w int) []byte {
		if f.Big {
			for i := 0; i+w <= len(b); i += w {
				for j := 0; j < w/2; j++ {
					b[i+j], b[i+w-1-j] = b[i+w-1-j], b[i+j]
				}
			}
		}
		return b
	}
	switch f.Kind {
	case 'b':
		v, ok := c.(*arrowarray.Boolean)
		if !ok {
			return fmt.Errorf("want bool, got %s", c.DataType())
		}
		for i := 0; i < n; i++ {
			b := byte(0)
			if v.Value(i) {
				b = 1
			}
			put(i, []byte{b})
		}
		return nil
	case 'i', 'u':
		for i := 0; i < n; i++ {
			var u uint64
			switch v := c.(type) {
			case *arrowarray.Int8:
				u = uint64(int64(v.Value(i)))
			case *arrowarray.Int16:
				u = uint64(int64(v.Value(i)))
			case *arrowarray.Int32:
				u = uint64(int64(v.Value(i)))
			case *arrowarray.Int64:
				u = uint64(v.Value(i))
			case *arrowarray.Uint8:
				u = uint64(v.Value(i))
			case *arrowarray.Uint16:
				u = uint64(v.Value(i))
			case *arrowarray.Uint32:
				u = uint64(v.Value(i))
			case *arrowarray.Uint64:
				u = v.Value(i)
			default:
				return fmt.Errorf("want an integer column, got %s", c.DataType())
			}
			signedIn := c.DataType().ID() == arrow.INT8 || c.DataType().ID() == arrow.INT16 || c.DataType().ID() == arrow.INT32 || c.DataType().ID() == arrow.INT64
			bits := 8 * f.Size
			if f.Kind == 'i' {
				x := int64(u)
				if !signedIn && u > math.MaxInt64 || bits < 64 && (x < -(1<<(bits-1)) || x >= 1<<(bits-1)) {
					return fmt.Errorf("row %d: %d does not fit %s", i, x, f.Dtype)
				}
			} else if signedIn && int64(u) < 0 || bits < 64 && u >= 1<<bits {
				return fmt.Errorf("row %d: value does not fit %s", i, f.Dtype)
			}
			binary.LittleEndian.PutUint64(tmp[:], u)
			put(i, order(tmp[:f.Size], f.Size))
		}
		return nil
	case 'f':
		for i := 0; i < n; i++ {
			var x float64
			switch v := c.(type) {
			case *arrowarray.Float16:
				x = float64(v.Value(i).Float32())
			case *arrowarray.Float32:
				x = float64(v.Value(i))
			case *arrowarray.Float64:
				x = v.Value(i)
			default:
				return fmt.Errorf("want a float column, got %s", c.DataType())
			}
			switch f.Size {
			case 2:
				h := float16.New(float32(x))
				if !math.IsNaN(x) && float64(h.Float32()) != x {
					return fmt.Errorf("row %d: %v does not fit float16 exactly", i, x)
				}
				binary.LittleEndian.PutUint16(tmp[:], h.Uint16())
			case 4:
				if !math.IsNaN(x) && float64(float32(x)) != x {
					return fmt.Errorf("row %d: %v does not fit float32 exactly", i, x)
				}
				binary.LittleEndian.PutUint32(tmp[:], math.Float32bits(float32(x)))
			default:
				binary.LittleEndian.PutUint64(tmp[:], math.Float64bits(x))
			}
			put(i, order(tmp[:f.Size], f.Size))
		}
		return nil
	case 'c':
		v, ok := c.(*arrowarray.FixedSizeList)
		want, _, _ := arrowconv.B2NDType(f)
		// The child's nullability does not matter (it may hold no nulls).
		wl := want.(*arrow.FixedSizeListType)
		if !ok || v.DataType().(*arrow.FixedSizeListType).Len() != 2 || !arrow.TypeEqual(v.DataType().(*arrow.FixedSizeListType).Elem(), wl.Elem()) || v.ListValues().NullN() > 0 {
			return fmt.Errorf("want %s, got %s", want, c.DataType())
		}
		vals := v.ListValues().Data().Buffers()[1].Bytes()[v.ListValues().Data().Offset()*f.Size/2:]
		for i := 0; i < n; i++ {
			k := (v.Data().Offset() + i) * f.Size
			copy(tmp[:f.Size], vals[k:k+f.Size])
			put(i, order(tmp[:f.Size], f.Size/2))
		}
		return nil
	case 'M', 'm':
		want, _, _ := arrowconv.B2NDType(f)
		if !arrow.TypeEqual(c.DataType(), want) {
			return fmt.Errorf("want %s, got %s", want, c.DataType())
		}
		for i := 0; i < n; i++ {
			x := int64(math.MinInt64)
			if c.IsValid(i) {
				switch v := c.(type) {
				case *arrowarray.Timestamp:
					x = int64(v.Value(i))
				case *arrowarray.Date32:
					x = int64(v.Value(i))
				case *arrowarray.Duration:
					x = int64(v.Value(i))
				case *arrowarray.Int64:
					x = v.Value(i)
				}
			}
			binary.LittleEndian.PutUint64(tmp[:], uint64(x))
			put(i, order(tmp[:8], 8))
		}
		return nil
	case 'S', 'V':
		for i := 0; i < n; i++ {
			var b []byte
			switch v := c.(type) {
			case *arrowarray.FixedSizeBinary:
				b = v.Value(i)
			case *arrowarray.Binary:
				b = v.Value(i)
			case *arrowarray.LargeBinary:
				b = v.Value(i)
			case *arrowarray.String:
				b = []byte(v.Value(i))
			case *arrowarray.LargeString:
				b = []byte(v.Value(i))
			default:
				return fmt.Errorf("want binary, got %s", c.DataType())
			}
			if len(b) > f.Size || f.Kind == 'V' && len(b) != f.Size {
				return fmt.Errorf("row %d: %d bytes for %s", i, len(b), f.Dtype)
			}
			item := make([]byte, f.Size)
			copy(item, b)
			put(i, item)
		}
		return nil
	case 'U':
		for i := 0; i < n; i++ {
			var str string
			switch v := c.(type) {
			case *arrowarray.String:
				str = v.Value(i)
			case *arrowarray.LargeString:
				str = v.Value(i)
			case *arrowarray.StringView:
				str = v.Value(i)
			default:
				return fmt.Errorf("want a string column, got %s", c.DataType())
			}
			if !utf8.ValidString(str) {
				return fmt.Errorf("row %d: invalid UTF-8", i)
			}
			item := make([]byte, f.Size)
			k := 0
			for _, r := range str {
				if 4*k >= f.Size {
					return fmt.Errorf("row %d: %q is longer than %s", i, str, f.Dtype)
				}
				if f.Big {
					binary.BigEndian.PutUint32(item[4*k:], uint32(r))
				} else {
					binary.LittleEndian.PutUint32(item[4*k:], uint32(r))
				}
				k++
			}
			put(i, item)
		}
		return nil
	}
	return fmt.Errorf("dtype %s cannot be written", f.Dtype)
}
