package chunk

import (
	"encoding/binary"
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// Split modes (c-blosc2's blosc2_splitmode, 1-based).
const (
	AlwaysSplit        = 1
	NeverSplit         = 2
	AutoSplit          = 3
	ForwardCompatSplit = 4
)

// Params are the compression parameters of a chunk.
type Params struct {
	Typesize    int
	BlockSize   int
	Codec       int
	CLevel      int
	Filters     [6]uint8
	FiltersMeta [6]uint8
	SplitMode   int
	// UseDict compresses the chunk's streams with a dictionary stored in
	// the chunk (python-blosc2's use_dict; zstd only here).
	UseDict bool
}

// Dictionary sizes written: c-blosc2 2.x reads dictionaries up to 32 KiB
// (newer BLOSC2_MAXDICTSIZE; older versions allowed 128 KiB) and falls
// back to plain compression below BLOSC2_MINUSEFULDICT.
const (
	writeMaxDict  = 32 << 10
	minUsefulDict = 256
)

func (p *Params) split() bool {
	switch p.SplitMode {
	case AlwaysSplit:
		return true
	case NeverSplit:
		return false
	}
	shuffle := false
	for _, f := range p.Filters {
		if f == FilterShuffle {
			shuffle = true
		}
	}
	fast := p.Codec == CodecBloscLZ || p.Codec == CodecLZ4 || (p.Codec == CodecZstd && p.CLevel <= 5)
	return fast && shuffle && p.Typesize <= 16 && p.BlockSize/p.Typesize >= 32
}

func (p *Params) header(nbytes, blocksize int, flags, b2flags uint8) []byte {
	h := make([]byte, ExtendedHeaderLen)
	h[0], h[1], h[2], h[3] = 5, 1, flags|flagShuffle|flagBitshuffle, byte(p.Typesize)
	binary.LittleEndian.PutUint32(h[4:], uint32(nbytes))
	binary.LittleEndian.PutUint32(h[8:], uint32(blocksize))
	copy(h[16:22], p.Filters[:])
	h[22] = byte(p.Codec)
	copy(h[24:30], p.FiltersMeta[:])
	h[31] = b2flags
	return h
}

func (p *Params) check() error {
	if p.Typesize <= 0 || p.Typesize > 255 || p.BlockSize <= 0 || p.BlockSize > MaxBlockSize {
		return fmt.Errorf("blosc2 chunk: typesize %d, blocksize %d", p.Typesize, p.BlockSize)
	}
	if _, err := CodecFormat(p.Codec); err != nil {
		return err
	}
	if p.UseDict && p.Codec != CodecZstd {
		return unsupportedErr(fmt.Sprintf("blosc2 chunk: dictionaries are written for zstd only, not codec %d", p.Codec))
	}
	for _, f := range p.Filters {
		switch f {
		case FilterNone, FilterShuffle, FilterBitshuffle, FilterDelta, FilterTruncPrec, FilterBytedelta, FilterBytedeltaBuggy:
		default:
			return fmt.Errorf("blosc2 chunk: filter %d cannot be written", f)
		}
	}
	return nil
}

// Encode compresses data into one chunk as c-blosc2 would lay it out:
// blocks of p.BlockSize, the filter pipeline forward, split streams where
// the split mode says so, runs of one byte as run-length streams, and the
// whole chunk memcpyed when compression does not pay.
func Encode(p Params, data []byte) ([]byte, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	nbytes := len(data)
	bs := p.BlockSize
	if bs > nbytes && nbytes > 0 {
		bs = nbytes
	}
	if nbytes == 0 {
		h := p.header(0, bs, flagMemcpyed, 0)
		binary.LittleEndian.PutUint32(h[12:], ExtendedHeaderLen)
		return h, nil
	}
	format, _ := CodecFormat(p.Codec)
	split := p.split()
	flags := uint8(format << 5)
	if !split {
		flags |= flagDontSplit
	}
	nb := (nbytes + bs - 1) / bs
	tmp := make([]byte, 3*bs)
	var enc *zstd.Encoder
	var dict []byte
	if p.UseDict {
		var err error
		if dict, err = p.buildDict(data, bs, split); err != nil {
			return nil, err
		}
		if dict != nil {
			enc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(p.CLevel)), zstd.WithEncoderConcurrency(1),
				zstd.WithZeroFrames(true), zstd.WithEncoderDictRaw(0, dict))
			if err != nil {
				return nil, fmt.Errorf("blosc2 chunk: zstd dictionary: %v", err)
			}
			defer enc.Close()
		}
	}
	var b2flags uint8
	if dict != nil {
		b2flags = b2UseDict
	}
	out := p.header(nbytes, bs, flags, b2flags)
	out = append(out, make([]byte, 4*nb)...)
	if dict != nil {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(dict)))
		out = append(out, dict...)
	}
	limit := nbytes + ExtendedHeaderLen // beyond this, memcpy wins
	cbuf := make([]byte, bs+64)
	for i := 0; i < nb; i++ {
		blk := data[i*bs : min((i+1)*bs, nbytes)]
		binary.LittleEndian.PutUint32(out[ExtendedHeaderLen+4*i:], uint32(len(out)))
		filtered, err := forward(&p, blk, data[:min(bs, nbytes)], i == 0, tmp)
		if err != nil {
			return nil, err
		}
		nstreams := 1
		if split && len(blk) == bs {
			nstreams = p.Typesize
		}
		ne := len(blk) / nstreams
		for j := 0; j < nstreams; j++ {
			s := filtered[j*ne : (j+1)*ne]
			if isRun(s) {
				if s[0] == 0 {
					out = binary.LittleEndian.AppendUint32(out, 0)
				} else {
					out = binary.LittleEndian.AppendUint32(out, uint32(-int32(s[0])))
					out = append(out, 1)
				}
				continue
			}
			var n int
			if enc != nil {
				if z := enc.EncodeAll(s, cbuf[:0]); len(z) < ne && &z[0] == &cbuf[0] {
					n = len(z)
				}
			} else if n, err = compressStream(p.Codec, p.CLevel, s, cbuf[:ne]); err != nil {
				return nil, err
			}
			if n <= 0 || n >= ne {
				out = binary.LittleEndian.AppendUint32(out, uint32(ne))
				out = append(out, s...)
			} else {
				out = binary.LittleEndian.AppendUint32(out, uint32(n))
				out = append(out, cbuf[:n]...)
			}
		}
		if len(out) > limit {
			break
		}
	}
	if len(out) > limit {
		out = p.header(nbytes, bs, flags|flagMemcpyed, 0)
		out = append(out, data...)
	}
	binary.LittleEndian.PutUint32(out[12:], uint32(len(out)))
	return out, nil
}

// buildDict picks the dictionary of a chunk as c-blosc2 sizes it (at most
// 1/20 of the chunk, samples of 1/16 of a block or stream each, none when
// that is under 256 bytes): raw content, the first bytes of the filtered
// blocks, which zstd (and c-blosc2's ZSTD_createDDict) takes as a content
// dictionary. nil when the chunk is too small for one.
func (p *Params) buildDict(data []byte, bs int, split bool) ([]byte, error) {
	nbytes := len(data)
	maxSize := min(writeMaxDict, nbytes/20)
	nb := (nbytes + bs - 1) / bs
	samples := nb
	if split {
		samples *= p.Typesize
	}
	samples = max(samples, 8)
	sampleSize := nbytes / samples / 16
	if maxSize < minUsefulDict || sampleSize == 0 {
		return nil, nil
	}
	size := min(maxSize, samples*sampleSize)
	tmp := make([]byte, 3*bs)
	dict := make([]byte, 0, size)
	for i := 0; i < nb && len(dict) < size; i++ {
		blk := data[i*bs : min((i+1)*bs, nbytes)]
		f, err := forward(p, blk, data[:min(bs, nbytes)], i == 0, tmp)
		if err != nil {
			return nil, err
		}
		dict = append(dict, f[:min(len(f), size-len(dict))]...)
	}
	// A content dictionary must not look like a zstd-format one.
	if len(dict) < 8 || binary.LittleEndian.Uint32(dict) == 0xEC30A437 {
		return nil, nil
	}
	return dict, nil
}

func isRun(s []byte) bool {
	for _, v := range s[1:] {
		if v != s[0] {
			return false
		}
	}
	return true
}

// forward runs the filter pipeline on one block.
func forward(p *Params, blk, block0 []byte, first bool, tmp []byte) ([]byte, error) {
	n := len(blk)
	a, b := tmp[:n], tmp[len(tmp)/3:len(tmp)/3+n]
	cur := blk
	for k := 0; k < 6; k++ {
		f, meta := p.Filters[k], p.FiltersMeta[k]
		dst := a
		if len(cur) > 0 && &cur[0] == &a[0] {
			dst = b
		}
		switch f {
		case FilterNone:
			continue
		case FilterShuffle:
			ts := p.Typesize
			if meta != 0 {
				ts = int(meta)
			}
			Shuffle(ts, cur, dst)
		case FilterBitshuffle:
			Bitshuffle(p.Typesize, cur, dst)
		case FilterDelta:
			// c-blosc2 deltas block 0 against itself (its filter input) and
			// the other blocks against block 0's unfiltered bytes.
			ref := block0
			if first {
				ref = cur
			}
			DeltaEncode(p.Typesize, first, ref, cur, dst)
		case FilterTruncPrec:
			if err := TruncPrec(int8(meta), p.Typesize, cur, dst); err != nil {
				return nil, err
			}
		case FilterBytedelta, FilterBytedeltaBuggy:
			ts := p.Typesize
			if meta != 0 {
				ts = int(meta)
			}
			BytedeltaEncode(ts, f == FilterBytedeltaBuggy, cur, dst)
		}
		cur = dst
	}
	return cur, nil
}

// specialHeader is the header c-blosc2 writes for special chunks: the
// extended-header flags only, no filters, the kind in blosc2_flags.
func specialHeader(p Params, kind, nbytes int) []byte {
	h := make([]byte, ExtendedHeaderLen)
	h[0], h[1], h[2], h[3] = 5, 1, flagShuffle|flagBitshuffle, byte(p.Typesize)
	binary.LittleEndian.PutUint32(h[4:], uint32(nbytes))
	binary.LittleEndian.PutUint32(h[8:], uint32(min(p.BlockSize, max(nbytes, 1))))
	binary.LittleEndian.PutUint32(h[12:], ExtendedHeaderLen)
	h[31] = byte(kind << 4)
	return h
}

// Special builds a special chunk of kind (SpecialZero, SpecialNaN,
// SpecialUninit) holding nbytes.
func Special(p Params, kind, nbytes int) []byte { return specialHeader(p, kind, nbytes) }

// Repeat builds a chunk of nbytes repeating one value.
func Repeat(p Params, value []byte, nbytes int) []byte {
	h := append(specialHeader(p, SpecialValue, nbytes), value...)
	binary.LittleEndian.PutUint32(h[12:], uint32(len(h)))
	return h
}
