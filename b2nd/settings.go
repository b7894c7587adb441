package b2nd

// This file names the compression settings of a .b2nd array as
// python-blosc2 spells them (codecs, filters, chunk kinds), for the
// service's create_array and describe.

import (
	"fmt"
	"strings"

	"github.com/tileflight/tileflight/b2nd/chunk"
)

var codecNames = map[string]int{"blosclz": chunk.CodecBloscLZ, "lz4": chunk.CodecLZ4, "lz4hc": chunk.CodecLZ4HC, "zlib": chunk.CodecZlib, "zstd": chunk.CodecZstd}

var filterNames = map[string]uint8{"shuffle": chunk.FilterShuffle, "bitshuffle": chunk.FilterBitshuffle, "delta": chunk.FilterDelta,
	"trunc_prec": chunk.FilterTruncPrec, "bytedelta": chunk.FilterBytedelta}

// CodecByName returns the codec python-blosc2 names name (any case).
func CodecByName(name string) (int, error) {
	v, ok := codecNames[strings.ToLower(name)]
	if !ok {
		return 0, fmt.Errorf("codec %q is not one of blosclz, lz4, lz4hc, zlib, zstd", name)
	}
	return v, nil
}

// CodecName is the name of codec c ("codec_N" for one without a name).
func CodecName(c int) string {
	for k, v := range codecNames {
		if v == c {
			return k
		}
	}
	return fmt.Sprintf("codec_%d", c)
}

// FilterName is the name of filter f ("filter_N" for one without a name).
func FilterName(f uint8) string {
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

// SetFilters replaces o's filter pipeline with the named filters (any
// case) and their meta values (nil: all 0), checked against dtype dt.
// python-blosc2 fills the pipeline from the end, so a single filter sits
// in the last slot as its default shuffle does.
func (o *CreateOptions) SetFilters(names []string, meta []int, dt *Dtype) error {
	if len(names) > 6 || (meta != nil && len(meta) != len(names)) {
		return fmt.Errorf("at most 6 filters, and filters_meta as long as filters")
	}
	o.Filters, o.FiltersMeta = [6]uint8{}, [6]uint8{}
	off := 6 - len(names)
	for i, f := range names {
		v, ok := filterNames[strings.ToLower(f)]
		if !ok {
			return fmt.Errorf("filter %q is not one of shuffle, bitshuffle, delta, trunc_prec, bytedelta", f)
		}
		o.Filters[off+i] = v
		if meta != nil {
			o.FiltersMeta[off+i] = uint8(int8(meta[i]))
		}
		if v == chunk.FilterTruncPrec && (dt.ItemSize != 4 && dt.ItemSize != 8 || len(dt.Fields) != 1 || dt.Fields[0].Kind != 'f') {
			return fmt.Errorf("trunc_prec needs a float32 or float64 dtype")
		}
	}
	return nil
}

// FilterNames returns the names of a's filters in pipeline order, with
// their meta values (signed, as python-blosc2 shows them); empty slices
// for none.
func (a *Array) FilterNames() (names []string, meta []int) {
	names, meta = []string{}, []int{}
	for i, f := range a.Header.Filters {
		if f != chunk.FilterNone {
			names = append(names, FilterName(f))
			meta = append(meta, int(int8(a.Header.FiltersMeta[i])))
		}
	}
	return names, meta
}

// ChunkKinds counts a's chunks by kind: "stored" (compressed data),
// "zeros", "nan", "uninitialized" and "special" (any other special
// value).
func (a *Array) ChunkKinds() map[string]int {
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
	return kinds
}
