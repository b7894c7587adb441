package codecs

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/tileflight/tileflight/filters/stage"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/pipeline"
)

const benchBytes = 1 << 20

func benchData(typ datatype.Datatype) []byte {
	b := make([]byte, benchBytes)
	for i := 0; i < benchBytes/8; i++ {
		var v uint64
		if typ == datatype.Float64 {
			v = math.Float64bits(math.Sin(float64(i)/100) * 1000)
		} else {
			v = uint64(1_700_000_000 + i*8 + i%7) // ascending, narrow windows
		}
		binary.LittleEndian.PutUint64(b[8*i:], v)
	}
	return b
}

// TestKernelsDoNotAllocate pins the read-path kernels to zero allocations.
func TestKernelsDoNotAllocate(t *testing.T) {
	src := benchData(datatype.Int64)[:40000]
	dst := make([]byte, len(src))
	for name, f := range map[string]func(){
		"ByteUnshuffle": func() { ByteUnshuffle(dst, src, 8) },
		"BitUnshuffle":  func() { BitUnshuffle(dst, src, 8) },
		"PrefixSum":     func() { PrefixSum(dst, src, 8, 1) },
		"XorUndelta":    func() { XorUndelta(dst, src, 8) },
	} {
		if n := testing.AllocsPerRun(5, f); n != 0 {
			t.Errorf("%s allocates %.0f times", name, n)
		}
	}
}

// TestKernelsRoundTrip checks every element size, including sizes whose
// byte counts leave partial elements and partial 8-element groups.
func TestKernelsRoundTrip(t *testing.T) {
	src := benchData(datatype.Float64)
	for _, es := range []int{1, 2, 4, 8} {
		for _, n := range []int{0, 1, 7, 8, 9, 63, 64, 65, 1000, 8192, 8200, 20000, 20003} {
			s := src[:n]
			a, b := make([]byte, n), make([]byte, n)
			ByteShuffle(a, s, es)
			ByteUnshuffle(b, a, es)
			if !bytes.Equal(b, s) {
				t.Fatalf("byte shuffle es=%d n=%d", es, n)
			}
			// against the definition
			m := n / es
			for i := 0; i < m; i++ {
				for j := 0; j < es; j++ {
					if a[j*m+i] != s[i*es+j] {
						t.Fatalf("byte shuffle es=%d n=%d: wrong layout", es, n)
					}
				}
			}
			BitShuffle(a, s, es)
			BitUnshuffle(b, a, es)
			if !bytes.Equal(b, s) {
				t.Fatalf("bit shuffle es=%d n=%d", es, n)
			}
			XorDelta(a, s, es)
			XorUndelta(b, a, es)
			if !bytes.Equal(b[:m*es], s[:m*es]) {
				t.Fatalf("xor es=%d n=%d", es, n)
			}
		}
	}
}

func benchKernel(b *testing.B, typ datatype.Datatype, f func(dst, src []byte)) {
	src := benchData(typ)
	dst := make([]byte, len(src))
	b.SetBytes(int64(len(src)))
	b.ResetTimer()
	for range b.N {
		f(dst, src)
	}
}

var benchTypes = []struct {
	name string
	typ  datatype.Datatype
}{{"int64", datatype.Int64}, {"float64", datatype.Float64}}

func BenchmarkKernels(b *testing.B) {
	for _, bt := range benchTypes {
		b.Run("ByteUnshuffle/"+bt.name, func(b *testing.B) {
			benchKernel(b, bt.typ, func(d, s []byte) { ByteUnshuffle(d, s, 8) })
		})
		b.Run("ByteShuffle/"+bt.name, func(b *testing.B) {
			benchKernel(b, bt.typ, func(d, s []byte) { ByteShuffle(d, s, 8) })
		})
		b.Run("BitUnshuffle/"+bt.name, func(b *testing.B) {
			benchKernel(b, bt.typ, func(d, s []byte) { BitUnshuffle(d, s, 8) })
		})
		b.Run("BitShuffle/"+bt.name, func(b *testing.B) {
			benchKernel(b, bt.typ, func(d, s []byte) { BitShuffle(d, s, 8) })
		})
		b.Run("XorUndelta/"+bt.name, func(b *testing.B) {
			benchKernel(b, bt.typ, func(d, s []byte) { XorUndelta(d, s, 8) })
		})
		b.Run("PrefixSum/"+bt.name, func(b *testing.B) {
			benchKernel(b, bt.typ, func(d, s []byte) { PrefixSum(d, s, 8, 0) })
		})
	}
	b.Run("ByteUnshuffle/int32", func(b *testing.B) {
		benchKernel(b, datatype.Int64, func(d, s []byte) { ByteUnshuffle(d, s, 4) })
	})
	b.Run("BitUnshuffle/int32", func(b *testing.B) {
		benchKernel(b, datatype.Int64, func(d, s []byte) { BitUnshuffle(d, s, 4) })
	})
}

// BenchmarkReverseInto measures whole stages (metadata parsing included)
// unfiltering 1 MiB into a reused buffer.
func BenchmarkReverseInto(b *testing.B) {
	for _, f := range []pipeline.Filter{
		{Type: pipeline.Byteshuffle}, {Type: pipeline.Bitshuffle}, {Type: pipeline.XOR},
		{Type: pipeline.PositiveDelta, MaxWindow: 1024}, {Type: pipeline.BitWidthReduction, MaxWindow: 256},
	} {
		for _, bt := range benchTypes {
			if (f.Type == pipeline.PositiveDelta || f.Type == pipeline.BitWidthReduction) && bt.typ.IsFloat() {
				continue
			}
			b.Run(f.Type.String()+"/"+bt.name, func(b *testing.B) {
				s, _ := New(f, Options{})
				ctx := &stage.Context{Type: bt.typ, Version: 22}
				enc, err := s.Forward(ctx, stage.Buffers{Data: [][]byte{benchData(bt.typ)}})
				if err != nil {
					b.Fatal(err)
				}
				in := stage.Buffers{Meta: [][]byte{stage.Concat(enc.Meta)}, Data: [][]byte{stage.Concat(enc.Data)}}
				dst := make([]byte, benchBytes)
				ir := s.(IntoReverser)
				b.SetBytes(benchBytes)
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, err := ir.ReverseInto(ctx, in, dst); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkReverse covers the unfilters that have no ReverseInto: the
// checksums (verification), scale float and AES-256-GCM, on the same 1 MiB
// tiles of int64 and float64 data.
func BenchmarkReverse(b *testing.B) {
	key := []byte("0123456789abcdef0123456789abcdef")
	for _, f := range []pipeline.Filter{
		{Type: pipeline.ChecksumMD5}, {Type: pipeline.ChecksumSHA256},
		{Type: pipeline.ScaleFloat, Scale: 0.001, Offset: 0, ByteWidth: 8},
		{Type: pipeline.AES256GCM},
	} {
		for _, bt := range benchTypes {
			if f.Type == pipeline.ScaleFloat && !bt.typ.IsFloat() {
				continue
			}
			b.Run(f.Type.String()+"/"+bt.name, func(b *testing.B) {
				s, err := New(f, Options{EncryptionKey: key})
				if err != nil {
					b.Fatal(err)
				}
				ctx := &stage.Context{Type: bt.typ, Version: 22}
				enc, err := s.Forward(ctx, stage.Buffers{Data: [][]byte{benchData(bt.typ)}})
				if err != nil {
					b.Fatal(err)
				}
				in := stage.Buffers{Meta: [][]byte{stage.Concat(enc.Meta)}, Data: [][]byte{stage.Concat(enc.Data)}}
				b.SetBytes(benchBytes)
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, err := s.Reverse(ctx, in); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkWebPForward encodes one 512 x 512 RGB tile (a smooth picture
// with noise), lossless and lossy at quality 80, and reports the PSNR of
// the lossy tile decoded back.
func BenchmarkWebPForward(b *testing.B) {
	const w, h = 512, 512
	px := make([]byte, w*h*3)
	for y := range h {
		for x := range w {
			for c := range 3 {
				v := 128 + 100*math.Sin(float64(x)/37+float64(c))*math.Cos(float64(y)/53-float64(c)) + float64((x*7+y*13+c*5)%11) - 5
				px[(y*w+x)*3+c] = byte(max(0, min(255, v)))
			}
		}
	}
	for _, lossless := range []bool{true, false} {
		name := "lossy_q80"
		if lossless {
			name = "lossless"
		}
		b.Run(name, func(b *testing.B) {
			s, err := New(pipeline.Filter{Type: pipeline.WebP, WebPFormat: pipeline.WebPRGB, WebPLossless: lossless,
				WebPQuality: 80, WebPYExtent: h, WebPXExtent: w * 3}, Options{})
			if err != nil {
				b.Fatal(err)
			}
			ctx := &stage.Context{Type: datatype.Uint8, Version: 22}
			var enc stage.Buffers
			b.SetBytes(int64(len(px)))
			for b.Loop() {
				if enc, err = s.Forward(ctx, stage.Buffers{Data: [][]byte{px}}); err != nil {
					b.Fatal(err)
				}
			}
			dec, err := s.Reverse(ctx, stage.Buffers{Meta: [][]byte{stage.Concat(enc.Meta)}, Data: [][]byte{stage.Concat(enc.Data)}})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(px))/float64(stage.Size(enc.Data)), "ratio")
			if !lossless {
				b.ReportMetric(psnr(stage.Concat(dec.Data), px), "PSNR_dB")
			}
		})
	}
}
