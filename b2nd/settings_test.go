package b2nd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/b2nd/chunk"
)

func TestCodecAndFilterNames(t *testing.T) {
	for _, name := range []string{"blosclz", "lz4", "lz4hc", "zlib", "zstd"} {
		c, err := CodecByName(strings.ToUpper(name))
		if err != nil || CodecName(c) != name {
			t.Errorf("%s: %d %v -> %q", name, c, err, CodecName(c))
		}
	}
	if _, err := CodecByName("snappy"); err == nil || err.Error() != `codec "snappy" is not one of blosclz, lz4, lz4hc, zlib, zstd` {
		t.Errorf("snappy: %v", err)
	}
	if CodecName(77) != "codec_77" || FilterName(chunk.FilterBytedeltaBuggy) != "bytedelta_buggy" || FilterName(200) != "filter_200" {
		t.Error("names of unnamed codes")
	}
	f8, _ := ParseDtype("<f8")
	i4, _ := ParseDtype("<i4")
	cases := []struct {
		names []string
		meta  []int
		dt    *Dtype
		want  [6]uint8
		wmeta [6]uint8
		err   string
	}{
		{[]string{"shuffle"}, nil, f8, [6]uint8{5: chunk.FilterShuffle}, [6]uint8{}, ""},
		{[]string{"Delta", "trunc_prec"}, []int{0, -3}, f8, [6]uint8{4: chunk.FilterDelta, 5: chunk.FilterTruncPrec}, [6]uint8{5: 0xfd}, ""},
		{[]string{}, nil, f8, [6]uint8{}, [6]uint8{}, ""},
		{[]string{"trunc_prec"}, nil, i4, [6]uint8{}, [6]uint8{}, "trunc_prec needs a float32 or float64 dtype"},
		{[]string{"lzma"}, nil, f8, [6]uint8{}, [6]uint8{}, `filter "lzma" is not one of shuffle, bitshuffle, delta, trunc_prec, bytedelta`},
		{[]string{"shuffle"}, []int{1, 2}, f8, [6]uint8{}, [6]uint8{}, "at most 6 filters, and filters_meta as long as filters"},
	}
	for _, c := range cases {
		var o CreateOptions
		err := o.SetFilters(c.names, c.meta, c.dt)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%v: error %v, want %q", c.names, err, c.err)
			}
			continue
		}
		if err != nil || o.Filters != c.want || o.FiltersMeta != c.wmeta {
			t.Errorf("%v: %v %v %v", c.names, o.Filters, o.FiltersMeta, err)
		}
	}
}

func TestColToRowMajor(t *testing.T) {
	// A 2x3 box of 2-byte items; col-major input: (0,0) (1,0) (0,1) (1,1) (0,2) (1,2).
	in := []byte{0, 0, 1, 0, 0, 1, 1, 1, 0, 2, 1, 2}
	want := []byte{0, 0, 0, 1, 0, 2, 1, 0, 1, 1, 1, 2}
	if got := ColToRowMajor(in, []int64{5, 7}, []int64{6, 9}, 2); !bytes.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
