package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/internal/fixtures"
)

// flightd inspect on every array TileDB wrote shows its dimensions,
// attributes, types, filters and every fragment TileDB reported.
func TestInspectShowsWhatTileDBReports(t *testing.T) {
	for _, c := range fixtures.Cases(t) {
		t.Run(c.Name, func(t *testing.T) {
			args := []string{c.Dir}
			if c.Expect.Encryption != nil {
				args = []string{"-key", c.Expect.Encryption.Key, c.Dir}
			}
			var out, errb bytes.Buffer
			if code := runInspect(args, &out, &errb); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			report := out.String()
			want := []string{"type " + c.Expect.Schema.Type}
			for _, d := range c.Expect.Schema.Dimensions {
				want = append(want, "  "+d.Name+"  ", d.Type)
				for _, f := range d.Filters {
					want = append(want, f.Name)
				}
			}
			for _, a := range c.Expect.Schema.Attributes {
				want = append(want, "  "+a.Name+"  ", a.Type)
				for _, f := range a.Filters {
					want = append(want, f.Name)
				}
			}
			for _, f := range c.Expect.Fragments {
				want = append(want, f.Name)
			}
			for k := range c.Expect.Metadata.Values {
				want = append(want, "  "+k+" = ")
			}
			for _, w := range want {
				if !strings.Contains(report, w) {
					t.Errorf("report lacks %q:\n%s", w, report)
				}
			}
		})
	}
}

func TestInspectErrors(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runInspect([]string{t.TempDir()}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "no such array") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if code := runInspect(nil, &out, &errb); code != 2 {
		t.Fatalf("no path: exit %d", code)
	}
}

func TestInspectJSON(t *testing.T) {
	c, ok := fixtures.Find(t, "sparse_string_dim")
	if !ok {
		t.Skip("case not in this fixture set")
	}
	var out, errb bytes.Buffer
	if code := runInspect([]string{"-json", c.Dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), `"type":"sparse"`) && !strings.Contains(out.String(), `"type": "sparse"`) {
		t.Fatalf("%s", out.String())
	}
}
