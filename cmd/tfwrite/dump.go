package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/tileflight/tileflight/filters"
	"github.com/tileflight/tileflight/format/fragmeta"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/writer"
)

// dumpArray prints, as JSON, the fragment metadata of every fragment
// directory of the array at dir (committed or not): the tests compare what
// TileDB wrote with what the writer wrote.
func dumpArray(ctx context.Context, st storage.Store, dir string, encKey []byte, out io.Writer) error {
	s, err := writer.LoadSchemaWith(ctx, st, dir, writer.ArrayOptions{EncryptionKey: encKey})
	if err != nil {
		return err
	}
	l := fragmeta.Layout{Dense: s.IsDense()}
	for _, d := range s.Dimensions {
		l.Dims = append(l.Dims, fragmeta.Field{Name: d.Name, Type: d.Type, CellValNum: d.CellValNum})
	}
	for _, a := range s.Attributes {
		l.Attrs = append(l.Attrs, fragmeta.Field{Name: a.Name, Type: a.Type, CellValNum: a.CellValNum, Nullable: a.Nullable})
	}
	ents, err := st.List(ctx, storage.Join(dir, names.FragmentsDir))
	if err != nil {
		return err
	}
	res := map[string]any{}
	for _, e := range ents {
		n, err := names.Parse(e.Name)
		if err != nil {
			continue
		}
		key := storage.Join(dir, names.FragmentKey(n), names.FragmentMetadataFile)
		b, err := st.Get(ctx, key)
		if err != nil {
			return err
		}
		read := func(off, n uint64) ([]byte, error) {
			if off+n > uint64(len(b)) {
				return nil, fmt.Errorf("read past end")
			}
			return b[off : off+n], nil
		}
		fr, err := fragmeta.Open(read, uint64(len(b)), l, n.FormatVersion(), &fragmeta.Options{Unfilterer: filters.GenericTileCodec{EncryptionKey: encKey}})
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		m, err := fragmeta.LoadAll(fr)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		m.Footer.Layout = fragmeta.Layout{}
		files := map[string]int{}
		fe, _ := st.List(ctx, storage.Join(dir, names.FragmentKey(n)))
		for _, f := range fe {
			files[f.Name] = int(f.Size)
		}
		res[e.Name] = map[string]any{"meta": m, "files": files}
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", " ")
	return enc.Encode(res)
}
