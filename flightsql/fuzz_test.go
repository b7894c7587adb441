package flightsql

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tileflight/tileflight/flight"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/writer"
)

// FuzzHandle: statement handles come back from clients; any bytes are
// refused or decoded, never a panic.
func FuzzHandle(f *testing.F) {
	f.Add([]byte(`{"sql":"SELECT 1","params":[[{"k":"int","v":"1"}]]}`))
	f.Add([]byte(`{"sql":""}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHandle(b)
		if err == nil {
			for _, row := range h.Params {
				for _, p := range row {
					_ = p.expr()
				}
			}
			_ = countParams(h.SQL)
		}
		s := string(b)
		_ = likePattern(&s)
	})
}

// FuzzStatement: any statement text compiles or fails with an error
// (syntax errors, Unimplemented, ...); compile never panics.
func FuzzStatement(f *testing.F) {
	ctx := context.Background()
	st := storage.NewMem()
	sch, err := schema.FromJSON([]byte(`{"type":"sparse","dimensions":[{"name":"k","type":"int64","domain":[0,1000],"tile":10}],
		"attributes":[{"name":"s","type":"string_utf8","cell_val_num":"var"}]}`))
	if err != nil {
		f.Fatal(err)
	}
	if err := writer.CreateArray(ctx, st, "g/pts", sch); err != nil {
		f.Fatal(err)
	}
	_, srv, err := New(flight.NewService(flight.Config{Store: st, Log: zerolog.Nop()}), zerolog.Nop(), "fuzz")
	if err != nil {
		f.Fatal(err)
	}
	for _, q := range []string{
		`SELECT k, s FROM g.pts WHERE k BETWEEN 3 AND 7 OR k IN (1, 2) ORDER BY k LIMIT 3`,
		`SELECT count(*) FROM "g/pts" WHERE s LIKE 'a%' GROUP BY s HAVING count(*) > 1`,
		`EXPLAIN SELECT * FROM g.pts p JOIN g.pts q ON p.k = q.k`,
		`SELEC`, `DELETE FROM g.pts`, `SELECT ? FROM g.pts`,
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		c, err := srv.compile(ctx, q, nil)
		if err == nil && c.schema == nil {
			t.Fatalf("%q: no schema", q)
		}
	})
}
