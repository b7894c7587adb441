package compact

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/tileflight/tileflight/storage"
)

// LeaseDir is the directory, inside an array, that holds its compaction
// lease. TileDB ignores it: a name with a dot is never a fragment, and it
// is none of the directories TileDB reads.
const LeaseDir = "__tileflight_compact.lease"

// ErrLeaseLost says that another node took the lease over (it had
// expired: this node stalled longer than the lease lasts).
var ErrLeaseLost = errors.New("compaction lease taken over by another node")

// leaseRecord is one lease object: who holds it and until when.
type leaseRecord struct {
	Owner string `json:"owner"`
	// Expires is when the lease ends (ms since the epoch); 0: released.
	Expires int64 `json:"expires"`
}

// Leases hands out per-array compaction leases over a store shared by
// every node. A lease is a generation of objects LeaseDir/<n>, n counting
// up: the holder of the highest generation holds the lease until its
// expiry and renews it in place; anyone may take an expired (or
// released) lease over by creating generation n+1, which the store's
// conditional create (storage.Creator) grants to exactly one node. Older
// generations are deleted by the new holder. A store without conditional
// creates gets a best-effort stand-in: the object is written when it is
// missing and read back.
type Leases struct {
	st    storage.Store
	owner string
	ttl   time.Duration
	now   func() time.Time
}

// NewLeases returns leases held by owner (unique to this process) that
// last ttl unless renewed.
func NewLeases(st storage.Store, owner string, ttl time.Duration) *Leases {
	return &Leases{st: st, owner: owner, ttl: ttl, now: time.Now}
}

// Lease is a held lease.
type Lease struct {
	l     *Leases
	array string
	gen   uint64
}

func (l *Leases) key(array string, gen uint64) string {
	return storage.Join(array, LeaseDir, fmt.Sprintf("%020d", gen))
}

func (l *Leases) record(expires time.Time) []byte {
	b, _ := json.Marshal(leaseRecord{Owner: l.owner, Expires: expires.UnixMilli()})
	return b
}

// generations lists the lease objects of array, lowest first.
func (l *Leases) generations(ctx context.Context, array string) ([]uint64, error) {
	es, err := l.st.List(ctx, storage.Join(array, LeaseDir))
	if err != nil {
		return nil, err
	}
	var gens []uint64
	for _, e := range es {
		if e.IsDir {
			continue
		}
		if g, err := strconv.ParseUint(e.Name, 10, 64); err == nil {
			gens = append(gens, g)
		}
	}
	sort.Slice(gens, func(i, j int) bool { return gens[i] < gens[j] })
	return gens, nil
}

func (l *Leases) read(ctx context.Context, array string, gen uint64) (leaseRecord, error) {
	var r leaseRecord
	b, err := l.st.Get(ctx, l.key(array, gen))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		// A damaged lease object holds nothing: it counts as expired.
		return leaseRecord{}, nil
	}
	return r, nil
}

// Acquire takes array's lease, or returns nil (and no error) when another
// node holds it.
func (l *Leases) Acquire(ctx context.Context, array string) (*Lease, error) {
	gens, err := l.generations(ctx, array)
	if err != nil {
		return nil, fmt.Errorf("compaction lease of %q: %w", array, err)
	}
	next := uint64(1)
	if len(gens) > 0 {
		top := gens[len(gens)-1]
		r, err := l.read(ctx, array, top)
		switch {
		case errors.Is(err, storage.ErrNotFound):
			// Deleted meanwhile (the array was dropped): try the next.
		case err != nil:
			return nil, fmt.Errorf("compaction lease of %q: %w", array, err)
		case r.Owner == l.owner:
			h := &Lease{l: l, array: array, gen: top}
			return h, h.write(ctx)
		case r.Expires > l.now().UnixMilli():
			return nil, nil
		}
		next = top + 1
	}
	h := &Lease{l: l, array: array, gen: next}
	err = l.create(ctx, l.key(array, next), l.record(l.now().Add(l.ttl)))
	if errors.Is(err, storage.ErrExists) {
		// Another node was faster, or a retried create of ours landed
		// twice: the object says which.
		r, rerr := l.read(ctx, array, next)
		if rerr != nil || r.Owner != l.owner {
			return nil, nil
		}
		err = nil
	}
	if err != nil {
		return nil, fmt.Errorf("compaction lease of %q: %w", array, err)
	}
	for _, g := range gens {
		if g < next {
			l.st.Delete(ctx, l.key(array, g)) // best effort: the next holder retries
		}
	}
	return h, nil
}

func (l *Leases) create(ctx context.Context, key string, data []byte) error {
	if c, ok := l.st.(storage.Creator); ok {
		err := c.Create(ctx, key, data)
		if !errors.Is(err, errors.ErrUnsupported) {
			return err
		}
	}
	// Best effort without a conditional create: write when missing, then
	// read back (a node writing at the same moment may still win later).
	if _, err := l.st.Stat(ctx, key); err == nil {
		return fmt.Errorf("%s: %w", key, storage.ErrExists)
	}
	if err := l.st.Put(ctx, key, data); err != nil {
		return err
	}
	b, err := l.st.Get(ctx, key)
	if err != nil {
		return err
	}
	if string(b) != string(data) {
		return fmt.Errorf("%s: %w", key, storage.ErrExists)
	}
	return nil
}

func (h *Lease) write(ctx context.Context) error {
	return h.l.st.Put(ctx, h.l.key(h.array, h.gen), h.l.record(h.l.now().Add(h.l.ttl)))
}

// Renew extends the lease by the lease time from now. It fails with
// ErrLeaseLost when a newer generation exists (another node took over).
func (h *Lease) Renew(ctx context.Context) error {
	gens, err := h.l.generations(ctx, h.array)
	if err != nil {
		return fmt.Errorf("renewing the compaction lease of %q: %w", h.array, err)
	}
	if len(gens) == 0 || gens[len(gens)-1] > h.gen {
		// Taken over, or the array (and its lease) was dropped.
		return fmt.Errorf("array %q: %w", h.array, ErrLeaseLost)
	}
	if err := h.write(ctx); err != nil {
		return fmt.Errorf("renewing the compaction lease of %q: %w", h.array, err)
	}
	return nil
}

// Release ends the lease at once (the object stays, expired, so that
// generations keep counting up). A lease taken over meanwhile is left
// alone.
func (h *Lease) Release(ctx context.Context) error {
	gens, err := h.l.generations(ctx, h.array)
	if err != nil {
		return err
	}
	if len(gens) == 0 || gens[len(gens)-1] != h.gen {
		return nil
	}
	b, _ := json.Marshal(leaseRecord{Owner: h.l.owner})
	return h.l.st.Put(ctx, h.l.key(h.array, h.gen), b)
}
