// Package legacygen writes synthetic TileDB arrays whose schema and
// fragment are in format versions 1 to 4 (TileDB 1.x), built from the
// format specification: the schema file __array_schema.tdb, one fragment
// directory in the array root (named __<uuid>_<timestamp> in v1-2,
// __<t1>_<t2>_<uuid> in v3-4) holding the fragment metadata (v1-2: one
// generic tile; v3-4: generic-tile sections, the R-tree among them, behind
// a footer), the zipped coordinates __coords.tdb and one file per
// attribute named after it. TileDB 2.30 still reads such arrays;
// python_tests/test_legacy_synthetic.py compares its reads with ours.
//
//	go run ./cmd/legacygen OUTDIR
//
// Arrays: v2_sparse (two int64 dimensions, coordinates under zstd, an
// int32 attribute under zstd, a var-size string attribute under gzip,
// tiles of 3 cells), v1_sparse (the same in format v1, coordinates
// unfiltered and so stored cell by cell), v4_sparse and v3_sparse (the
// same in v4, and in v3 with gzip coordinates), and v2_dense and v4_dense
// (the same attributes over a 4 x 6 int64 domain in 2 x 3 space tiles,
// written whole). The values are fixed; OUTDIR/<array>.json lists the
// cells written.
package legacygen

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tileflight/tileflight/filters"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/fragmeta"
	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/format/pipeline"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/format/wire"
)

// Write writes every synthetic array into out, with out/<array>.json
// listing the cells written.
func Write(out string) error {
	if err := sparse(out, "v2_sparse", 2, false, pipe(zstd())); err != nil {
		return fmt.Errorf("v2_sparse: %w", err)
	}
	if err := sparse(out, "v1_sparse", 1, true, pipe()); err != nil {
		return fmt.Errorf("v1_sparse: %w", err)
	}
	if err := dense(out, "v2_dense", 2); err != nil {
		return fmt.Errorf("v2_dense: %w", err)
	}
	// Versions 3 and 4 keep the zipped coordinates but store the metadata
	// as generic-tile sections behind a footer, the R-tree included.
	if err := sparse(out, "v4_sparse", 4, false, pipe(zstd())); err != nil {
		return fmt.Errorf("v4_sparse: %w", err)
	}
	if err := sparse(out, "v3_sparse", 3, false, pipe(gzip())); err != nil {
		return fmt.Errorf("v3_sparse: %w", err)
	}
	if err := dense(out, "v4_dense", 4); err != nil {
		return fmt.Errorf("v4_dense: %w", err)
	}
	return nil
}

// fragmentName is the fragment directory's name as the TileDB of that
// format version wrote it: __uuid_t before v3, __t_t_uuid in v3 and v4.
func fragmentName(version uint32, uuid string) string {
	if version < 3 {
		return "__" + uuid + "_1000"
	}
	return "__1000_1000_" + uuid
}

// layout is the fragment metadata's view of s.
func layout(s *schema.ArraySchema) fragmeta.Layout {
	l := fragmeta.Layout{Dense: s.Type == schema.Dense, CellsPerTile: s.Capacity}
	for _, d := range s.Dimensions {
		l.Dims = append(l.Dims, fragmeta.Field{Name: d.Name, Type: d.Type, CellValNum: d.CellValNum})
	}
	for _, a := range s.Attributes {
		l.Attrs = append(l.Attrs, fragmeta.Field{Name: a.Name, Type: a.Type, CellValNum: a.CellValNum})
	}
	return l
}

// sections is what a fragment's metadata records of its files, per field
// in metadata order (the attributes, then the coordinates; var-size lists
// for the attributes only).
type sections struct {
	tileOffsets          [][]uint64
	varOffsets, varSizes [][]uint64
	fileSizes            []uint64
	fileVarSizes         []uint64
}

// footerMetadata encodes a version 3 or 4 __fragment_metadata.tdb: dom is
// the non-empty domain (lo, hi per dimension), mbrs one per sparse tile
// (none when dense), lastTileCells the cells of the last tile (of a space
// tile when dense).
func footerMetadata(s *schema.ArraySchema, dom []int64, mbrs [][]int64, sec sections, lastTileCells uint64) ([]byte, error) {
	l := layout(s)
	rng := func(lo, hi int64) fragmeta.Range { return fragmeta.Range{Start: i64(lo), End: i64(hi)} }
	box := func(b []int64) fragmeta.MBR {
		m := make(fragmeta.MBR, len(b)/2)
		for d := range m {
			m[d] = rng(b[2*d], b[2*d+1])
		}
		return m
	}
	ft := fragmeta.Footer{
		Version: s.Version, SchemaName: names.LegacySchemaFile, Dense: l.Dense,
		NonEmptyDomain: box(dom), LastTileCellNum: lastTileCells,
		FileSizes: sec.fileSizes, FileVarSizes: sec.fileVarSizes, Layout: l,
	}
	rt := &fragmeta.RTree{Fanout: fragmeta.DefaultFanout}
	if !l.Dense {
		ft.SparseTileNum = uint64(len(mbrs))
		leaves := make([]fragmeta.MBR, len(mbrs))
		for i, m := range mbrs {
			leaves[i] = box(m)
		}
		var err error
		if rt, err = fragmeta.BuildRTree(leaves, fragmeta.DefaultFanout, &l); err != nil {
			return nil, err
		}
	}
	b, _, err := fragmeta.Encode(&fragmeta.Metadata{
		Footer: ft, RTree: *rt, TileOffsets: sec.tileOffsets,
		TileVarOffsets: sec.varOffsets, TileVarSizes: sec.varSizes,
	}, nil)
	return b, err
}

func i64(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }

func pipe(fs ...pipeline.Filter) pipeline.Pipeline {
	return pipeline.Pipeline{MaxChunkSize: pipeline.DefaultMaxChunkSize, Filters: fs}
}

func zstd() pipeline.Filter {
	return pipeline.Filter{Type: pipeline.Zstd, Compressor: pipeline.CompZstd, Level: -1, Reinterpret: datatype.Any}
}

func gzip() pipeline.Filter {
	return pipeline.Filter{Type: pipeline.Gzip, Compressor: pipeline.CompGzip, Level: 6, Reinterpret: datatype.Any}
}

// Cell is one cell written: its coordinates (d1, d2 or r, c) and values.
type Cell struct {
	D1, D2 int64
	A      int32
	S      string
}

// sparse writes a sparse array: cells in row-major order of (d1, d2), the
// array's cell order, in tiles of three cells. zipped lays each tile's
// coordinates out cell by cell, as format v1 did without a compressor on
// them; otherwise they go dimension by dimension.
func sparse(out, name string, version uint32, zipped bool, coordsFilters pipeline.Pipeline) error {
	dir := filepath.Join(out, name)
	cells := []Cell{
		{1, 1, 10, "a"}, {1, 7, 11, ""}, {2, 3, 12, "tile"},
		{4, 4, -13, "flight"}, {4, 900, 14, "zz"}, {7, 2, 15, "legacy v2"},
		{999, 0, 2147483647, "x"},
	}
	const capacity = 3
	s := &schema.ArraySchema{
		Version: version, Type: schema.Sparse, TileOrder: schema.RowMajor, CellOrder: schema.RowMajor,
		Capacity: capacity, CoordsFilters: coordsFilters, OffsetsFilters: pipe(zstd()), ValidityFilters: pipe(),
		Dimensions: []schema.Dimension{
			{Name: "d1", Type: datatype.Int64, CellValNum: 1, Domain: append(i64(0), i64(999)...), TileExtent: i64(100)},
			{Name: "d2", Type: datatype.Int64, CellValNum: 1, Domain: append(i64(0), i64(999)...), TileExtent: i64(100)},
		},
		Attributes: []schema.Attribute{
			{Name: "a", Type: datatype.Int32, CellValNum: 1, Filters: pipe(zstd()), FillValue: schema.DefaultFill(datatype.Int32, 1)},
			{Name: "s", Type: datatype.StringASCII, CellValNum: schema.VarNum, Filters: pipe(gzip()), FillValue: schema.DefaultFill(datatype.StringASCII, schema.VarNum)},
		},
		Name: names.LegacySchemaFile,
	}
	frag, err := createArray(dir, fragmentName(version, "0123456789abcdef0123456789abcdef"), s)
	if err != nil {
		return err
	}
	opt := filters.Options{}
	coordsP, err := filters.New(s.CoordsFilters, datatype.Int64, 2, version, opt)
	if err != nil {
		return err
	}
	aP, err := filters.New(s.Attributes[0].Filters, datatype.Int32, 1, version, opt)
	if err != nil {
		return err
	}
	sP, err := filters.New(s.Attributes[1].Filters, datatype.StringASCII, schema.VarNum, version, opt)
	if err != nil {
		return err
	}
	offOpt := opt
	offOpt.IsOffsets = true
	offP, err := filters.New(s.OffsetsFilters, datatype.Uint64, 1, version, offOpt)
	if err != nil {
		return err
	}

	// Files, and per tile their offsets in them (a, s offsets, coords;
	// then s values) and the unfiltered var sizes.
	var aFile, sFile, sVarFile, cFile []byte
	var aOffs, sOffs, cOffs, sVarOffs, sVarSizes []uint64
	var mbrs, bounds [][]int64
	for lo := 0; lo < len(cells); lo += capacity {
		tile := cells[lo:min(lo+capacity, len(cells))]
		var coords, a, vals []byte
		var offs []uint64
		if zipped {
			for _, c := range tile {
				coords = binary.LittleEndian.AppendUint64(coords, uint64(c.D1))
				coords = binary.LittleEndian.AppendUint64(coords, uint64(c.D2))
			}
		} else {
			for _, c := range tile {
				coords = binary.LittleEndian.AppendUint64(coords, uint64(c.D1))
			}
			for _, c := range tile {
				coords = binary.LittleEndian.AppendUint64(coords, uint64(c.D2))
			}
		}
		mbr := []int64{tile[0].D1, tile[0].D1, tile[0].D2, tile[0].D2}
		for _, c := range tile {
			a = binary.LittleEndian.AppendUint32(a, uint32(c.A))
			offs = append(offs, uint64(len(vals)))
			vals = append(vals, c.S...)
			mbr[0], mbr[1] = min(mbr[0], c.D1), max(mbr[1], c.D1)
			mbr[2], mbr[3] = min(mbr[2], c.D2), max(mbr[3], c.D2)
		}
		mbrs = append(mbrs, mbr)
		first, last := tile[0], tile[len(tile)-1]
		bounds = append(bounds, []int64{first.D1, first.D2, last.D1, last.D2})
		fc, err := coordsP.FilterTile(coords)
		if err != nil {
			return fmt.Errorf("coordinates: %w", err)
		}
		cOffs, cFile = append(cOffs, uint64(len(cFile))), append(cFile, fc...)
		fa, err := aP.FilterTile(a)
		if err != nil {
			return fmt.Errorf("a: %w", err)
		}
		aOffs, aFile = append(aOffs, uint64(len(aFile))), append(aFile, fa...)
		fo, fv, err := sP.FilterVarTile(offP, offs, vals)
		if err != nil {
			return fmt.Errorf("s: %w", err)
		}
		sOffs, sFile = append(sOffs, uint64(len(sFile))), append(sFile, fo...)
		sVarOffs, sVarFile = append(sVarOffs, uint64(len(sVarFile))), append(sVarFile, fv...)
		sVarSizes = append(sVarSizes, uint64(len(vals)))
	}
	files := map[string][]byte{
		names.AttrFile(version, 0, "a", names.Fixed): aFile,
		names.AttrFile(version, 1, "s", names.Fixed): sFile,
		names.AttrFile(version, 1, "s", names.Var):   sVarFile,
		names.CoordsFile: cFile,
	}
	for f, b := range files {
		if err := os.WriteFile(filepath.Join(frag, f), b, 0o644); err != nil {
			return err
		}
	}

	dom := []int64{cells[0].D1, cells[0].D1, cells[0].D2, cells[0].D2}
	for _, m := range mbrs {
		dom[0], dom[1], dom[2], dom[3] = min(dom[0], m[0]), max(dom[1], m[1]), min(dom[2], m[2]), max(dom[3], m[3])
	}
	lastTile := uint64(len(cells) - (len(mbrs)-1)*capacity)
	var mb []byte
	if version >= 3 {
		mb, err = footerMetadata(s, dom, mbrs, sections{
			tileOffsets:  [][]uint64{aOffs, sOffs, cOffs},
			varOffsets:   [][]uint64{nil, sVarOffs},
			varSizes:     [][]uint64{nil, sVarSizes},
			fileSizes:    []uint64{uint64(len(aFile)), uint64(len(sFile)), uint64(len(cFile))},
			fileVarSizes: []uint64{0, uint64(len(sVarFile))},
		}, lastTile)
	} else {
		mb, err = legacySparseMetadata(version, dom, mbrs, bounds, aOffs, sOffs, cOffs, sVarOffs, sVarSizes, lastTile,
			[]int{len(aFile), len(sFile), len(cFile), 0, len(sVarFile)})
	}
	if err != nil {
		return err
	}
	return finish(out, name, frag, mb, cells)
}

// legacySparseMetadata encodes the one-tile metadata of versions 1 and 2
// (see fragmeta.DecodeLegacy for the layout).
func legacySparseMetadata(version uint32, dom []int64, mbrs, bounds [][]int64, aOffs, sOffs, cOffs, sVarOffs, sVarSizes []uint64, lastTile uint64, fileSizes []int) ([]byte, error) {
	w := wire.NewWriter(nil)
	w.Uint32(version)
	w.Uint64(32)
	for _, v := range dom {
		w.Int64(v)
	}
	w.Uint64(uint64(len(mbrs)))
	for _, m := range mbrs {
		for _, v := range m {
			w.Int64(v)
		}
	}
	w.Uint64(uint64(len(bounds)))
	for _, b := range bounds {
		for _, v := range b {
			w.Int64(v)
		}
	}
	list := func(l []uint64) {
		w.Uint64(uint64(len(l)))
		for _, x := range l {
			w.Uint64(x)
		}
	}
	list(aOffs)
	list(sOffs)
	list(cOffs)
	list(nil) // var offsets of a
	list(sVarOffs)
	list(nil) // var sizes of a
	list(sVarSizes)
	w.Uint64(lastTile)
	for _, n := range fileSizes {
		w.Uint64(uint64(n))
	}
	return gentile.Encode(w.Bytes(), version, nil)
}

// dense writes v2_dense (or v4_dense, in another version): a 4 x 6 domain ([1, 4] x [1, 6]) in space tiles of
// 2 x 3 cells, tile and cell order row-major, every cell written; cell
// (r, c) holds a = 10r + c and s = a string of r + c - 2 letters.
func dense(out, name string, version uint32) error {
	dir := filepath.Join(out, name)
	s := &schema.ArraySchema{
		Version: version, Type: schema.Dense, TileOrder: schema.RowMajor, CellOrder: schema.RowMajor,
		Capacity: 10000, CoordsFilters: pipe(zstd()), OffsetsFilters: pipe(zstd()), ValidityFilters: pipe(),
		Dimensions: []schema.Dimension{
			{Name: "r", Type: datatype.Int64, CellValNum: 1, Domain: append(i64(1), i64(4)...), TileExtent: i64(2)},
			{Name: "c", Type: datatype.Int64, CellValNum: 1, Domain: append(i64(1), i64(6)...), TileExtent: i64(3)},
		},
		Attributes: []schema.Attribute{
			{Name: "a", Type: datatype.Int32, CellValNum: 1, Filters: pipe(zstd()), FillValue: schema.DefaultFill(datatype.Int32, 1)},
			{Name: "s", Type: datatype.StringASCII, CellValNum: schema.VarNum, Filters: pipe(gzip()), FillValue: schema.DefaultFill(datatype.StringASCII, schema.VarNum)},
		},
		Name: names.LegacySchemaFile,
	}
	frag, err := createArray(dir, fragmentName(version, "fedcba9876543210fedcba9876543210"), s)
	if err != nil {
		return err
	}
	opt := filters.Options{}
	aP, err := filters.New(s.Attributes[0].Filters, datatype.Int32, 1, version, opt)
	if err != nil {
		return err
	}
	sP, err := filters.New(s.Attributes[1].Filters, datatype.StringASCII, schema.VarNum, version, opt)
	if err != nil {
		return err
	}
	offOpt := opt
	offOpt.IsOffsets = true
	offP, err := filters.New(s.OffsetsFilters, datatype.Uint64, 1, version, offOpt)
	if err != nil {
		return err
	}
	var aFile, sFile, sVarFile []byte
	var aOffs, sOffs, sVarOffs, sVarSizes []uint64
	var cells []Cell
	for tr := int64(0); tr < 2; tr++ {
		for tc := int64(0); tc < 2; tc++ {
			var a, vals []byte
			var offs []uint64
			for r := 1 + 2*tr; r <= 2+2*tr; r++ {
				for c := 1 + 3*tc; c <= 3+3*tc; c++ {
					v := Cell{D1: r, D2: c, A: int32(10*r + c), S: "abcdefghij"[:r+c-2]}
					cells = append(cells, v)
					a = binary.LittleEndian.AppendUint32(a, uint32(v.A))
					offs = append(offs, uint64(len(vals)))
					vals = append(vals, v.S...)
				}
			}
			fa, err := aP.FilterTile(a)
			if err != nil {
				return fmt.Errorf("a: %w", err)
			}
			aOffs, aFile = append(aOffs, uint64(len(aFile))), append(aFile, fa...)
			fo, fv, err := sP.FilterVarTile(offP, offs, vals)
			if err != nil {
				return fmt.Errorf("s: %w", err)
			}
			sOffs, sFile = append(sOffs, uint64(len(sFile))), append(sFile, fo...)
			sVarOffs, sVarFile = append(sVarOffs, uint64(len(sVarFile))), append(sVarFile, fv...)
			sVarSizes = append(sVarSizes, uint64(len(vals)))
		}
	}
	files := map[string][]byte{
		names.AttrFile(version, 0, "a", names.Fixed): aFile,
		names.AttrFile(version, 1, "s", names.Fixed): sFile,
		names.AttrFile(version, 1, "s", names.Var):   sVarFile,
	}
	for f, b := range files {
		if err := os.WriteFile(filepath.Join(frag, f), b, 0o644); err != nil {
			return err
		}
	}
	var mb []byte
	if version >= 3 {
		mb, err = footerMetadata(s, []int64{1, 4, 1, 6}, nil, sections{
			tileOffsets:  [][]uint64{aOffs, sOffs, nil},
			varOffsets:   [][]uint64{nil, sVarOffs},
			varSizes:     [][]uint64{nil, sVarSizes},
			fileSizes:    []uint64{uint64(len(aFile)), uint64(len(sFile)), 0},
			fileVarSizes: []uint64{0, uint64(len(sVarFile))},
		}, 6)
	} else {
		mb, err = legacyDenseMetadata(version, aOffs, sOffs, sVarOffs, sVarSizes, []int{len(aFile), len(sFile), 0, 0, len(sVarFile)})
	}
	if err != nil {
		return err
	}
	return finish(out, name, frag, mb, cells)
}

// legacyDenseMetadata encodes the one-tile metadata of a dense fragment of
// version 1 or 2.
func legacyDenseMetadata(version uint32, aOffs, sOffs, sVarOffs, sVarSizes []uint64, fileSizes []int) ([]byte, error) {
	w := wire.NewWriter(nil)
	w.Uint32(version)
	w.Uint64(32)
	for _, v := range []int64{1, 4, 1, 6} {
		w.Int64(v)
	}
	w.Uint64(0) // no MBRs: dense
	w.Uint64(0) // no bounding coordinates
	list := func(l []uint64) {
		w.Uint64(uint64(len(l)))
		for _, x := range l {
			w.Uint64(x)
		}
	}
	list(aOffs)
	list(sOffs)
	list(nil) // no coordinates
	list(nil)
	list(sVarOffs)
	list(nil)
	list(sVarSizes)
	w.Uint64(6) // last tile cell num: a full space tile
	for _, n := range fileSizes {
		w.Uint64(uint64(n))
	}
	return gentile.Encode(w.Bytes(), version, nil)
}

// finish stores a fragment's metadata file and OUT/<name>.json, the cells
// written.
func finish(out, name, frag string, metadata []byte, cells []Cell) error {
	if err := os.WriteFile(filepath.Join(frag, names.FragmentMetadataFile), metadata, 0o644); err != nil {
		return err
	}
	j, err := json.MarshalIndent(cells, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, name+".json"), j, 0o644)
}

// createArray writes the legacy schema file of an array at dir and makes
// the directory of its one fragment, which it returns.
func createArray(dir, fragment string, s *schema.ArraySchema) (string, error) {
	frag := filepath.Join(dir, fragment)
	if err := os.MkdirAll(frag, 0o755); err != nil {
		return "", err
	}
	sb, err := schema.EncodeFile(s)
	if err != nil {
		return "", fmt.Errorf("schema: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, names.LegacySchemaFile), sb, 0o644); err != nil {
		return "", err
	}
	return frag, nil
}
