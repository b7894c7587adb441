package filters

import (
	"encoding/binary"
	"fmt"

	"github.com/tileflight/tileflight/filters/stage"
	"github.com/tileflight/tileflight/format/wire"
)

// RLE and dictionary encoding of var-sized strings. The whole values tile
// is one chunk; the encoded cells carry their lengths, so the offsets tile
// is left empty and the offsets are rebuilt while decoding. Integers in
// these encodings are big-endian and 1, 2, 4 or 8 bytes wide, the narrowest
// that fits (TileDB's choice, reproduced for byte-exact output).

// byteSize is the narrowest of 1, 2, 4, 8 bytes that holds v.
func byteSize(v uint64) int {
	switch {
	case v <= 0xFF:
		return 1
	case v <= 0xFFFF:
		return 2
	case v <= 0xFFFFFFFF:
		return 4
	}
	return 8
}

// widthOf maps a stored width byte as TileDB does (0 is invalid).
func widthOf(b uint8) (int, error) {
	switch {
	case b == 0:
		return 0, fmt.Errorf("%w: integer width 0", wire.ErrCorrupt)
	case b <= 1:
		return 1, nil
	case b <= 2:
		return 2, nil
	case b <= 4:
		return 4, nil
	}
	return 8, nil
}

func putBE(b []byte, w int, v uint64) {
	switch w {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.BigEndian.PutUint16(b, uint16(v))
	case 4:
		binary.BigEndian.PutUint32(b, uint32(v))
	default:
		binary.BigEndian.PutUint64(b, v)
	}
}

func getBE(b []byte, w int) uint64 {
	switch w {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.BigEndian.Uint16(b))
	case 4:
		return uint64(binary.BigEndian.Uint32(b))
	}
	return binary.BigEndian.Uint64(b)
}

// cellBounds checks offsets against data and returns the end of cell i.
func checkOffsets(data []byte, offsets []uint64) error {
	if len(offsets) == 0 {
		return fmt.Errorf("%w: string encoding of a tile without cells", ErrUnsupported)
	}
	if uint64(len(data)) > 0xFFFFFFFF || uint64(len(offsets))*8 > 0xFFFFFFFF {
		return fmt.Errorf("%w: var tile exceeds 4 GiB", ErrUnsupported)
	}
	prev := uint64(0)
	for i, o := range offsets {
		if o < prev || o > uint64(len(data)) {
			return fmt.Errorf("%w: offset %d of cell %d is out of order or past the %d data bytes", wire.ErrCorrupt, o, i, len(data))
		}
		prev = o
	}
	return nil
}

func cell(data []byte, offsets []uint64, i int) []byte {
	end := uint64(len(data))
	if i+1 < len(offsets) {
		end = offsets[i+1]
	}
	return data[offsets[i]:end]
}

func stringsHeader(extra int, inLen, outLen, ncells int) *wire.Writer {
	w := wire.NewWriter(make([]byte, 0, 20+extra))
	w.Uint32(0) // metadata parts
	w.Uint32(1) // data parts
	w.Uint32(uint32(inLen))
	w.Uint32(uint32(outLen))
	w.Uint32(uint32(8 * ncells))
	return w
}

// rleStringsForward encodes runs of equal cells as (run length, string
// length, string).
func rleStringsForward(data []byte, offsets []uint64) (stage.Buffers, error) {
	if err := checkOffsets(data, offsets); err != nil {
		return stage.Buffers{}, err
	}
	n := len(offsets)
	// TileDB sizes the string length from every run but the last (unless
	// it is the first); we include the last so that output stays valid
	// where TileDB's would truncate it, and match TileDB everywhere else.
	runs, strBytes := 0, 0
	maxRun, maxLen := uint64(0), uint64(0)
	for i := 0; i < n; {
		c := cell(data, offsets, i)
		j := i + 1
		for j < n && string(cell(data, offsets, j)) == string(c) {
			j++
		}
		runs++
		strBytes += len(c)
		maxRun = max(maxRun, uint64(j-i))
		maxLen = max(maxLen, uint64(len(c)))
		i = j
	}
	rw, sw := byteSize(maxRun), byteSize(maxLen)
	out := make([]byte, runs*(rw+sw)+strBytes)
	o := 0
	for i := 0; i < n; {
		c := cell(data, offsets, i)
		j := i + 1
		for j < n && string(cell(data, offsets, j)) == string(c) {
			j++
		}
		putBE(out[o:], rw, uint64(j-i))
		putBE(out[o+rw:], sw, uint64(len(c)))
		o += rw + sw
		o += copy(out[o:], c)
		i = j
	}
	w := stringsHeader(2, len(data), len(out), n)
	w.Uint8(uint8(rw))
	w.Uint8(uint8(sw))
	return stage.Buffers{Meta: [][]byte{w.Bytes()}, Data: [][]byte{out}}, nil
}

// dictForward replaces every cell by its index in a dictionary of the
// distinct cells, in order of first appearance.
func dictForward(data []byte, offsets []uint64) (stage.Buffers, error) {
	if err := checkOffsets(data, offsets); err != nil {
		return stage.Buffers{}, err
	}
	n := len(offsets)
	maxLen := uint64(0)
	for i := 0; i < n; i++ {
		maxLen = max(maxLen, uint64(len(cell(data, offsets, i))))
	}
	// The id width follows the number of cells, not of distinct ones.
	iw, sw := byteSize(uint64(n)), byteSize(maxLen)
	ids := make(map[string]uint64)
	out := make([]byte, n*iw)
	dict := make([]byte, 0, 64)
	for i := 0; i < n; i++ {
		c := cell(data, offsets, i)
		id, ok := ids[string(c)]
		if !ok {
			id = uint64(len(ids))
			ids[string(c)] = id
			var lb [8]byte
			putBE(lb[:], sw, uint64(len(c)))
			dict = append(dict, lb[:sw]...)
			dict = append(dict, c...)
		}
		putBE(out[i*iw:], iw, id)
	}
	if uint64(len(dict)) > 0xFFFFFFFF {
		return stage.Buffers{}, fmt.Errorf("%w: dictionary exceeds 4 GiB", ErrUnsupported)
	}
	w := stringsHeader(6+len(dict), len(data), len(out), n)
	w.Uint8(uint8(iw))
	w.Uint8(uint8(sw))
	w.Uint32(uint32(len(dict)))
	w.Write(dict)
	return stage.Buffers{Meta: [][]byte{w.Bytes()}, Data: [][]byte{out}}, nil
}

// stringsReverse decodes RLE (rle) or dictionary encoded strings into dst
// (when it has the capacity) and fills offsets, whose length is the
// number of cells the caller expects. r is positioned after the part
// counts of the metadata.
func stringsReverse(rle bool, r *wire.Reader, data, dst []byte, offsets []uint64, limit int) ([]byte, error) {
	outLen := r.Uint32("strings: original length")
	inLen := r.Uint32("strings: encoded length")
	offLen := r.Uint32("strings: offsets length")
	if r.Err() != nil {
		return nil, r.Err()
	}
	if uint64(offLen) != 8*uint64(len(offsets)) {
		return nil, fmt.Errorf("%w: strings: %d bytes of offsets for %d cells", wire.ErrCorrupt, offLen, len(offsets))
	}
	if uint64(inLen) > uint64(len(data)) {
		return nil, fmt.Errorf("%w: strings: %d encoded bytes, %d present", wire.ErrTruncated, inLen, len(data))
	}
	if uint64(outLen) > uint64(limit) {
		return nil, fmt.Errorf("%w: strings: %d bytes is more than possible", wire.ErrCorrupt, outLen)
	}
	in := data[:inLen]
	var out []byte
	if uint64(cap(dst)) >= uint64(outLen) {
		out = dst[:outLen]
	} else {
		out = make([]byte, outLen)
	}
	a, b := r.Uint8("strings: width"), r.Uint8("strings: length width")
	if r.Err() != nil {
		return nil, r.Err()
	}
	w1, err := widthOf(a)
	if err != nil {
		return nil, err
	}
	sw, err := widthOf(b)
	if err != nil {
		return nil, err
	}
	var nc, o uint64
	if rle {
		for p := 0; p < len(in); {
			if len(in)-p < w1+sw {
				return nil, fmt.Errorf("%w: rle strings: run header at byte %d", wire.ErrTruncated, p)
			}
			run := getBE(in[p:], w1)
			l := getBE(in[p+w1:], sw)
			p += w1 + sw
			if l > uint64(len(in)-p) {
				return nil, fmt.Errorf("%w: rle strings: string of %d bytes at byte %d", wire.ErrTruncated, l, p)
			}
			if run > uint64(len(offsets))-nc || (l > 0 && run > (uint64(len(out))-o)/l) {
				return nil, fmt.Errorf("%w: rle strings: runs exceed %d cells / %d bytes", wire.ErrCorrupt, len(offsets), len(out))
			}
			s := in[p : p+int(l)]
			for k := uint64(0); k < run; k++ {
				offsets[nc] = o
				nc++
				o += uint64(copy(out[o:], s))
			}
			p += int(l)
		}
	} else {
		dsize := r.Uint32("dictionary: size")
		dict := r.BytesU64(uint64(dsize), "dictionary")
		if r.Err() != nil {
			return nil, r.Err()
		}
		var ents [][]byte
		for p := 0; p < len(dict); {
			if len(dict)-p < sw {
				return nil, fmt.Errorf("%w: dictionary entry at byte %d", wire.ErrTruncated, p)
			}
			l := getBE(dict[p:], sw)
			p += sw
			if l > uint64(len(dict)-p) {
				return nil, fmt.Errorf("%w: dictionary entry of %d bytes at byte %d", wire.ErrTruncated, l, p)
			}
			ents = append(ents, dict[p:p+int(l)])
			p += int(l)
		}
		if len(in)%w1 != 0 {
			return nil, fmt.Errorf("%w: dictionary: %d id bytes are not %d-byte ids", wire.ErrCorrupt, len(in), w1)
		}
		if uint64(len(in)/w1) != uint64(len(offsets)) {
			return nil, fmt.Errorf("%w: dictionary: %d ids for %d cells", wire.ErrCorrupt, len(in)/w1, len(offsets))
		}
		for p := 0; p < len(in); p += w1 {
			id := getBE(in[p:], w1)
			if id >= uint64(len(ents)) {
				return nil, fmt.Errorf("%w: dictionary: id %d of cell %d, %d entries", wire.ErrCorrupt, id, nc, len(ents))
			}
			s := ents[id]
			if uint64(len(s)) > uint64(len(out))-o {
				return nil, fmt.Errorf("%w: dictionary: cells exceed %d bytes", wire.ErrCorrupt, len(out))
			}
			offsets[nc] = o
			nc++
			o += uint64(copy(out[o:], s))
		}
	}
	if nc != uint64(len(offsets)) || o != uint64(len(out)) {
		return nil, fmt.Errorf("%w: strings: decoded %d cells / %d bytes, want %d / %d", wire.ErrCorrupt, nc, o, len(offsets), len(out))
	}
	return out, nil
}
