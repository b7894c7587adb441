package filters

import (
	"fmt"
	"slices"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/pipeline"
	"github.com/tileflight/tileflight/format/wire"
)

// maxOtherTile bounds the payload of generic tiles with pipelines other
// than gzip, whose compression ratio has no useful bound (TileDB only
// writes gzip, plus AES when encrypted).
const maxOtherTile = 64 << 20

// GenericTileCodec unfilters and filters generic tiles with the complete
// pipeline runner: any pipeline, and encrypted tiles when EncryptionKey
// holds the array's AES-256-GCM key. It implements gentile.Unfilterer and
// gentile.Filterer; without a key and for gzip-only tiles it gives the
// same bytes as gentile.Plain.
type GenericTileCodec struct {
	EncryptionKey []byte
}

func (c GenericTileCodec) pipeline(h *gentile.Header) (*Pipeline, error) {
	if h.EncryptionType != 0 && len(c.EncryptionKey) == 0 {
		// The file is fine; the caller did not give the key.
		return nil, fmt.Errorf("encrypted generic tile (encryption type %d): %w", h.EncryptionType, gentile.ErrKeyRequired)
	}
	if h.EncryptionType == 0 && h.Filters.Has(pipeline.AES256GCM) {
		return nil, fmt.Errorf("%w: unencrypted generic tile with an encryption filter", wire.ErrCorrupt)
	}
	dt := h.Datatype
	cvn := uint32(1)
	if sz := uint64(dt.Size()); sz > 0 && h.CellSize > sz && h.CellSize%sz == 0 && h.CellSize/sz <= 1<<20 {
		cvn = uint32(h.CellSize / sz)
	}
	var key []byte
	if h.EncryptionType != 0 {
		key = c.EncryptionKey
	}
	p, err := New(h.Filters, dt, cvn, h.Version, Options{EncryptionKey: key})
	if err != nil {
		// TileDB writes generic tiles with a gzip pipeline (and AES when
		// encrypted): a header whose pipeline cannot even be built (a
		// gzip level of 56, an unknown datatype) was damaged, and that is
		// DataLoss, not a missing feature (found by the corruption
		// campaign, python_tests/soak/corrupt.py).
		return nil, fmt.Errorf("%w: generic tile header: %v", wire.ErrCorrupt, err)
	}
	return p, nil
}

// UnfilterTile implements gentile.Unfilterer.
func (c GenericTileCodec) UnfilterTile(h *gentile.Header, b []byte) ([]byte, error) {
	limit := uint64(maxOtherTile)
	switch {
	case h.Filters.Empty() && h.EncryptionType == 0:
		limit = uint64(len(b))
	case len(h.Filters.Filters) == 1 && h.Filters.Filters[0].Type == pipeline.Gzip:
		limit = max(limit, gentile.MaxGzipTile(len(b)))
	}
	if h.TileSize > limit {
		return nil, fmt.Errorf("%w: tile size %d is impossible for %d filtered bytes", wire.ErrCorrupt, h.TileSize, len(b))
	}
	p, err := c.pipeline(h)
	if err != nil {
		return nil, err
	}
	return p.UnfilterTile(make([]byte, h.TileSize), b)
}

// FilterTile implements gentile.Filterer. With a key it encrypts the way
// TileDB encrypts every generic tile of an encrypted array: the header is
// marked AES-256-GCM and the AES filter is appended to its pipeline
// (gentile.Encode writes the header after filtering, so the file says
// what was done).
func (c GenericTileCodec) FilterTile(h *gentile.Header, data []byte) ([]byte, error) {
	if len(c.EncryptionKey) != 0 && h.EncryptionType == 0 {
		h.EncryptionType = gentile.EncryptionAES256GCM
		h.Filters.Filters = append(slices.Clip(h.Filters.Filters),
			pipeline.Filter{Type: pipeline.AES256GCM, Reinterpret: datatype.Any})
	}
	p, err := c.pipeline(h)
	if err != nil {
		return nil, err
	}
	return p.FilterTile(data)
}
