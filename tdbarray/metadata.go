package tdbarray

import (
	"context"
	"errors"
	"fmt"

	"github.com/tileflight/tileflight/format/arraymeta"
	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/storage"
)

// LoadMetadata reads the metadata of the array at dir ("" for the
// store's root) as TileDB does when the array is opened at [start, end]
// (arraymeta.Latest: now): files still being written are skipped; a
// vacuum file whose timestamp range lies within [start, end] hides the
// metadata files it lists; of the rest, the files whose timestamp range
// lies within [start, end] are merged in timestamp order. A missing
// __meta directory is an empty map. u decodes the generic tiles of an
// encrypted array (nil: not encrypted). The bytes are package
// arraymeta's; the reading is done here.
func LoadMetadata(ctx context.Context, st storage.Store, dir string, start, end uint64, u gentile.Unfilterer) (*arraymeta.Snapshot, error) {
	mdir := storage.Join(dir, names.MetaDir)
	ents, err := st.List(ctx, mdir)
	if err != nil {
		return nil, fmt.Errorf("array metadata: list %q: %w", mdir, err)
	}
	var listed []string
	for _, e := range ents {
		if !e.IsDir {
			listed = append(listed, e.Name)
		}
	}
	metas, vacs := arraymeta.Listing(listed, start, end)
	hidden := map[string]bool{}
	for _, v := range vacs {
		key := storage.Join(mdir, v.String())
		b, err := st.Get(ctx, key)
		if err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				continue // vacuumed meanwhile
			}
			return nil, fmt.Errorf("array metadata: vacuum file %q: %w", key, err)
		}
		for _, base := range arraymeta.VacuumedNames(b) {
			hidden[base] = true
		}
	}
	apply, vacuumed := arraymeta.ToApply(metas, hidden, start, end)
	files := make([]arraymeta.File, 0, len(apply))
	for _, n := range apply {
		key := storage.Join(mdir, n.String())
		b, err := st.Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("array metadata: %q: %w", key, err)
		}
		es, err := arraymeta.DecodeFileWith(b, u)
		if err != nil {
			return nil, fmt.Errorf("array metadata: %q: %w", key, err)
		}
		files = append(files, arraymeta.File{Name: n, Entries: es})
	}
	return arraymeta.NewSnapshot(files, vacuumed), nil
}

// MetadataJSON is Metadata as JSON values (arraymeta.JSONMap): what
// get_metadata answers.
func (a *Array) MetadataJSON(ctx context.Context) (map[string]any, error) {
	snap, err := a.Metadata(ctx)
	if err != nil {
		return nil, err
	}
	return arraymeta.JSONMap(snap.Values)
}
