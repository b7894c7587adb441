package metrics

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tileflight/tileflight/storage"
)

// TestWrapStoreKeepsAbilities: the counted store can still do what the
// store below it can (a range read into the caller's buffer, a one-step
// directory put, a memory mapping, cleaning temporary litter), so turning
// metrics on changes neither the read path's speed nor what vacuum
// cleans; and the reads and writes are counted.
func TestWrapStoreKeepsAbilities(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	local, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []storage.Store{storage.NewMem(), local} {
		m := New()
		w := m.WrapStore(st)
		_, innerMap := st.(storage.Mapper)
		_, isMap := w.(storage.Mapper)
		if isMap != innerMap {
			t.Errorf("%T: Mapper %v, wrapped %v", st, innerMap, isMap)
		}
		for what, ok := range map[string]bool{
			"RangeReader": is[storage.RangeReader](w),
			"DirPutter":   is[storage.DirPutter](w),
			"TempCleaner": is[storage.TempCleaner](w),
		} {
			if !ok {
				t.Errorf("%T wrapped is not a %s", st, what)
			}
		}
		if err := storage.PutDir(ctx, w, "frag", []storage.File{{Name: "a", Data: []byte("hello")}}); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 3)
		if err := storage.ReadRange(ctx, w, "frag/a", 1, buf); err != nil || string(buf) != "ell" {
			t.Errorf("%T: ReadRange %q %v", st, buf, err)
		}
		if got := testutil.ToFloat64(m.storeReqs.WithLabelValues("get_range", "ok")); got != 1 {
			t.Errorf("%T: get_range counted %v times, want 1", st, got)
		}
		if got := testutil.ToFloat64(m.storeReqs.WithLabelValues("put_dir", "ok")); got != 1 {
			t.Errorf("%T: put_dir counted %v times, want 1", st, got)
		}
		if _, err := w.(storage.TempCleaner).CleanTemp(ctx, time.Hour); err != nil {
			t.Errorf("%T: CleanTemp: %v", st, err)
		}
	}
	// Litter a dead process left is found through the wrapper.
	litter := filepath.Join(dir, ".tfput-2147483646-dead") // no such process
	if err := os.WriteFile(litter, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(litter, old, old); err != nil {
		t.Fatal(err)
	}
	got, err := New().WrapStore(local).(storage.TempCleaner).CleanTemp(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(litter); !os.IsNotExist(err) || len(got.Names) != 1 {
		t.Errorf("litter through the wrapper: removed %v, stat %v", got.Names, err)
	}
}

func is[T any](v any) bool { _, ok := v.(T); return ok }
