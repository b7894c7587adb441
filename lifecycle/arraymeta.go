package lifecycle

import (
	"context"
	"sort"
	"strings"

	"github.com/tileflight/tileflight/format/arraymeta"
	"github.com/tileflight/tileflight/format/commits"
	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/storage"
)

// consolidateArrayMeta writes what TileDB's ArrayMetaConsolidator writes:
// the metadata in force over the range as one __meta/__t1_t2_uuid file
// (t1, t2: the first and last file merged), then a .vac file beside it
// listing the files merged. The new file alone changes nothing a reader
// sees (it holds the merged values and sorts with the files it merges);
// the .vac file then hides those.
func consolidateArrayMeta(ctx context.Context, st storage.Store, dir string, opt Options) (*Result, error) {
	a, err := open(ctx, st, dir, opt, false)
	if err != nil {
		return nil, err
	}
	snap, err := a.Metadata(ctx)
	if err != nil {
		return nil, err
	}
	if len(snap.Applied) <= 1 {
		return &Result{}, nil
	}
	keys := make([]string, 0, len(snap.Values))
	for k := range snap.Values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	es := make([]arraymeta.Entry, 0, len(keys))
	for _, k := range keys {
		es = append(es, arraymeta.Entry{Key: k, Value: snap.Values[k]})
	}
	p, err := arraymeta.EncodePayload(es)
	if err != nil {
		return nil, err
	}
	v := writeVersion(a.Schema)
	body, err := gentile.Encode(p, v, filterer(opt.EncryptionKey))
	if err != nil {
		return nil, err
	}
	t1, _ := snap.Applied[0].Range()
	_, t2 := snap.Applied[len(snap.Applied)-1].Range()
	n := names.New(t1, t2, 0)
	metaKey := names.MetaKey(n)
	var lines, merged []string
	for _, m := range snap.Applied {
		merged = append(merged, names.MetaDir+"/"+m.String())
		lines = append(lines, commits.VacuumLine(names.MetaDir+"/"+m.String(), v, a.Dir))
	}
	if err := st.Put(ctx, storage.Join(dir, metaKey), body); err != nil {
		return nil, err
	}
	vacKey := metaKey + names.ExtVacuum
	if err := st.Put(ctx, storage.Join(dir, vacKey), commits.EncodeVacuum(lines)); err != nil {
		return nil, err
	}
	return &Result{Consolidated: merged, Written: []string{metaKey, vacKey}}, nil
}

// vacuumArrayMeta removes what TileDB's array metadata vacuum removes:
// the metadata files that vacuum files name, then those vacuum files.
func vacuumArrayMeta(ctx context.Context, st storage.Store, dir string) ([]string, error) {
	files, err := listFiles(ctx, st, dir, names.MetaDir)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, f := range files {
		have[f] = true
	}
	var gone, vacs []string
	for _, f := range files {
		if !strings.HasSuffix(f, names.ExtVacuum) {
			continue
		}
		// A vacuum file counts only beside the consolidated file it
		// belongs to (a crash may have left one without it? no: the
		// metadata file is written first).
		b, err := st.Get(ctx, storage.Join(dir, names.MetaDir, f))
		if err != nil {
			return gone, err
		}
		for _, line := range commits.DecodeVacuum(b) {
			base := lastSeg(strings.TrimRight(line, "/"))
			if have[base] {
				if err := st.Delete(ctx, storage.Join(dir, names.MetaDir, base)); err != nil {
					return gone, err
				}
				have[base] = false
				gone = append(gone, names.MetaDir+"/"+base)
			}
		}
		vacs = append(vacs, f)
	}
	for _, f := range vacs {
		if err := st.Delete(ctx, storage.Join(dir, names.MetaDir, f)); err != nil {
			return gone, err
		}
		gone = append(gone, names.MetaDir+"/"+f)
	}
	return gone, nil
}
