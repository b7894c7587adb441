package writer

import (
	"context"
	"errors"
	"fmt"

	"github.com/tileflight/tileflight/format/commits"
	"github.com/tileflight/tileflight/format/fragmeta"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/storage"
)

// written is a fragment stored but not yet committed.
type written struct {
	name names.Name
	meta *fragmeta.Metadata
	fr   *fragment // the geometry (tiles, MBRs); its tile source is dropped
}

// logicalWrite is what the one-shot and the streaming writers share: the
// fragments of one logical write, all stamped ts, made visible together
// by one commit object written last, or deleted together.
type logicalWrite struct {
	st   storage.Store
	dir  string
	ts   uint64
	ts0  uint64 // first timestamp of the names (ts0 <= ts); 0 = ts
	conc int
	key  []byte // the array's encryption key, if any
	done []written
}

func (lw *logicalWrite) start() uint64 {
	if lw.ts0 != 0 && lw.ts0 <= lw.ts {
		return lw.ts0
	}
	return lw.ts
}

func (lw *logicalWrite) add(ctx context.Context, fr *fragment) (*written, error) {
	n := names.New(lw.start(), lw.ts, FormatVersion)
	m, err := fr.write(ctx, lw.st, lw.dir, n, lw.conc, genericFilterer(lw.key))
	if err != nil {
		// Whatever part of it reached the store goes too.
		lw.done = append(lw.done, written{name: n})
		return nil, err
	}
	fr.tile = nil
	lw.done = append(lw.done, written{name: n, meta: m, fr: fr})
	return &lw.done[len(lw.done)-1], nil
}

// addBuilt is add for a fragment whose tiles are already filtered (outs,
// see fragment.writeOuts).
func (lw *logicalWrite) addBuilt(ctx context.Context, fr *fragment, outs [][]tileOut) error {
	n := names.New(lw.start(), lw.ts, FormatVersion)
	m, err := fr.writeOuts(ctx, lw.st, lw.dir, n, outs, genericFilterer(lw.key))
	if err != nil {
		lw.done = append(lw.done, written{name: n})
		return err
	}
	fr.tile = nil
	lw.done = append(lw.done, written{name: n, meta: m, fr: fr})
	return nil
}

// commit makes every fragment visible with one object: the fragment's .wrt
// commit file when there is one fragment, a consolidated commits file
// listing all of them otherwise.
func (lw *logicalWrite) commit(ctx context.Context) (*Result, error) {
	res := &Result{}
	if len(lw.done) == 0 {
		return res, nil
	}
	var key string
	var body []byte
	if len(lw.done) == 1 {
		key, _ = names.CommitKey(lw.done[0].name)
	} else {
		var es []commits.ConEntry
		for _, w := range lw.done {
			k, _ := names.CommitKey(w.name)
			es = append(es, commits.ConEntry{Path: k})
		}
		b, err := commits.EncodeCon(es)
		if err != nil {
			return nil, err
		}
		body = b
		key = names.CommitsDir + "/" + names.New(lw.start(), lw.ts, FormatVersion).WithExt(names.ExtCon).String()
	}
	if body == nil {
		body = []byte{}
	}
	if err := lw.st.Put(ctx, storage.Join(lw.dir, key), body); err != nil {
		return nil, fmt.Errorf("commit %s: %w", key, err)
	}
	for _, w := range lw.done {
		res.Fragments = append(res.Fragments, w.name.String())
	}
	res.Commit = key
	lw.done = nil
	return res, nil
}

// stage hands the written fragments over uncommitted: they are no longer
// the writer's to delete.
func (lw *logicalWrite) stage() *Result {
	res := &Result{Fragments: []string{}}
	for _, w := range lw.done {
		res.Fragments = append(res.Fragments, w.name.String())
	}
	lw.done = nil
	return res
}

// abort deletes the uncommitted fragments, even when ctx is already
// cancelled (a client going away is the usual reason to abort). What it
// cannot delete stays invisible: no commit names it.
func (lw *logicalWrite) abort(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	for _, w := range lw.done {
		if err := removeFragment(ctx, lw.st, lw.dir, w.name); err != nil {
			errs = append(errs, fmt.Errorf("removing uncommitted fragment %s: %w", w.name, err))
		}
	}
	lw.done = nil
	return errors.Join(errs...)
}

// writeFragments writes and commits the fragments of a one-shot write;
// on failure it removes what it wrote.
func writeFragments(ctx context.Context, st storage.Store, dir string, frags []*fragment, opt Options) (*Result, error) {
	lw := &logicalWrite{st: st, dir: dir, ts: opt.timestamp(), ts0: opt.TimestampStart, conc: opt.Concurrency, key: opt.EncryptionKey}
	for _, fr := range frags {
		if _, err := lw.add(ctx, fr); err != nil {
			lw.abort(ctx)
			return nil, err
		}
	}
	// A failed commit Put may still have landed (a lost reply): the
	// fragments stay, invisible leftovers if it did not.
	return lw.commit(ctx)
}
