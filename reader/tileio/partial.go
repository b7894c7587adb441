package tileio

import (
	"context"
	"sync/atomic"

	"github.com/tileflight/tileflight/tdbarray"
)

// LoadRange is LoadWhen for a dense reader that will read only bytes
// [lo, hi) of a fixed-size field's Data (cells in the tile's cell order;
// Validity is read whole). A tile the decoded-tile cache would never keep
// (or any tile when there is no cache) is then decoded only in the filter
// chunks overlapping [lo, hi) when they are at most half of its chunks
// (filters.UnfilterRange): a one-cell read of a 16 MiB tile decodes one
// 64 KiB chunk instead of 256. A tile with no filter is still read whole
// (where its chunks lie is only known from their headers), but only the
// needed chunks are moved over their framing. The other bytes of Data
// are unspecified. Such a partial tile is charged to the budget in full
// (its buffer is the whole tile) and never enters the cache. Var-sized
// fields and tiles the cache keeps load whole, as LoadWhen does (cached
// whole, repeated small reads hit it).
func (l *Loader) LoadRange(ctx context.Context, frag *tdbarray.Fragment, name string, t uint64, need <-chan struct{}, lo, hi uint64) (*Tile, error) {
	return l.loadWhenHow(ctx, frag, name, t, need, loadHow{rng: &byteRange{lo, hi}})
}

// byteRange is the part [lo, hi) of a tile's Data a reader needs.
type byteRange struct{ lo, hi uint64 }

// PartialMode says how LoadRange treats tiles it may decode in part.
type PartialMode int32

const (
	// PartialOn decodes only the chunks needed (the default).
	PartialOn PartialMode = iota
	// PartialOff decodes every tile whole, as LoadWhen.
	PartialOff
	// PartialPoison is PartialOn with every byte of Data outside the
	// decoded chunks set to 0xA5, so that a reader reading them shows in
	// its results (tests).
	PartialPoison
)

var partialMode atomic.Int32

// SetPartialMode sets how LoadRange decodes tiles (process-wide; tests
// compare the modes) and returns a function restoring the previous mode.
func SetPartialMode(m PartialMode) (restore func()) {
	old := partialMode.Swap(int32(m))
	return func() { partialMode.Store(old) }
}

var partialTiles, partialChunks, partialDecoded atomic.Int64

// PartialCounts are LoadRange's counters since the process started:
// tiles decoded in part, their chunks, and how many of those were
// decoded.
type PartialCounts struct {
	Tiles, Chunks, Decoded int64
}

// PartialStats returns LoadRange's counters.
func PartialStats() PartialCounts {
	return PartialCounts{partialTiles.Load(), partialChunks.Load(), partialDecoded.Load()}
}

// poisonOutside sets every byte of data outside [a, b) to 0xA5.
func poisonOutside(data []byte, a, b uint64) {
	for i := range data[:a] {
		data[i] = 0xA5
	}
	for i := range data[b:] {
		data[b+uint64(i)] = 0xA5
	}
}
