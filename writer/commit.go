package writer

import (
	"context"
	"fmt"

	"github.com/tileflight/tileflight/format/commits"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/storage"
)

// writeFragments writes every fragment (data files and metadata), then
// makes them visible with one object: the fragment's .wrt commit file
// when there is one fragment, a consolidated commits file listing all of
// them otherwise. Nothing is visible until that last Put succeeds.
func writeFragments(ctx context.Context, st storage.Store, dir string, frags []*fragment, opt Options) (*Result, error) {
	if len(frags) == 0 {
		return &Result{}, nil
	}
	ts := opt.timestamp()
	res := &Result{}
	var ns []names.Name
	for _, fr := range frags {
		n := names.New(ts, ts, FormatVersion)
		if err := fr.write(ctx, st, dir, n, opt.Concurrency); err != nil {
			return nil, err
		}
		ns = append(ns, n)
		res.Fragments = append(res.Fragments, n.String())
	}
	var key string
	var body []byte
	if len(ns) == 1 {
		k, _ := names.CommitKey(ns[0])
		key = k
	} else {
		var es []commits.ConEntry
		for _, n := range ns {
			k, _ := names.CommitKey(n)
			es = append(es, commits.ConEntry{Path: k})
		}
		b, err := commits.EncodeCon(es)
		if err != nil {
			return nil, err
		}
		body = b
		key = names.CommitsDir + "/" + names.New(ts, ts, FormatVersion).WithExt(names.ExtCon).String()
	}
	if body == nil {
		body = []byte{}
	}
	if err := st.Put(ctx, storage.Join(dir, key), body); err != nil {
		return nil, fmt.Errorf("commit %s: %w", key, err)
	}
	res.Commit = key
	return res, nil
}
