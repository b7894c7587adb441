package filters

import (
	"errors"
	"fmt"

	"github.com/tileflight/tileflight/filters/stage"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/pipeline"
)

// otherStage builds the non-compression filters (package codecs). It is a
// variable so that this package could be built while codecs was being
// written; codecs.go sets it.
var otherStage = func(f pipeline.Filter, opts Options) (stage.Stage, error) {
	return nil, fmt.Errorf("%w: filter %s needs package filters/codecs", ErrUnsupported, f.Type)
}

// checksumErrs are the sentinel errors of other packages that mean "the
// data failed its checksum".
var checksumErrs []error

func isChecksum(err error) bool {
	if errors.Is(err, ErrChecksum) {
		return true
	}
	for _, e := range checksumErrs {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// newStage builds the stage of filter f whose input datatype is in, for
// tiles of cellSize-byte cells.
func newStage(f pipeline.Filter, in datatype.Datatype, cellSize int, opts Options) (stage.Stage, error) {
	switch f.Type {
	case pipeline.None:
		return noop{}, nil
	case pipeline.Gzip, pipeline.Zstd, pipeline.LZ4, pipeline.RLE, pipeline.Bzip2,
		pipeline.DoubleDelta, pipeline.Dictionary, pipeline.Delta:
		return newCompression(f, in, cellSize)
	case pipeline.Deprecated:
		return nil, fmt.Errorf("%w: deprecated filter", ErrUnsupported)
	}
	return otherStage(f, opts)
}

// noop is TileDB's "none" filter: data and metadata pass through.
type noop struct{}

func (noop) OutputType(in datatype.Datatype) datatype.Datatype { return in }
func (noop) Forward(_ *stage.Context, in stage.Buffers) (stage.Buffers, error) {
	return in, nil
}
func (noop) Reverse(_ *stage.Context, in stage.Buffers) (stage.Buffers, error) {
	return in, nil
}
