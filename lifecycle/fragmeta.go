package lifecycle

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/filters"
	"github.com/tileflight/tileflight/format/fragmeta"
	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
)

func open(ctx context.Context, st storage.Store, dir string, opt Options, full bool) (*tdbarray.Array, error) {
	return tdbarray.Open(ctx, st, dir, tdbarray.Options{Start: opt.Start, End: opt.End, FullOverlapOnly: full, EncryptionKey: opt.EncryptionKey})
}

func filterer(key []byte) gentile.Filterer {
	if len(key) == 0 {
		return nil
	}
	return filters.GenericTileCodec{EncryptionKey: key}
}

// consolidateFragmentMeta writes what TileDB's FragmentMetaConsolidator
// writes: one __fragment_meta/<first>_<last>.meta generic tile holding the
// footers of every visible fragment (format version 3 and later), so that
// opening the array reads one object instead of one per fragment.
func consolidateFragmentMeta(ctx context.Context, st storage.Store, dir string, opt Options) (*Result, error) {
	a, err := open(ctx, st, dir, opt, false)
	if err != nil {
		return nil, err
	}
	var frags []*tdbarray.Fragment
	for _, f := range a.Fragments {
		if f.Meta.Footer().Version > 2 {
			frags = append(frags, f)
		}
	}
	if len(frags) < 2 {
		return &Result{}, nil
	}
	v := writeVersion(a.Schema)
	fnames0 := make([]string, len(frags))
	for i, f := range frags {
		fnames0[i] = f.Name
	}
	n, err := consolidatedName(fnames0, v)
	if err != nil {
		return nil, errkind.Wrap(errkind.DataLoss, err)
	}
	footers := make([][]byte, len(frags))
	fnames := make([]string, len(frags))
	off := uint64(4)
	for i, f := range frags {
		b, err := fragmeta.EncodeFooter(f.Meta.Footer())
		if err != nil {
			return nil, fmt.Errorf("fragment %s: footer: %w", f.Name, err)
		}
		if got, want := uint64(len(b)), f.Meta.Footer().Size; want != 0 && got != want {
			return nil, fmt.Errorf("fragment %s: footer re-encodes to %d bytes, not its %d", f.Name, got, want)
		}
		footers[i] = b
		fnames[i] = f.Name // v9+: the fragment's directory name
		if v < 9 {
			return nil, errkind.Errorf(errkind.Unimplemented, "format version %d: consolidated fragment metadata before version 9 names fragments by absolute URI", v)
		}
		off += 8 + uint64(len(fnames[i])) + 8
	}
	var p []byte
	p = binary.LittleEndian.AppendUint32(p, uint32(len(frags)))
	for i := range frags {
		p = binary.LittleEndian.AppendUint64(p, uint64(len(fnames[i])))
		p = append(p, fnames[i]...)
		p = binary.LittleEndian.AppendUint64(p, off)
		off += uint64(len(footers[i]))
	}
	for _, b := range footers {
		p = append(p, b...)
	}
	body, err := gentile.Encode(p, v, filterer(opt.EncryptionKey))
	if err != nil {
		return nil, err
	}
	key := names.FragmentMetaDir + "/" + n.WithExt(names.ExtMeta).String()
	if err := st.Put(ctx, storage.Join(dir, key), body); err != nil {
		return nil, err
	}
	out := &Result{Written: []string{key}}
	for _, f := range frags {
		out.Consolidated = append(out.Consolidated, f.Name)
	}
	return out, nil
}

// vacuumFragmentMeta removes every consolidated fragment metadata file but
// those with the latest end timestamp, as TileDB does.
func vacuumFragmentMeta(ctx context.Context, st storage.Store, dir string) ([]string, error) {
	files, err := listFiles(ctx, st, dir, names.FragmentMetaDir)
	if err != nil {
		return nil, err
	}
	var latest uint64
	ends := map[string]uint64{}
	for _, f := range files {
		n, err := names.Parse(f)
		if err != nil {
			continue
		}
		_, t2 := n.Range()
		ends[f] = t2
		latest = max(latest, t2)
	}
	var gone []string
	for f, t2 := range ends {
		if t2 != latest {
			p := names.FragmentMetaDir + "/" + f
			if err := st.Delete(ctx, storage.Join(dir, p)); err != nil {
				return gone, err
			}
			gone = append(gone, p)
		}
	}
	return gone, nil
}
