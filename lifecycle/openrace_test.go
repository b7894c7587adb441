package lifecycle

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
	"github.com/tileflight/tileflight/writer"
)

// vacuumingStore plays the last step of a fragments vacuum under an open:
// each read of a .vac file finds that the vacuum has just removed it (as
// a vacuum does, one .vac file after another, once their fragments are
// gone). Files in stuck are listed but never readable (damage, not a
// vacuum).
type vacuumingStore struct {
	*storage.Mem
	mu    sync.Mutex
	stuck map[string]bool
	reads map[string]int
}

func (s *vacuumingStore) Get(ctx context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	s.reads[key]++
	stuck := s.stuck[key]
	s.mu.Unlock()
	if stuck {
		return nil, errors.Join(errors.New("storage: get "+key), storage.ErrNotFound)
	}
	if strings.HasSuffix(key, names.ExtVacuum) {
		if err := s.Mem.Delete(ctx, key); err != nil {
			return nil, err
		}
	}
	return s.Mem.Get(ctx, key)
}

// vacuumHalfDone returns an array whose fragments three consolidations
// superseded are vacuumed while their three .vac files are still there,
// and what a reader sees of it.
func vacuumHalfDone(t *testing.T) (*vacuumingStore, string, []string) {
	t.Helper()
	ctx := context.Background()
	st := build(t, sparseJSON)
	s, err := writer.LoadSchema(ctx, st, "a")
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		if round > 0 {
			for _, ts := range []int64{int64(2*round + 2), int64(2*round + 3)} {
				cols := map[string]writer.Column{"x": {Data: i64s(100 + ts)}, "v": {Data: i64s(ts)}}
				if _, err := writer.WriteSparse(ctx, st, "a", s, cols, writer.Options{Timestamp: uint64(ts)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := Consolidate(ctx, st, "a", Fragments, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	want := view(t, st)
	vacs := map[string][]byte{}
	es, err := st.List(ctx, storage.Join("a", names.CommitsDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if strings.HasSuffix(e.Name, names.ExtVacuum) {
			key := storage.Join("a", names.CommitsDir, e.Name)
			if vacs[key], err = st.Get(ctx, key); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(vacs) != 3 {
		t.Fatalf("%d .vac files, want 3", len(vacs))
	}
	if _, err := Vacuum(ctx, st, "a", Fragments, VacuumOptions{}); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for key, b := range vacs {
		if err := st.Put(ctx, key, b); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
	}
	return &vacuumingStore{Mem: st, stuck: map[string]bool{}, reads: map[string]int{}}, want, keys
}

// TestOpenRacingVacuum: an open that meets a vacuum removing its .vac
// files one after another lists the array again each time and sees the
// state after the vacuum (three in a row failed the DoGets of
// test_compaction.py); a listed file that stays unreadable fails at the
// second try, as damage.
func TestOpenRacingVacuum(t *testing.T) {
	ctx := context.Background()
	st, want, _ := vacuumHalfDone(t)
	a, err := tdbarray.Open(ctx, st, "a", tdbarray.Options{})
	if err != nil {
		t.Fatalf("open racing the vacuum: %v", err)
	}
	if len(a.Fragments) != 1 {
		t.Fatalf("%d fragments visible, want the last consolidation's", len(a.Fragments))
	}
	if got := view(t, st.Mem); got != want {
		t.Fatalf("after the race:\n%s\nwant\n%s", got, want)
	}

	st, _, keys := vacuumHalfDone(t)
	st.stuck[keys[0]] = true
	_, err = tdbarray.Open(ctx, st, "a", tdbarray.Options{})
	if !errors.Is(err, storage.ErrNotFound) || !strings.Contains(err.Error(), keys[0][len("a/"):]) {
		t.Fatalf("open with an unreadable .vac file: %v, want not found naming it", err)
	}
	if k := errkind.Of(err); k != errkind.DataLoss && k != nil {
		t.Fatalf("kind %v", k)
	}
	if n := st.reads[keys[0]]; n != 2 {
		t.Fatalf("the unreadable file was read %d times, want 2 (damage is not retried)", n)
	}
}
