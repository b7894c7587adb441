package flightsvc

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	arrarray "github.com/apache/arrow-go/v18/arrow/array"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tileflight/tileflight/storage"
)

type notes struct {
	mu  sync.Mutex
	got []string
}

func (n *notes) Notify(array string, fragments int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.got = append(n.got, fmt.Sprint(array, ":", fragments))
}

func (n *notes) String() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return fmt.Sprint(n.got)
}

// Committed writes notify the compaction policy (DoPut, commit_fragments),
// staged and failed ones do not; describe reports the fragments and the
// last consolidation, and its output still creates an array.
func TestCompactionNotifyAndDescribe(t *testing.T) {
	ctx := context.Background()
	n := &notes{}
	c := serve(t, Config{Store: storage.NewMem(), Compaction: n})
	sch := `{"array":"a","type":"sparse","dimensions":[{"name":"k","type":"int64","domain":[0,1000],"tile":10}],"attributes":[{"name":"v","type":"int32"}]}`
	created, err := action(ctx, c, "create_array", sch)
	if err != nil {
		t.Fatal(err)
	}
	b := arrarray.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: arrow.PrimitiveTypes.Int32}}, nil))
	b.Field(0).(*arrarray.Int64Builder).AppendValues([]int64{1, 2}, nil)
	b.Field(1).(*arrarray.Int32Builder).AppendValues([]int32{10, 20}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	path := &aflight.FlightDescriptor{Type: aflight.DescriptorPATH, Path: []string{"a"}}
	staged := &aflight.FlightDescriptor{Type: aflight.DescriptorCMD, Cmd: []byte(`{"array":"a","stage":true}`)}
	for range 2 {
		if _, err := doPut(ctx, c, path, rec); err != nil {
			t.Fatal(err)
		}
	}
	res, err := doPut(ctx, c, staged, rec)
	if err != nil {
		t.Fatal(err)
	}
	if got := n.String(); got != "[a:1 a:1]" {
		t.Fatalf("after two writes and a staged one: %s", got)
	}
	frags, _ := json.Marshal(res["fragments"])
	if _, err := action(ctx, c, "commit_fragments", `{"array":"a","fragments":`+string(frags)+`}`); err != nil {
		t.Fatal(err)
	}
	if _, err := action(ctx, c, "commit_fragments", `{"array":"a","fragments":`+string(frags)+`}`); err != nil {
		t.Fatal(err) // a retry: nothing new committed, nothing notified
	}
	if got := n.String(); got != "[a:1 a:1 a:1]" {
		t.Fatalf("after commit_fragments: %s", got)
	}

	type desc struct {
		Count int `json:"fragment_count"`
		Last  *struct {
			Fragment   string    `json:"fragment"`
			Timestamps [2]uint64 `json:"timestamps"`
		} `json:"last_compaction"`
	}
	describe := func() (desc, []byte) {
		raw, err := action(ctx, c, "describe", `{"array":"a"}`)
		if err != nil {
			t.Fatal(err)
		}
		var d desc
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		return d, raw
	}
	var cr desc
	if err := json.Unmarshal(created, &cr); err != nil || cr.Count != 0 || cr.Last != nil {
		t.Fatalf("create_array answered %s", created)
	}
	if d, raw := describe(); d.Count != 3 || d.Last != nil {
		t.Fatalf("before consolidating: %s", raw)
	}
	if _, err := action(ctx, c, "consolidate", `{"array":"a"}`); err != nil {
		t.Fatal(err)
	}
	d, raw := describe()
	if d.Count != 1 || d.Last == nil || d.Last.Timestamps[0] >= d.Last.Timestamps[1] {
		t.Fatalf("after consolidating: %s", raw)
	}
	// describe's output (with its own members) creates an array like it.
	var obj map[string]any
	json.Unmarshal(raw, &obj)
	obj["array"] = "b"
	body, _ := json.Marshal(obj)
	if _, err := action(ctx, c, "create_array", string(body)); err != nil {
		t.Fatalf("create_array from describe's output: %v", err)
	}
}
