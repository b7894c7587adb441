package flightsvc

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tileflight/tileflight/storage"
)

// vacuum removes the hidden staging entries a killed process left at the
// data directory's root (older than TempGrace), and reports them.
func TestVacuumRemovesLitter(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, Config{Store: st, TempGrace: time.Minute})
	if _, err := action(ctx, c, "create_array", `{"array":"a","type":"sparse","dimensions":[{"name":"k","type":"int64","domain":[0,1000],"tile":10}],
		"attributes":[{"name":"v","type":"int32"}]}`); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	for _, name := range []string{".tfput-0123456789abcdef", ".tfput-fresh0123456789"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("litter"), 0o644); err != nil {
			t.Fatal(err)
		}
		if name != ".tfput-fresh0123456789" {
			os.Chtimes(p, old, old)
		}
	}
	body, err := action(ctx, c, "vacuum", `{"array":"a"}`)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Temp storage.TempCleaned `json:"temp"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Temp.Names) != 1 || res.Temp.Names[0] != ".tfput-0123456789abcdef" || res.Temp.Bytes != 6 {
		t.Fatalf("vacuum removed %+v, want the old entry only", res.Temp)
	}
	if _, err := os.Stat(filepath.Join(dir, ".tfput-fresh0123456789")); err != nil {
		t.Fatal("a fresh entry was removed")
	}
}
