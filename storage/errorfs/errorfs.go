// Package errorfs owns a fault-injecting storage.Store wrapper for tests:
// it counts operations and fails the ones an Injector picks, so that a
// test can make every step of a write fail in turn and check that nothing
// half-done ever becomes visible.
package errorfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/storage"
)

// ErrInjected is wrapped by every error this package makes up.
// Kind: Internal until a caller wraps it with the kind it knows
// (errkind.Fallback): whether the user or the stored data is at fault.
var ErrInjected error = errkind.New(errkind.Internal, errkind.Fallback, "injected storage fault")

// Op is a kind of store operation. Ops are bits so a set of kinds is an
// Op too (OpPut|OpDelete).
type Op uint8

const (
	OpGet Op = 1 << iota
	OpGetRange
	OpPut
	OpList
	OpDelete
	OpDeletePrefix
	OpStat

	// Mutating is every operation that changes the store.
	Mutating = OpPut | OpDelete | OpDeletePrefix
	// Reads is every operation that does not.
	Reads = OpGet | OpGetRange | OpList | OpStat
	// AllOps is every operation.
	AllOps = Mutating | Reads
)

var opNames = []string{"get", "get-range", "put", "list", "delete", "delete-prefix", "stat"}

func (o Op) String() string {
	var parts []string
	for i, n := range opNames {
		if o&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "|")
}

// Info describes one operation as it reaches the injector.
type Info struct {
	Op  Op
	Key string // the key, or the directory for List and DeletePrefix
	// Seq is the 0-based index of this operation among all operations
	// through the FS; MutSeq among the mutating ones (-1 for reads).
	Seq, MutSeq int64
}

// Injector decides whether an operation fails. A non-nil error fails it;
// FS wraps that error so it always matches ErrInjected.
type Injector interface {
	Inject(Info) error
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(Info) error

func (f InjectorFunc) Inject(i Info) error { return f(i) }

// FS is a storage.Store that passes operations to an inner store unless
// its injector fails them.
type FS struct {
	inner  storage.Store
	inj    Injector
	seq    atomic.Int64
	mutSeq atomic.Int64
	fails  atomic.Int64
}

var _ storage.Store = (*FS)(nil)

// Wrap returns inner behind inj; a nil inj never fails (the FS still
// counts).
func Wrap(inner storage.Store, inj Injector) *FS {
	return &FS{inner: inner, inj: inj}
}

// Ops is the number of operations seen so far.
func (f *FS) Ops() int64 { return f.seq.Load() }

// MutatingOps is the number of mutating operations seen so far: run a
// workload once with no faults to learn how many steps to fail in turn.
func (f *FS) MutatingOps() int64 { return f.mutSeq.Load() }

// Injected is the number of operations failed so far.
func (f *FS) Injected() int64 { return f.fails.Load() }

// Inner returns the wrapped store.
func (f *FS) Inner() storage.Store { return f.inner }

// lateErr marks an injected fault that strikes after the operation took
// effect: the caller sees an error, yet the store changed (a lost reply).
type lateErr struct{ err error }

func (l lateErr) Error() string { return l.err.Error() }
func (l lateErr) Unwrap() error { return l.err }

// Late makes inj's faults strike after the operation has been applied.
func Late(inj Injector) Injector {
	return InjectorFunc(func(i Info) error {
		if err := inj.Inject(i); err != nil {
			return lateErr{err}
		}
		return nil
	})
}

func (f *FS) check(op Op, key string) (late, early error) {
	info := Info{Op: op, Key: key, Seq: f.seq.Add(1) - 1, MutSeq: -1}
	if op&Mutating != 0 {
		info.MutSeq = f.mutSeq.Add(1) - 1
	}
	if f.inj == nil {
		return nil, nil
	}
	err := f.inj.Inject(info)
	if err == nil {
		return nil, nil
	}
	f.fails.Add(1)
	var le lateErr
	if errors.As(err, &le) {
		err = le.err
	}
	if !errors.Is(err, ErrInjected) {
		err = fmt.Errorf("%w: %w", ErrInjected, err)
	}
	// An injected OS error (Errno) is classified as storage.Local
	// classifies a real one.
	err = errkind.FromOS(fmt.Errorf("storage: %s %q (op %d): %w", op, key, info.Seq, err))
	if le.err != nil {
		return err, nil
	}
	return nil, err
}

func (f *FS) Get(ctx context.Context, key string) ([]byte, error) {
	late, early := f.check(OpGet, key)
	if early != nil {
		return nil, early
	}
	b, err := f.inner.Get(ctx, key)
	if err == nil && late != nil {
		return nil, late
	}
	return b, err
}

func (f *FS) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	late, early := f.check(OpGetRange, key)
	if early != nil {
		return nil, early
	}
	b, err := f.inner.GetRange(ctx, key, off, n)
	if err == nil && late != nil {
		return nil, late
	}
	return b, err
}

func (f *FS) Put(ctx context.Context, key string, data []byte) error {
	late, early := f.check(OpPut, key)
	if early != nil {
		return early
	}
	if err := f.inner.Put(ctx, key, data); err != nil {
		return err
	}
	return late
}

func (f *FS) List(ctx context.Context, dir string) ([]storage.Entry, error) {
	late, early := f.check(OpList, dir)
	if early != nil {
		return nil, early
	}
	es, err := f.inner.List(ctx, dir)
	if err == nil && late != nil {
		return nil, late
	}
	return es, err
}

func (f *FS) Delete(ctx context.Context, key string) error {
	late, early := f.check(OpDelete, key)
	if early != nil {
		return early
	}
	if err := f.inner.Delete(ctx, key); err != nil {
		return err
	}
	return late
}

func (f *FS) DeletePrefix(ctx context.Context, dir string) error {
	late, early := f.check(OpDeletePrefix, dir)
	if early != nil {
		return early
	}
	if err := f.inner.DeletePrefix(ctx, dir); err != nil {
		return err
	}
	return late
}

func (f *FS) Stat(ctx context.Context, key string) (storage.Entry, error) {
	late, early := f.check(OpStat, key)
	if early != nil {
		return storage.Entry{}, early
	}
	e, err := f.inner.Stat(ctx, key)
	if err == nil && late != nil {
		return storage.Entry{}, late
	}
	return e, err
}

// Never is an injector that fails nothing.
var Never Injector = InjectorFunc(func(Info) error { return nil })

// FailNth fails exactly the n-th (0-based) operation whose kind is in ops,
// counting only those. Use Mutating for "the n-th write".
func FailNth(n int64, ops Op) Injector {
	var count atomic.Int64
	return InjectorFunc(func(i Info) error {
		if i.Op&ops == 0 {
			return nil
		}
		if count.Add(1)-1 == n {
			return fmt.Errorf("%w: %s #%d", ErrInjected, ops, n)
		}
		return nil
	})
}

// FailFrom fails the n-th (0-based) operation whose kind is in ops and
// every later one of those kinds: a process that died at step n.
func FailFrom(n int64, ops Op) Injector {
	var count atomic.Int64
	return InjectorFunc(func(i Info) error {
		if i.Op&ops == 0 {
			return nil
		}
		if count.Add(1)-1 >= n {
			return fmt.Errorf("%w: %s from #%d", ErrInjected, ops, n)
		}
		return nil
	})
}

// FailMatching fails every operation whose kind is in ops and whose key
// satisfies match (nil matches every key).
func FailMatching(ops Op, match func(key string) bool) Injector {
	return InjectorFunc(func(i Info) error {
		if i.Op&ops != 0 && (match == nil || match(i.Key)) {
			return fmt.Errorf("%w: %s on a matching key", ErrInjected, i.Op)
		}
		return nil
	})
}

// KeyHasSuffix is a key predicate for FailMatching, e.g. ".wrt".
func KeyHasSuffix(s string) func(string) bool {
	return func(k string) bool { return strings.HasSuffix(k, s) }
}

// KeyContains is a key predicate for FailMatching, e.g. "/__commits/".
func KeyContains(s string) func(string) bool {
	return func(k string) bool { return strings.Contains(k, s) }
}

// Random fails each operation whose kind is in ops with probability p,
// drawing from a generator seeded with seed so that a failing run can be
// replayed. It is safe for concurrent use, though under concurrency the
// order of draws (and so which op fails) follows scheduling.
func Random(p float64, seed uint64, ops Op) Injector {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return InjectorFunc(func(i Info) error {
		if i.Op&ops == 0 {
			return nil
		}
		mu.Lock()
		hit := rng.Float64() < p
		mu.Unlock()
		if hit {
			return fmt.Errorf("%w: random %s (p=%g, seed=%d)", ErrInjected, i.Op, p, seed)
		}
		return nil
	})
}

// Any fails an operation when any of injs does (the first one's error).
// Every injector sees every operation, so counters stay in step.
func Any(injs ...Injector) Injector {
	return InjectorFunc(func(i Info) error {
		var first error
		for _, inj := range injs {
			if err := inj.Inject(i); err != nil && first == nil {
				first = err
			}
		}
		return first
	})
}

// Switch is an injector that can be turned on and off while a test runs.
type Switch struct {
	on  atomic.Bool
	Inj Injector
}

// Set turns the wrapped injector on or off.
func (s *Switch) Set(on bool) { s.on.Store(on) }

func (s *Switch) Inject(i Info) error {
	if !s.on.Load() || s.Inj == nil {
		return nil
	}
	return s.Inj.Inject(i)
}

// Errno makes inj's faults carry the operating-system error e, as the
// local store's would (a *fs.PathError): syscall.ENOSPC for a full disk,
// EDQUOT, EROFS, EIO. The FS classifies them with errkind.FromOS, as
// storage.Local does.
func Errno(inj Injector, e syscall.Errno) Injector {
	return InjectorFunc(func(i Info) error {
		err := inj.Inject(i)
		if err == nil {
			return nil
		}
		return fmt.Errorf("%w: %w", err, &fs.PathError{Op: i.Op.String(), Path: i.Key, Err: e})
	})
}
