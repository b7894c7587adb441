package sparse

import (
	"fmt"
	"slices"

	"github.com/tileflight/tileflight/reader/tileio"
)

// The working set of a sparse read is what it must hold at once to make
// progress: one tile for a read of tiles in sequence, the current tile of
// every fragment for a merge, every tile of a slab for a sorted read.
// Those loads overdraw the memory budget rather than wait for it (waiting
// could only be for the read itself), so the working set is measured here
// before anything loads and refused when it is beyond the loader's limit.

// jobCharge bounds the decoded bytes loading one tile job may take: every
// field load could touch.
func (r *Reader) jobCharge(j *tileJob) (int64, error) {
	f := j.frag.f
	var names []string
	for _, di := range r.dims {
		names = append(names, di.name)
	}
	if j.frag.hasTS {
		names = append(names, tileio.FieldTimestamps)
	}
	if j.frag.hasDelMeta {
		names = append(names, tileio.FieldDeleteTimestamp)
	}
	names = append(names, r.attrCols(f)...)
	for _, cu := range j.frag.conds {
		for _, name := range cu.c.fields {
			if f.Schema.AttributeIndex(name) >= 0 {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	total := int64(0)
	for _, name := range names {
		c, err := r.loader.Charge(f, name, j.tile)
		if err != nil {
			return 0, dataLoss(fmt.Errorf("array %s: %w", r.arr.Dir, err))
		}
		total += c
	}
	return total, nil
}

// checkWorkingSet measures the working set of the chosen strategy.
func (r *Reader) checkWorkingSet() error {
	switch s := r.src.(type) {
	case *mergeSource:
		need := int64(0)
		for _, f := range r.frags {
			most := int64(0)
			for _, j := range f.jobs {
				c, err := r.jobCharge(j)
				if err != nil {
					return err
				}
				most = max(most, c)
			}
			need += most
		}
		return r.loader.CheckWorkingSet(need, fmt.Sprintf("merging %d fragments (one tile of each)", len(s.all)))
	case *sortSource:
		for ci := range s.chunks {
			need := int64(0)
			for _, j := range s.chunks[ci].jobs {
				c, err := r.jobCharge(j)
				if err != nil {
					return err
				}
				need += c
			}
			if err := r.loader.CheckWorkingSet(need, fmt.Sprintf("sorting a slab of %d overlapping tiles", len(s.chunks[ci].jobs))); err != nil {
				return err
			}
		}
	case *concatSource:
		for _, j := range s.p.jobs {
			c, err := r.jobCharge(j)
			if err != nil {
				return err
			}
			if err := r.loader.CheckWorkingSet(c, "one tile"); err != nil {
				return err
			}
		}
	}
	return nil
}
