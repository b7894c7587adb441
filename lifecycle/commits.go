package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/commits"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/writer"
)

// Back-compat bound of TileDB's ArraySchema::write_version: schemas older
// than this are written at the library's version.
const backCompatWritesMinVersion = 7

// writeVersion is the format version TileDB stamps on what it writes into
// an array whose newest schema is s.
func writeVersion(s *schema.ArraySchema) uint32 {
	if s.Version < backCompatWritesMinVersion {
		return writer.FormatVersion
	}
	return s.Version
}

// commitState is the __commits directory as TileDB's ArrayDirectory reads
// it in COMMITS mode.
type commitState struct {
	files []string // __commits entries (objects), sorted
	root  []string // array root objects, sorted
	// consolidated is every commit path named by a .con file and not
	// ignored, sorted; tiles holds the delete tiles .con files embed.
	consolidated []string
	inCon        map[string]bool
	tiles        map[string][]byte
	conRaw       map[string][]byte // .con path -> its bytes
}

func loadCommitState(ctx context.Context, st storage.Store, dir string) (*commitState, error) {
	cs := &commitState{inCon: map[string]bool{}, tiles: map[string][]byte{}, conRaw: map[string][]byte{}}
	var err error
	if cs.files, err = listFiles(ctx, st, dir, names.CommitsDir); err != nil {
		return nil, err
	}
	if cs.root, err = listFiles(ctx, st, dir, ""); err != nil {
		return nil, err
	}
	ignored := map[string]bool{}
	for _, f := range cs.files {
		if strings.HasSuffix(f, commits.SuffixIgnore) {
			b, err := st.Get(ctx, storage.Join(dir, names.CommitsDir, f))
			if err != nil {
				return nil, fmt.Errorf("ignore file %s: %w", f, err)
			}
			for _, l := range commits.DecodeIgnore(b) {
				ignored[l] = true
			}
		}
	}
	for _, f := range cs.files {
		if !strings.HasSuffix(f, commits.SuffixCon) {
			continue
		}
		p := names.CommitsDir + "/" + f
		b, err := st.Get(ctx, storage.Join(dir, p))
		if err != nil {
			return nil, fmt.Errorf("consolidated commits file %s: %w", p, err)
		}
		ents, err := commits.DecodeCon(b)
		if err != nil {
			return nil, errkind.Wrap(errkind.DataLoss, fmt.Errorf("%s: %w", p, err))
		}
		for _, e := range ents {
			if e.Tile != nil {
				cs.tiles[e.Path] = e.Tile
			}
			if ignored[e.Path] {
				continue
			}
			if !cs.inCon[e.Path] {
				cs.inCon[e.Path] = true
				cs.consolidated = append(cs.consolidated, e.Path)
			}
		}
		cs.conRaw[p] = b
	}
	sort.Strings(cs.consolidated)
	return cs, nil
}

// toConsolidate is TileDB's commit_uris_to_consolidate: the consolidated
// set, then legacy .ok files and .wrt/.del commits not in it.
func (cs *commitState) toConsolidate() []string {
	out := append([]string(nil), cs.consolidated...)
	for _, f := range cs.root {
		if strings.HasSuffix(f, commits.SuffixOK) && !cs.inCon[f] {
			out = append(out, f)
		}
	}
	for _, f := range cs.files {
		p := names.CommitsDir + "/" + f
		if (strings.HasSuffix(f, commits.SuffixWrite) || strings.HasSuffix(f, commits.SuffixDelete)) && !cs.inCon[p] {
			out = append(out, p)
		}
	}
	return out
}

func consolidateCommits(ctx context.Context, st storage.Store, dir string, key []byte) (*Result, error) {
	s, err := writer.LoadSchemaWith(ctx, st, dir, writer.ArrayOptions{EncryptionKey: key})
	if err != nil {
		return nil, err
	}
	v := writeVersion(s)
	if v < commits.VersionCommitsDir {
		return nil, errkind.Errorf(errkind.FailedPrecondition, "format version %d: commits are consolidated from version %d on", v, commits.VersionCommitsDir)
	}
	cs, err := loadCommitState(ctx, st, dir)
	if err != nil {
		return nil, err
	}
	list := cs.toConsolidate()
	if len(list) == 0 {
		return &Result{}, nil
	}
	var es []commits.ConEntry
	for _, p := range list {
		e := commits.ConEntry{Path: p}
		if e.IsDelete() || e.IsUpdate() {
			b, err := st.Get(ctx, storage.Join(dir, p))
			switch {
			case err == nil:
				e.Tile = b
			case errors.Is(err, storage.ErrNotFound) && cs.tiles[p] != nil:
				e.Tile = cs.tiles[p] // vacuumed after an earlier consolidation
			default:
				return nil, fmt.Errorf("delete commit %s: %w", p, err)
			}
		}
		es = append(es, e)
	}
	body, err := commits.EncodeCon(es)
	if err != nil {
		return nil, err
	}
	n, err := consolidatedName(list, v)
	if err != nil {
		return nil, errkind.Wrap(errkind.DataLoss, err)
	}
	conKey := names.CommitsDir + "/" + n.WithExt(names.ExtCon).String()
	// One object: the consolidated commits file names only commits that
	// are already in force, so it changes no reader's view.
	if err := st.Put(ctx, storage.Join(dir, conKey), body); err != nil {
		return nil, err
	}
	return &Result{Consolidated: list, Written: []string{conKey}}, nil
}

// vacuumCommits removes what TileDB's commits vacuum removes: commit
// files that a consolidated commits file names, and, when one
// consolidated commits file names every consolidated commit, the other
// consolidated commits files and the ignore files.
func vacuumCommits(ctx context.Context, st storage.Store, dir string) ([]string, error) {
	cs, err := loadCommitState(ctx, st, dir)
	if err != nil {
		return nil, err
	}
	var gone []string
	// TileDB reads each .con file line by line (getline over the raw
	// bytes, embedded delete tiles included): one whose every line is a
	// consolidated commit, covering them all, makes the others obsolete.
	var cover string
	for _, f := range cs.files {
		p := names.CommitsDir + "/" + f
		raw, ok := cs.conRaw[p]
		if !ok {
			continue
		}
		count, all := 0, true
		lines := strings.Split(string(raw), "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		for _, l := range lines {
			if !cs.inCon[l] {
				all = false
				break
			}
			count++
		}
		if all && count == len(cs.consolidated) {
			cover = p
			break
		}
	}
	have := map[string]bool{}
	for _, f := range cs.root {
		have[f] = true
	}
	for _, f := range cs.files {
		have[names.CommitsDir+"/"+f] = true
	}
	for _, p := range cs.consolidated {
		if have[p] {
			if err := st.Delete(ctx, storage.Join(dir, p)); err != nil {
				return gone, err
			}
			gone = append(gone, p)
		}
	}
	if cover != "" {
		// Other .con files before .ign files: an ignore file must outlive
		// every .con entry it vetoes.
		for _, suffix := range []string{commits.SuffixCon, commits.SuffixIgnore} {
			for _, f := range cs.files {
				p := names.CommitsDir + "/" + f
				if strings.HasSuffix(f, suffix) && p != cover {
					if err := st.Delete(ctx, storage.Join(dir, p)); err != nil {
						return gone, err
					}
					gone = append(gone, p)
				}
			}
		}
	}
	return gone, nil
}
