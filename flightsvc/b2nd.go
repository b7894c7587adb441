package flightsvc

// This file holds the Blosc2 NDArray (.b2nd) side of the service:
// create_array with "type": "b2nd", describe, vlmeta as the array's
// metadata, DoPut of a box of cells, drop. Reads go through the shared
// query path (ndarray.OpenB2ND synthesizes the schema package plan needs).

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/b2nd"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/tdbarray"
)

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
	// zstd at level 5 with shuffle unless the body says otherwise.
	o := b2nd.CreateOptions{Shape: c.Shape, Chunks: c.Chunks, Blocks: c.Blocks, Dtype: c.Dtype, CLevel: 5}
	if o.Codec, err = b2nd.CodecByName("zstd"); err != nil {
		return nil, err
	}
	if err := o.SetFilters([]string{"shuffle"}, nil, dt); err != nil {
		return nil, err
	}
	if o.Chunks == nil || o.Blocks == nil {
		// python-blosc2's choice on this machine (see b2nd.DefaultChunksBlocks).
		if o.Chunks, o.Blocks, err = b2nd.DefaultChunksBlocks(c.Shape, c.Chunks, c.Blocks, dt.ItemSize, b2nd.MachineCaches()); err != nil {
			return nil, fmt.Errorf("array %q: %w", name, err)
		}
	}
	if c.Codec != nil {
		if o.Codec, err = b2nd.CodecByName(*c.Codec); err != nil {
			return nil, errkind.Errorf(errkind.InvalidArgument, "array %q: %v", name, err)
		}
	}
	if c.CLevel != nil {
		if *c.CLevel < 0 || *c.CLevel > 9 {
			return nil, errkind.Errorf(errkind.InvalidArgument, "array %q: clevel %d is not 0..9", name, *c.CLevel)
		}
		o.CLevel = *c.CLevel
	}
	if c.Filters != nil {
		if err := o.SetFilters(c.Filters, c.FiltersMeta, dt); err != nil {
			return nil, errkind.Errorf(errkind.InvalidArgument, "array %q: %v", name, err)
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
	filters, meta := a.FilterNames()
	dims := []map[string]any{}
	for i, n := range a.Shape {
		dims = append(dims, map[string]any{"name": fmt.Sprintf("dim%d", i), "type": "int64", "domain": []int64{0, n - 1}, "tile": a.ChunkShape[i]})
	}
	attrs := []map[string]any{}
	for _, f := range a.Dtype.Fields {
		attrs = append(attrs, map[string]any{"name": f.Name, "dtype": f.Dtype})
	}
	return map[string]any{
		"array": a.Name, "type": "b2nd", "shape": a.Shape, "chunks": a.ChunkShape, "blocks": a.BlockShape,
		"dtype": a.Dtype.Str, "codec": b2nd.CodecName(a.Header.Codec), "clevel": a.Header.CLevel, "filters": filters,
		"filters_meta": meta, "use_dict": a.Header.UseDict, "contiguous": !a.Sparse, "nchunks": len(a.Offsets), "chunk_kinds": a.ChunkKinds(),
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

// B2NDMetadata is get_metadata's JSON for a .b2nd array: its vlmeta
// (b2nd.Array.VLMetaJSON); also flightd inspect's.
func B2NDMetadata(a *b2nd.Array) (map[string]any, error) {
	return a.VLMetaJSON()
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
		b, err := b2nd.VLMetaFromJSON(r)
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
	found, err := b2nd.Drop(ctx, s.cfg.Store, name)
	if err != nil {
		return storageErr(err)
	}
	if !found {
		return notFound(name)
	}
	return nil
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
			if err := arrowconv.B2NDFieldBytes(f, rec.Column(cols[i]), data[start:], ba.ItemSize); err != nil {
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
		data = b2nd.ColToRowMajor(data, target.Lo, target.Hi, ba.ItemSize)
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
