package flightsql

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

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

// FuzzPushdown: a WHERE built from fuzzed columns, operators and
// constants (NOT, AND/OR, IN lists with NULL, BETWEEN, fractions and
// out-of-range constants) gives the same rows with the pushdown as the
// engine gives alone, on a dense and a sparse array with a nullable
// column; aggregates over it too.
func FuzzPushdown(f *testing.F) {
	c, _ := serveSQL(f)
	cols := []string{"x", "y", "v", "w", "k", "s", "n"}
	ops := []string{"=", "<>", "<", "<=", ">", ">=", "IN", "NOT IN", "BETWEEN", "IS NULL", "IS NOT NULL"}
	f.Add(uint8(2), uint8(4), int64(95), float64(0.5), "s1", uint8(0))
	f.Add(uint8(6), uint8(7), int64(3), float64(2.5), "s19", uint8(3))
	f.Add(uint8(3), uint8(0), int64(81), float64(0.25), "", uint8(6))
	f.Add(uint8(5), uint8(8), int64(-1), float64(1e300), "s1'0", uint8(9))
	f.Fuzz(func(t *testing.T, col, op uint8, iv int64, fv float64, sv string, shape uint8) {
		if math.IsNaN(fv) || math.IsInf(fv, 0) || !utf8.ValidString(sv) || len(sv) > 20 {
			return
		}
		name := cols[int(col)%len(cols)]
		tbl := "dense"
		if name == "k" || name == "s" || name == "n" {
			tbl = "g.pts"
		}
		lit := func(k uint8) string {
			switch k % 4 {
			case 0:
				return strconv.FormatInt(iv, 10)
			case 1:
				return strconv.FormatFloat(fv, 'f', -1, 64)
			case 2:
				return "'" + strings.ReplaceAll(sv, "'", "''") + "'"
			}
			return "NULL"
		}
		l1, l2 := lit(shape), lit(shape>>2)
		var term string
		switch o := ops[int(op)%len(ops)]; o {
		case "IN", "NOT IN":
			term = fmt.Sprintf("%s %s (%s, %s, %d)", name, o, l1, l2, iv/2)
		case "BETWEEN":
			term = fmt.Sprintf("%s BETWEEN %s AND %s", name, l1, l2)
		case "IS NULL", "IS NOT NULL":
			term = name + " " + o
		default:
			term = fmt.Sprintf("%s %s %s", name, o, l1)
		}
		if shape&0x10 != 0 {
			term = "NOT (" + term + ")"
		}
		other := "x < 8"
		if tbl == "g.pts" {
			other = "k > 3"
		}
		if shape&0x20 != 0 {
			term = "(" + term + ") OR " + other
		} else if shape&0x40 != 0 {
			term = "(" + term + ") AND " + other
		}
		q := "SELECT * FROM " + tbl + " WHERE " + term
		if shape&0x80 != 0 {
			q = "SELECT count(*), sum(" + name + "), min(" + name + "), max(" + name + ") FROM " + tbl + " WHERE " + term
		}
		run := func(off bool) (string, error) {
			noPushdown.Store(off)
			defer noPushdown.Store(false)
			got, _, err := rows(t, c, q)
			sort.Strings(got)
			return strings.Join(got, ";"), err
		}
		want, werr := run(true)
		got, gerr := run(false)
		if werr != nil {
			return // the engine refuses it too (or differently): nothing to compare
		}
		if gerr != nil {
			t.Fatalf("%s: with pushdown: %v (without: ok)", q, gerr)
		}
		if got != want {
			t.Fatalf("%s:\nwith pushdown    %s\nwithout pushdown %s", q, got, want)
		}
	})
}
