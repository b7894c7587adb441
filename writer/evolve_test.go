package writer

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/storage"
)

func TestEvolveSchema(t *testing.T) {
	ctx := context.Background()
	st := storage.NewMem()
	mustCreate(t, st, "a", sparseJSON)
	add := []json.RawMessage{json.RawMessage(`{"name": "n", "type": "int16", "nullable": true}`)}
	bad := []struct {
		name string
		add  []json.RawMessage
		drop []string
	}{
		{"nothing", nil, nil},
		{"drop a dimension", nil, []string{"x"}},
		{"drop unknown", nil, []string{"zz"}},
		{"drop twice", nil, []string{"v", "v"}},
		{"drop all", nil, []string{"v", "s"}},
		{"add existing", []json.RawMessage{json.RawMessage(`{"name": "v", "type": "int8"}`)}, nil},
		{"add a dimension's name", []json.RawMessage{json.RawMessage(`{"name": "x", "type": "int8"}`)}, nil},
		{"add bad type", []json.RawMessage{json.RawMessage(`{"name": "q", "type": "nope"}`)}, nil},
		{"add reserved", []json.RawMessage{json.RawMessage(`{"name": "__q", "type": "int8"}`)}, nil},
	}
	snap := snapshot(t, st, "a")
	for _, c := range bad {
		if _, err := EvolveSchema(ctx, st, "a", c.add, c.drop, 0, ArrayOptions{}); !errors.Is(err, errkind.InvalidArgument) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	requireKept(t, st, snap, "refused evolutions")
	if got := len(listAll(t, st, "a")); got != len(snap) {
		t.Fatalf("refused evolutions wrote files: %d, want %d", got, len(snap))
	}
	ns, err := EvolveSchema(ctx, st, "a", add, []string{"s"}, 9, ArrayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadSchema(ctx, st, "a")
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != ns.Name || len(s.Attributes) != 2 || s.Attributes[0].Name != "v" || s.Attributes[1].Name != "n" || !s.Attributes[1].Nullable {
		t.Fatalf("evolved schema %s: %+v", s.Name, s.Attributes)
	}
}
