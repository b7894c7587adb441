package storage

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"time"
)

// Mem is an in-memory Store. Directories exist only as prefixes of keys,
// as in an object store: there are no empty directories.
type Mem struct {
	mu sync.RWMutex
	// createMu serializes Create's check and write.
	createMu sync.Mutex
	objs     map[string]memObj
	now      func() time.Time
}

type memObj struct {
	data []byte
	mod  time.Time
}

var _ Store = (*Mem)(nil)

// NewMem returns an empty in-memory store.
func NewMem() *Mem { return &Mem{objs: map[string]memObj{}, now: time.Now} }

// Keys returns every key in the store, sorted; handy in tests.
func (m *Mem) Keys() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]string, 0, len(m.objs))
	for k := range m.objs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (m *Mem) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ctxErr(ctx, "get", key); err != nil {
		return nil, err
	}
	if _, err := CleanKey(key); err != nil {
		return nil, fmt.Errorf("storage: get: %w", err)
	}
	m.mu.RLock()
	o, ok := m.objs[key]
	m.mu.RUnlock()
	if !ok {
		return nil, notFound("get", key)
	}
	// Objects are immutable once stored, but callers may scribble on what
	// they get back, so they get their own copy.
	return append([]byte(nil), o.data...), nil
}

func (m *Mem) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := ctxErr(ctx, "get range", key); err != nil {
		return nil, err
	}
	if _, err := CleanKey(key); err != nil {
		return nil, fmt.Errorf("storage: get range: %w", err)
	}
	m.mu.RLock()
	o, ok := m.objs[key]
	m.mu.RUnlock()
	if !ok {
		return nil, notFound("get range", key)
	}
	if err := checkRange(key, off, n, int64(len(o.data))); err != nil {
		return nil, err
	}
	return append([]byte(nil), o.data[off:off+n]...), nil
}

func (m *Mem) Put(ctx context.Context, key string, data []byte) error {
	if err := ctxErr(ctx, "put", key); err != nil {
		return err
	}
	if _, err := CleanKey(key); err != nil {
		return fmt.Errorf("storage: put: %w", err)
	}
	cp := append([]byte(nil), data...)
	m.mu.Lock()
	defer m.mu.Unlock()
	// Mirror a filesystem: a key cannot live below an object, nor replace
	// a "directory" that has keys under it.
	for d := path.Dir(key); d != "."; d = path.Dir(d) {
		if _, ok := m.objs[d]; ok {
			return fmt.Errorf("storage: put %q: %q is an object, not a directory", key, d)
		}
	}
	if m.hasChildrenLocked(key) {
		return fmt.Errorf("storage: put %q: is a directory", key)
	}
	m.objs[key] = memObj{data: cp, mod: m.now()}
	return nil
}

func (m *Mem) hasChildrenLocked(dir string) bool {
	p := dir + "/"
	for k := range m.objs {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

func (m *Mem) List(ctx context.Context, dir string) ([]Entry, error) {
	if err := ctxErr(ctx, "list", dir); err != nil {
		return nil, err
	}
	d, err := cleanDir(dir)
	if err != nil {
		return nil, fmt.Errorf("storage: list: %w", err)
	}
	prefix := ""
	if d != "" {
		prefix = d + "/"
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	seen := map[string]int{}
	out := []Entry{}
	for k, o := range m.objs {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		rest := k[len(prefix):]
		name, _, deeper := strings.Cut(rest, "/")
		if i, ok := seen[name]; ok {
			if deeper && o.mod.After(out[i].ModTime) {
				out[i].ModTime = o.mod
			}
			continue
		}
		seen[name] = len(out)
		e := Entry{Name: name, IsDir: deeper, ModTime: o.mod}
		if !deeper {
			e.Size = int64(len(o.data))
		}
		out = append(out, e)
	}
	sortEntries(out)
	return out, nil
}

func (m *Mem) Delete(ctx context.Context, key string) error {
	if err := ctxErr(ctx, "delete", key); err != nil {
		return err
	}
	if _, err := CleanKey(key); err != nil {
		return fmt.Errorf("storage: delete: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objs[key]; !ok && m.hasChildrenLocked(key) {
		return fmt.Errorf("storage: delete %q: is a directory (use DeletePrefix)", key)
	}
	delete(m.objs, key)
	return nil
}

func (m *Mem) DeletePrefix(ctx context.Context, dir string) error {
	if err := ctxErr(ctx, "delete prefix", dir); err != nil {
		return err
	}
	d, err := cleanDir(dir)
	if err != nil {
		return fmt.Errorf("storage: delete prefix: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.objs {
		if d == "" || strings.HasPrefix(k, d+"/") {
			delete(m.objs, k)
		}
	}
	return nil
}

func (m *Mem) Stat(ctx context.Context, key string) (Entry, error) {
	if err := ctxErr(ctx, "stat", key); err != nil {
		return Entry{}, err
	}
	if key == "" {
		return Entry{IsDir: true}, nil
	}
	if _, err := CleanKey(key); err != nil {
		return Entry{}, fmt.Errorf("storage: stat: %w", err)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if o, ok := m.objs[key]; ok {
		return Entry{Name: path.Base(key), Size: int64(len(o.data)), ModTime: o.mod}, nil
	}
	e := Entry{Name: path.Base(key), IsDir: true}
	found := false
	for k, o := range m.objs {
		if strings.HasPrefix(k, key+"/") {
			found = true
			if o.mod.After(e.ModTime) {
				e.ModTime = o.mod
			}
		}
	}
	if !found {
		return Entry{}, notFound("stat", key)
	}
	return e, nil
}

func sortEntries(es []Entry) {
	sort.Slice(es, func(i, j int) bool { return es[i].Name < es[j].Name })
}
