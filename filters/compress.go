package filters

import (
	"fmt"
	"sync"

	"github.com/tileflight/tileflight/filters/stage"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/pipeline"
	"github.com/tileflight/tileflight/format/wire"
)

// codec is one compressor working on one part.
type codec interface {
	// compress appends the compressed form of src to dst.
	compress(dst, src []byte) ([]byte, error)
	// decompress fills dst, whose length is the part's original length
	// as recorded in the metadata, from src; producing any other number
	// of bytes is an error.
	decompress(dst, src []byte) error
}

// defaultLimit bounds what Reverse (without a runner telling the chunk
// size) may allocate for one stage's output.
const defaultLimit = 1 << 30

// compStage is a compression filter: every metadata and data part of its
// input is compressed on its own, and its own metadata records the parts'
// original and compressed lengths. Compression filters are the only ones
// that consume the metadata of earlier filters.
type compStage struct {
	f     pipeline.Filter
	c     codec // nil for dictionary encoding (strings only)
	out   datatype.Datatype
	strRL bool // RLE (true) or dictionary (false) in string mode
}

func newCompression(f pipeline.Filter, in datatype.Datatype, cellSize int) (*compStage, error) {
	s := &compStage{f: f, out: in}
	eff := in
	if (f.Type == pipeline.Delta || f.Type == pipeline.DoubleDelta) && f.Reinterpret != datatype.Any && f.Reinterpret.Valid() {
		eff = f.Reinterpret
		s.out = f.Reinterpret
		if eff.Size() == 0 || in.Size()%eff.Size() != 0 {
			return nil, fmt.Errorf("%w: cannot reinterpret %s as %s", ErrUnsupported, in, eff)
		}
	}
	var err error
	switch f.Type {
	case pipeline.Gzip:
		s.c, err = newGzip(f.Level)
	case pipeline.Zstd:
		s.c = newZstd(f.Level)
	case pipeline.LZ4:
		s.c = lz4Codec{}
	case pipeline.Bzip2:
		s.c, err = newBzip2(f.Level)
	case pipeline.RLE:
		s.c = rleCodec{size: cellSize}
		s.strRL = true
	case pipeline.Delta:
		s.c, err = newDelta(eff)
	case pipeline.DoubleDelta:
		s.c, err = newDoubleDelta(eff)
	case pipeline.Dictionary:
	default:
		return nil, fmt.Errorf("%w: %s is not a compression filter", ErrUnsupported, f.Type)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (s *compStage) OutputType(datatype.Datatype) datatype.Datatype { return s.out }

// Forward compresses the parts. With ctx.VarOffsets set (var-sized strings
// whose offsets travel in the values tile) RLE and dictionary encode the
// cells themselves instead.
func (s *compStage) Forward(ctx *stage.Context, in stage.Buffers) (stage.Buffers, error) {
	if ctx.VarOffsets != nil && (s.f.Type == pipeline.RLE || s.f.Type == pipeline.Dictionary) {
		if len(in.Data) != 1 || len(in.Meta) != 0 {
			return stage.Buffers{}, fmt.Errorf("%w: string %s needs one data part and no metadata", ErrUnsupported, s.f.Type)
		}
		if s.strRL {
			return rleStringsForward(in.Data[0], ctx.VarOffsets)
		}
		return dictForward(in.Data[0], ctx.VarOffsets)
	}
	if s.c == nil {
		return stage.Buffers{}, fmt.Errorf("%w: dictionary encoding applies only to var-sized strings", ErrUnsupported)
	}
	nparts := len(in.Meta) + len(in.Data)
	hdr := wire.NewWriter(make([]byte, 0, 8+8*nparts))
	hdr.Uint32(uint32(len(in.Meta)))
	hdr.Uint32(uint32(len(in.Data)))
	total := 0
	for _, p := range in.Meta {
		total += len(p)
	}
	for _, p := range in.Data {
		total += len(p)
	}
	// The parts are compressed into pooled scratch and the result copied
	// out at its exact size: a chunk's output lives until its whole tile
	// is filtered, and sizing it from the input (zstd-1 floats shrink
	// tenfold) would allocate several times the output per tile.
	sp, _ := forwardScratch.Get().(*[]byte)
	if sp == nil {
		sp = new([]byte)
	}
	defer forwardScratch.Put(sp)
	out := (*sp)[:0]
	if cap(out) < total/2+64 {
		out = make([]byte, 0, total/2+64)
	}
	defer func() { *sp = out[:0] }()
	for _, parts := range [2][][]byte{in.Meta, in.Data} {
		for _, p := range parts {
			if uint64(len(p)) > 0xFFFFFFFF {
				return stage.Buffers{}, fmt.Errorf("%w: part of %d bytes exceeds 4 GiB", ErrUnsupported, len(p))
			}
			start := len(out)
			var err error
			out, err = s.c.compress(out, p)
			if err != nil {
				return stage.Buffers{}, err
			}
			if uint64(len(out)-start) > 0xFFFFFFFF {
				return stage.Buffers{}, fmt.Errorf("%w: compressed part exceeds 4 GiB", ErrUnsupported)
			}
			hdr.Uint32(uint32(len(p)))
			hdr.Uint32(uint32(len(out) - start))
		}
	}
	return stage.Buffers{Meta: [][]byte{hdr.Bytes()}, Data: [][]byte{append(make([]byte, 0, len(out)), out...)}}, nil
}

// forwardScratch holds compression output buffers for Forward.
var forwardScratch sync.Pool

// Reverse implements stage.Stage.
func (s *compStage) Reverse(ctx *stage.Context, in stage.Buffers) (stage.Buffers, error) {
	return s.reverse(ctx, in, nil, defaultLimit)
}

// ReverseInto decompresses the data parts into dst when it has the
// capacity (the returned Data then aliases dst).
func (s *compStage) ReverseInto(ctx *stage.Context, in stage.Buffers, dst []byte) (stage.Buffers, error) {
	return s.reverse(ctx, in, dst, max(defaultLimit, cap(dst)))
}

// reverse undoes Forward. No output is larger than limit bytes: the
// lengths it allocates from come from the file.
func (s *compStage) reverse(ctx *stage.Context, in stage.Buffers, dst []byte, limit int) (stage.Buffers, error) {
	meta := stage.Concat(in.Meta)
	data := stage.Concat(in.Data)
	r := wire.NewReader(meta)
	nm := r.Uint32("compression: metadata parts")
	nd := r.Uint32("compression: data parts")
	if r.Err() != nil {
		return stage.Buffers{}, r.Err()
	}
	if ctx.VarOffsets != nil && ctx.Version >= 12 && (s.f.Type == pipeline.RLE || s.f.Type == pipeline.Dictionary) {
		if nm != 0 || nd != 1 {
			return stage.Buffers{}, fmt.Errorf("%w: string %s: %d metadata and %d data parts, want 0 and 1", wire.ErrCorrupt, s.f.Type, nm, nd)
		}
		out, err := stringsReverse(s.strRL, r, data, dst, ctx.VarOffsets, limit)
		if err != nil {
			return stage.Buffers{}, err
		}
		return stage.Buffers{Data: [][]byte{out}}, nil
	}
	if s.c == nil {
		return stage.Buffers{}, fmt.Errorf("%w: dictionary encoding applies only to var-sized strings", ErrUnsupported)
	}
	if !r.CheckCount(uint64(nm)+uint64(nd), 8, "compression: part lengths") {
		return stage.Buffers{}, r.Err()
	}
	n := int(nm + nd)
	lens := make([]uint32, 2*n)
	var metaLen, dataLen, compLen uint64
	for i := 0; i < n; i++ {
		lens[2*i] = r.Uint32("part original length")
		lens[2*i+1] = r.Uint32("part compressed length")
		if i < int(nm) {
			metaLen += uint64(lens[2*i])
		} else {
			dataLen += uint64(lens[2*i])
		}
		compLen += uint64(lens[2*i+1])
	}
	if compLen > uint64(len(data)) {
		return stage.Buffers{}, fmt.Errorf("%w: compressed parts hold %d bytes, the data %d", wire.ErrTruncated, compLen, len(data))
	}
	if metaLen+dataLen > uint64(limit) {
		return stage.Buffers{}, fmt.Errorf("%w: parts decompress to %d bytes, more than the %d possible", wire.ErrCorrupt, metaLen+dataLen, limit)
	}
	var metaOut []byte
	if nm > 0 {
		metaOut = make([]byte, metaLen)
	}
	var dataOut []byte
	if uint64(cap(dst)) >= dataLen {
		dataOut = dst[:dataLen]
	} else {
		dataOut = make([]byte, dataLen)
	}
	var mo, do, co uint64
	for i := 0; i < n; i++ {
		orig, comp := uint64(lens[2*i]), uint64(lens[2*i+1])
		src := data[co : co+comp]
		co += comp
		var out []byte
		if i < int(nm) {
			out = metaOut[mo : mo+orig]
			mo += orig
		} else {
			out = dataOut[do : do+orig]
			do += orig
		}
		if err := s.c.decompress(out, src); err != nil {
			kind := "data"
			j := i - int(nm)
			if i < int(nm) {
				kind, j = "metadata", i
			}
			return stage.Buffers{}, fmt.Errorf("%s part %d: %w", kind, j, err)
		}
	}
	res := stage.Buffers{Data: [][]byte{dataOut}}
	if nm > 0 {
		res.Meta = [][]byte{metaOut}
	}
	return res, nil
}
