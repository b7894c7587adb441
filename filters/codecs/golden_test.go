package codecs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"testing"

	"github.com/tileflight/tileflight/filters/stage"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/pipeline"
	"github.com/tileflight/tileflight/format/wire"
	"github.com/tileflight/tileflight/internal/golden"
)

// goldenCase is one entry of testdata/cases.json, written by
// python_tests/golden/filters_codecs_cases.py with TileDB 2.30.
type goldenCase struct {
	Name       string  `json:"name"`
	Dtype      string  `json:"dtype"`
	Version    uint32  `json:"version"`
	Lossy      bool    `json:"lossy"`
	Filter     string  `json:"filter"`
	Window     uint32  `json:"window"`
	Scale      float64 `json:"scale"`
	Offset     float64 `json:"offset"`
	ByteWidth  uint64  `json:"byte_width"`
	Key        string  `json:"key"`
	WebPFormat uint8   `json:"webp_format"`
	Lossless   bool    `json:"lossless"`
	Quality    float32 `json:"quality"`
	YExtent    uint16  `json:"y_extent"`
	XExtent    uint16  `json:"x_extent"`
}

func (c goldenCase) datatype(t testing.TB) datatype.Datatype {
	if c.Dtype == "datetime64[ns]" {
		return datatype.DatetimeNs
	}
	d, err := datatype.Parse(c.Dtype)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (c goldenCase) filters() []pipeline.Filter {
	switch c.Filter {
	case "aes_256_gcm":
		return []pipeline.Filter{{Type: pipeline.AES256GCM}}
	case "checksum_md5+aes_256_gcm":
		return []pipeline.Filter{{Type: pipeline.ChecksumMD5}, {Type: pipeline.AES256GCM}}
	}
	ft, err := pipeline.ParseFilterType(c.Filter)
	if err != nil {
		panic(err)
	}
	return []pipeline.Filter{{
		Type: ft, MaxWindow: c.Window, Scale: c.Scale, Offset: c.Offset, ByteWidth: c.ByteWidth,
		WebPFormat: pipeline.WebPFormat(c.WebPFormat), WebPLossless: c.Lossless,
		WebPQuality: c.Quality, WebPYExtent: c.YExtent, WebPXExtent: c.XExtent,
	}}
}

// chunk is one chunk of a filtered tile.
type chunk struct {
	origLen    int
	meta, data []byte
}

// parseTile reads TileDB's tile framing: u64 chunk count, then per chunk
// u32 original length, u32 filtered length, u32 metadata length, metadata,
// data. (The real runner lives in package filters; this is a test helper.)
func parseTile(b []byte) ([]chunk, error) {
	r := wire.NewReader(b)
	n := r.Count(8, 12, "chunk count")
	var out []chunk
	for range n {
		orig := r.Uint32("original length")
		flen := r.Uint32("filtered length")
		mlen := r.Uint32("metadata length")
		meta := r.BytesU64(uint64(mlen), "metadata")
		data := r.BytesU64(uint64(flen), "data")
		out = append(out, chunk{int(orig), meta, data})
	}
	if r.Err() == nil && r.Len() != 0 {
		return nil, fmt.Errorf("%d trailing bytes", r.Len())
	}
	return out, r.Err()
}

func readGz(t testing.TB, name string) []byte {
	t.Helper()
	return golden.ReadGz(t, filepath.Join("testdata", name))
}

func loadCases(t testing.TB) []goldenCase {
	t.Helper()
	var cases []goldenCase
	golden.ReadJSON(t, filepath.Join("testdata", "cases.json"), &cases)
	return cases
}

// aesIVs collects, in order, the IVs TileDB drew for the outermost AES
// filter of every chunk, so Forward can be made to draw the same.
func aesIVs(t testing.TB, chunks []chunk) []byte {
	var ivs []byte
	for _, c := range chunks {
		r := wire.NewReader(c.meta)
		n := int(r.Uint32("nm")) + int(r.Uint32("nd"))
		for range n {
			r.Skip(8, "sizes")
			ivs = append(ivs, r.Bytes(aesIVSize, "iv")...)
			r.Skip(aesTagSize, "tag")
		}
		if r.Err() != nil {
			t.Fatal(r.Err())
		}
	}
	return ivs
}

func buildStages(t testing.TB, c goldenCase, rand io.Reader) ([]stage.Stage, []*stage.Context) {
	typ := c.datatype(t)
	var stages []stage.Stage
	var ctxs []*stage.Context
	for _, f := range c.filters() {
		s, err := New(f, Options{EncryptionKey: []byte(c.Key), Rand: rand})
		if err != nil {
			t.Fatal(err)
		}
		stages = append(stages, s)
		ctxs = append(ctxs, &stage.Context{Type: typ, CellValNum: 1, Version: c.Version})
		typ = s.OutputType(typ)
	}
	return stages, ctxs
}

// TestGolden unfilters every tile TileDB wrote and requires exactly the
// values TileDB reads back, then filters the original values and requires
// TileDB's bytes (with TileDB's IVs replayed for AES; WebP: see checkWebPForward).
func TestGolden(t *testing.T) {
	cases := loadCases(t)
	if len(cases) < 100 {
		t.Fatalf("only %d golden cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			chunks, err := parseTile(readGz(t, c.Name+".tdb.gz"))
			if err != nil {
				t.Fatal(err)
			}
			want := readGz(t, c.Name+".out.gz")
			input := want
			if c.Lossy {
				input = readGz(t, c.Name+".in.gz")
			}
			stages, ctxs := buildStages(t, c, nil)
			off := 0
			for ci, ch := range chunks {
				buf := stage.Buffers{Meta: [][]byte{ch.meta}, Data: [][]byte{ch.data}}
				for i := len(stages) - 1; i >= 0; i-- {
					if buf, err = stages[i].Reverse(ctxs[i], buf); err != nil {
						t.Fatalf("chunk %d: reverse: %v", ci, err)
					}
				}
				if n := stage.Size(buf.Meta); n != 0 {
					t.Fatalf("chunk %d: %d metadata bytes left over", ci, n)
				}
				got := stage.Concat(buf.Data)
				if len(got) != ch.origLen || off+len(got) > len(want) || !bytes.Equal(got, want[off:off+len(got)]) {
					t.Fatalf("chunk %d: reverse gives %d bytes that differ from TileDB's read (%d bytes at %d)",
						ci, len(got), ch.origLen, off)
				}
				off += len(got)
			}
			if off != len(want) {
				t.Fatalf("tile unfilters to %d bytes, TileDB read %d", off, len(want))
			}

			if c.Filter == "webp" {
				// libwebp's output differs across its versions, so the
				// bytes are not TileDB's; what must hold is that the tile
				// decodes to the input (lossless) or close to it (lossy).
				checkWebPForward(t, stages[0], ctxs[0], c.Lossless, input, want)
				return
			}
			var rnd io.Reader
			if c.Key != "" {
				rnd = bytes.NewReader(aesIVs(t, chunks))
			}
			stages, ctxs = buildStages(t, c, rnd)
			off = 0
			for ci, ch := range chunks {
				buf := stage.Buffers{Data: [][]byte{input[off : off+ch.origLen]}}
				off += ch.origLen
				for i := range stages {
					if buf, err = stages[i].Forward(ctxs[i], buf); err != nil {
						t.Fatalf("chunk %d: forward: %v", ci, err)
					}
				}
				if m := stage.Concat(buf.Meta); !bytes.Equal(m, ch.meta) {
					t.Fatalf("chunk %d: forward metadata differs from TileDB's\n got %x\nwant %x", ci, m, ch.meta)
				}
				if d := stage.Concat(buf.Data); !bytes.Equal(d, ch.data) {
					t.Fatalf("chunk %d: forward data differs from TileDB's (%d vs %d bytes)", ci, len(d), len(ch.data))
				}
			}
		})
	}
}

// TestReverseIntoAliases checks that the ReverseInto stages write into the
// caller's buffer and agree with Reverse.
func TestReverseIntoAliases(t *testing.T) {
	for _, c := range loadCases(t) {
		stages, ctxs := buildStages(t, c, nil)
		ir, ok := stages[0].(IntoReverser)
		if !ok || len(stages) != 1 {
			continue
		}
		chunks, err := parseTile(readGz(t, c.Name+".tdb.gz"))
		if err != nil {
			t.Fatal(err)
		}
		ch := chunks[0]
		in := stage.Buffers{Meta: [][]byte{ch.meta}, Data: [][]byte{ch.data}}
		want, err := stages[0].Reverse(ctxs[0], in)
		if err != nil {
			t.Fatal(err)
		}
		dst := make([]byte, 0, ch.origLen)
		got, err := ir.ReverseInto(ctxs[0], in, dst)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		g := stage.Concat(got.Data)
		if !bytes.Equal(g, stage.Concat(want.Data)) {
			t.Fatalf("%s: ReverseInto differs from Reverse", c.Name)
		}
		if len(g) > 0 && &g[0] != &dst[:1][0] && &g[0] != &ch.data[0] {
			t.Fatalf("%s: ReverseInto did not write into the given buffer", c.Name)
		}
	}
}

func TestChecksumMismatchNamesPart(t *testing.T) {
	for _, ft := range []pipeline.FilterType{pipeline.ChecksumMD5, pipeline.ChecksumSHA256} {
		s, err := New(pipeline.Filter{Type: ft}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx := &stage.Context{Type: datatype.Int32}
		out, err := s.Forward(ctx, stage.Buffers{Meta: [][]byte{{1, 2, 3}}, Data: [][]byte{{4, 5, 6, 7}, {8, 9}}})
		if err != nil {
			t.Fatal(err)
		}
		meta := stage.Concat(out.Meta)
		for _, tc := range []struct {
			name    string
			meta    []byte
			data    []byte
			wantErr string
		}{
			{"data part 1", meta, []byte{4, 5, 6, 7, 8, 0}, "data part 1"},
			{"metadata part 0", append(append([]byte(nil), meta[:len(meta)-1]...), 0), []byte{4, 5, 6, 7, 8, 9}, "metadata part 0"},
		} {
			_, err := s.Reverse(ctx, stage.Buffers{Meta: [][]byte{tc.meta}, Data: [][]byte{tc.data}})
			if !errors.Is(err, ErrChecksum) || !errors.Is(err, wire.ErrCorrupt) || !bytes.Contains([]byte(err.Error()), []byte(tc.wantErr)) {
				t.Fatalf("%s %s: got %v", ft, tc.name, err)
			}
		}
		back, err := s.Reverse(ctx, stage.Buffers{Meta: [][]byte{meta}, Data: [][]byte{{4, 5, 6, 7, 8, 9}}})
		if err != nil || !bytes.Equal(stage.Concat(back.Meta), []byte{1, 2, 3}) {
			t.Fatalf("%s: clean reverse: %v %v", ft, back, err)
		}
	}
}

func TestAESWrongKey(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	s, err := New(pipeline.Filter{Type: pipeline.AES256GCM}, Options{EncryptionKey: key})
	if err != nil {
		t.Fatal(err)
	}
	ctx := &stage.Context{Type: datatype.Uint8}
	enc, err := s.Forward(ctx, stage.Buffers{Meta: [][]byte{{9, 9}}, Data: [][]byte{[]byte("hello tiles")}})
	if err != nil {
		t.Fatal(err)
	}
	back, err := s.Reverse(ctx, enc)
	if err != nil || string(stage.Concat(back.Data)) != "hello tiles" || !bytes.Equal(stage.Concat(back.Meta), []byte{9, 9}) {
		t.Fatalf("round trip: %v %v", back, err)
	}
	other, _ := New(pipeline.Filter{Type: pipeline.AES256GCM}, Options{EncryptionKey: bytes.Repeat([]byte{8}, 32)})
	if _, err := other.Reverse(ctx, enc); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("wrong key: %v", err)
	}
	if _, err := New(pipeline.Filter{Type: pipeline.AES256GCM}, Options{EncryptionKey: key[:16]}); err == nil {
		t.Fatal("16-byte key accepted")
	}
}

func TestNewRejects(t *testing.T) {
	for _, f := range []pipeline.Filter{
		{Type: pipeline.Zstd}, {Type: pipeline.Gzip}, {Type: pipeline.None},
		{Type: pipeline.ScaleFloat, ByteWidth: 3}, {Type: pipeline.WebP},
	} {
		if _, err := New(f, Options{}); err == nil {
			t.Errorf("New(%v) accepted", f.Type)
		}
	}
}

// TestPassThrough covers TileDB's "no effect" rules: bit width reduction
// and positive delta leave floats, strings and (before format 20)
// date/time types alone; bit width reduction also leaves 1-byte types.
func TestPassThrough(t *testing.T) {
	data := []byte{5, 4, 3, 2, 1, 0, 9, 8}
	for _, tc := range []struct {
		f       pipeline.FilterType
		typ     datatype.Datatype
		version uint32
		pass    bool
	}{
		{pipeline.BitWidthReduction, datatype.Float64, 22, true},
		{pipeline.BitWidthReduction, datatype.Int8, 22, true},
		{pipeline.BitWidthReduction, datatype.StringUTF8, 22, true},
		{pipeline.BitWidthReduction, datatype.DatetimeMs, 19, true},
		{pipeline.BitWidthReduction, datatype.DatetimeMs, 20, false},
		{pipeline.PositiveDelta, datatype.Float32, 22, true},
		{pipeline.PositiveDelta, datatype.TimeNs, 19, true},
		{pipeline.PositiveDelta, datatype.TimeNs, 20, false},
		{pipeline.PositiveDelta, datatype.Blob, 22, false},
	} {
		s, _ := New(pipeline.Filter{Type: tc.f, MaxWindow: 256}, Options{})
		ctx := &stage.Context{Type: tc.typ, Version: tc.version}
		in := stage.Buffers{Meta: [][]byte{{1}}, Data: [][]byte{data}}
		if tc.f == pipeline.PositiveDelta && !tc.pass {
			in.Data = [][]byte{{0, 1, 2, 3, 4, 5, 6, 7}}
		}
		out, err := s.Forward(ctx, in)
		if err != nil {
			t.Fatalf("%s %s v%d: %v", tc.f, tc.typ, tc.version, err)
		}
		passed := len(out.Meta) == 1 && bytes.Equal(stage.Concat(out.Data), stage.Concat(in.Data))
		if passed != tc.pass {
			t.Fatalf("%s %s v%d: pass-through %v, want %v", tc.f, tc.typ, tc.version, passed, tc.pass)
		}
		back, err := s.Reverse(ctx, out)
		if err != nil || !bytes.Equal(stage.Concat(back.Data), stage.Concat(in.Data)) || !bytes.Equal(stage.Concat(back.Meta), []byte{1}) {
			t.Fatalf("%s %s v%d: round trip failed: %v", tc.f, tc.typ, tc.version, err)
		}
	}
}

func TestPositiveDeltaRejectsDecrease(t *testing.T) {
	s, _ := New(pipeline.Filter{Type: pipeline.PositiveDelta, MaxWindow: 256}, Options{})
	d := make([]byte, 16)
	binary.LittleEndian.PutUint64(d, 5)
	binary.LittleEndian.PutUint64(d[8:], 4)
	if _, err := s.Forward(&stage.Context{Type: datatype.Int64}, stage.Buffers{Data: [][]byte{d}}); err == nil {
		t.Fatal("decreasing values accepted")
	}
}

// checkWebPForward encodes one tile and decodes it back: a lossless tile
// must come back byte for byte (alpha under transparent pixels too), a
// lossy one at least as close to the input (PSNR) as TileDB's own
// encoding at the same quality, less webpPSNRSlack.
func checkWebPForward(t *testing.T, s stage.Stage, ctx *stage.Context, lossless bool, input, tiledbRead []byte) {
	t.Helper()
	enc, err := s.Forward(ctx, stage.Buffers{Data: [][]byte{input}})
	if err != nil {
		t.Fatalf("webp forward: %v", err)
	}
	dec, err := s.Reverse(ctx, stage.Buffers{Meta: [][]byte{stage.Concat(enc.Meta)}, Data: [][]byte{stage.Concat(enc.Data)}})
	if err != nil {
		t.Fatalf("webp reverse of our encoding: %v", err)
	}
	got := stage.Concat(dec.Data)
	if lossless {
		if !bytes.Equal(got, input) {
			t.Fatalf("lossless webp: %d bytes decode differently from the %d-byte input", len(got), len(input))
		}
		return
	}
	ours, theirs := psnr(got, input), psnr(tiledbRead, input)
	if ours < theirs-webpPSNRSlack {
		t.Fatalf("lossy webp: PSNR %.2f dB, TileDB's encoding %.2f dB", ours, theirs)
	}
	t.Logf("lossy webp: PSNR %.2f dB (TileDB's encoding: %.2f dB), %d -> %d bytes", ours, theirs, len(input), stage.Size(enc.Data))
}

// webpPSNRSlack is how much worse than TileDB's libwebp our encoding may
// be (libwebp versions differ slightly in their rate-distortion choices).
const webpPSNRSlack = 0.5

// psnr is the peak signal-to-noise ratio of a against b, in dB (8-bit).
func psnr(a, b []byte) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	var se float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		se += d * d
	}
	if se == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(255*255/(se/float64(len(a))))
}
