package codecs

import (
	"fmt"

	"github.com/tileflight/tileflight/filters/stage"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/wire"
)

// elemSize is the width the shuffles and XOR work with; byte-like and
// unknown types count as 1.
func elemSize(t datatype.Datatype) int { return max(t.Size(), 1) }

// byteshuffle: metadata "u32 parts, u32 size per part"; one output part
// holding every input part shuffled in turn.
type byteshuffle struct{ sameType }

func (byteshuffle) Forward(ctx *stage.Context, in stage.Buffers) (stage.Buffers, error) {
	es := elemSize(ctx.Type)
	out := make([]byte, stage.Size(in.Data))
	off := 0
	for _, p := range in.Data {
		ByteShuffle(out[off:], p, es)
		off += len(p)
	}
	return stage.Buffers{Meta: prependMeta(partsMeta(in.Data), in.Meta), Data: [][]byte{out}}, nil
}

func (s byteshuffle) Reverse(ctx *stage.Context, in stage.Buffers) (stage.Buffers, error) {
	return s.ReverseInto(ctx, in, nil)
}

func (byteshuffle) ReverseInto(ctx *stage.Context, in stage.Buffers, dst []byte) (stage.Buffers, error) {
	return unshuffleParts("byteshuffle", ctx, in, dst, ByteUnshuffle)
}

// bitshuffle: like byteshuffle, but every input part is first split so
// that all parts but a tail of fewer than 8 bytes are multiples of 8.
type bitshuffle struct{ sameType }

func (bitshuffle) Forward(ctx *stage.Context, in stage.Buffers) (stage.Buffers, error) {
	es := elemSize(ctx.Type)
	parts := make([][]byte, 0, 2*len(in.Data))
	for _, p := range in.Data {
		cut := len(p) - len(p)%8
		if cut == len(p) {
			parts = append(parts, p)
		} else {
			parts = append(parts, p[:cut], p[cut:])
		}
	}
	out := make([]byte, stage.Size(in.Data))
	off := 0
	for _, p := range parts {
		BitShuffle(out[off:], p, es)
		off += len(p)
	}
	return stage.Buffers{Meta: prependMeta(partsMeta(parts), in.Meta), Data: [][]byte{out}}, nil
}

func (s bitshuffle) Reverse(ctx *stage.Context, in stage.Buffers) (stage.Buffers, error) {
	return s.ReverseInto(ctx, in, nil)
}

func (bitshuffle) ReverseInto(ctx *stage.Context, in stage.Buffers, dst []byte) (stage.Buffers, error) {
	return unshuffleParts("bitshuffle", ctx, in, dst, BitUnshuffle)
}

// unshuffleParts undoes a shuffle part by part into one output.
func unshuffleParts(name string, ctx *stage.Context, in stage.Buffers, dst []byte,
	kernel func(dst, src []byte, elemSize int)) (stage.Buffers, error) {
	data := stage.Concat(in.Data)
	r, sizes, err := partSizes(name, stage.Concat(in.Meta), len(data))
	if err != nil {
		return stage.Buffers{}, err
	}
	total := 0
	for _, s := range sizes {
		total += int(s)
	}
	out := grow(dst, total)
	es := elemSize(ctx.Type)
	off := 0
	for _, s := range sizes {
		kernel(out[off:off+int(s)], data[off:off+int(s)], es)
		off += int(s)
	}
	if off != len(data) {
		return stage.Buffers{}, fmt.Errorf("%s: %w: parts hold %d bytes but the data has %d", name, wire.ErrCorrupt, off, len(data))
	}
	return stage.Buffers{Meta: rest(r), Data: [][]byte{out}}, nil
}
