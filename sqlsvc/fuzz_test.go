package sqlsvc

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	arr "github.com/apache/arrow-go/v18/arrow/array"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/dolthub/vitess/go/vt/sqlparser"
	"github.com/rs/zerolog"

	"github.com/tileflight/tileflight/flightsvc"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/sqlsvc/native"
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
	_, srv, err := New(native.New(flightsvc.NewService(flightsvc.Config{Store: st, Log: zerolog.Nop()})), zerolog.Nop(), "fuzz")
	if err != nil {
		f.Fatal(err)
	}
	for _, q := range []string{
		`SELECT k, s FROM g.pts WHERE k BETWEEN 3 AND 7 OR k IN (1, 2) ORDER BY k LIMIT 3`,
		`SELECT count(*) FROM "g/pts" WHERE s LIKE 'a%' GROUP BY s HAVING count(*) > 1`,
		`EXPLAIN SELECT * FROM g.pts p JOIN g.pts q ON p.k = q.k`,
		`SELEC`, `DELETE FROM g.pts`, `SELECT ? FROM g.pts`,
		`INSERT INTO g.pts (s, k) VALUES ('a', 1), ('b', 2 * 3)`, `insert into "g/pts" select k + 1, s from g.pts where k < ?`,
		`INSERT INTO g.pts VALUES (?, ?)`, `INSERT g.pts SET k = 1`, `INSERT INTO g.pts (k) VALUES (1) ON DUPLICATE KEY UPDATE k = 2`,
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		if isInsert(q) {
			// planned, and its source compiled, never run; a panic would
			// surface as an internal error
			p, err := srv.planInsert(ctx, q)
			if err == nil {
				_, err = srv.compile(ctx, sqlparser.String(p.source), nil)
			}
			if err != nil && strings.Contains(err.Error(), "internal error") {
				t.Fatalf("%q: %v", q, err)
			}
			return
		}
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
	c, _ := serveSQL(f, fragmented, datetimes)
	cols := []string{"x", "y", "v", "w", "k", "s", "n", "t", "day", "sec"}
	ops := []string{"=", "<>", "<", "<=", ">", ">=", "IN", "NOT IN", "BETWEEN", "IS NULL", "IS NOT NULL"}
	f.Add(uint8(2), uint8(4), int64(95), float64(0.5), "s1", uint8(0))
	f.Add(uint8(6), uint8(7), int64(3), float64(2.5), "s19", uint8(3))
	f.Add(uint8(3), uint8(0), int64(81), float64(0.25), "", uint8(6))
	f.Add(uint8(5), uint8(8), int64(-1), float64(1e300), "s1'0", uint8(9))
	f.Add(uint8(7), uint8(4), int64(3*86400e6+1500), float64(0), "", uint8(3))
	f.Add(uint8(8), uint8(8), int64(5*86400e6+7), float64(0), "", uint8(3|3<<3|0x10))
	f.Add(uint8(9), uint8(2), int64(86400e6/3), float64(0), "", uint8(3|0x80))
	f.Fuzz(func(t *testing.T, col, op uint8, iv int64, fv float64, sv string, shape uint8) {
		if math.IsNaN(fv) || math.IsInf(fv, 0) || !utf8.ValidString(sv) || len(sv) > 20 {
			return
		}
		name := cols[int(col)%len(cols)]
		tbl := "dense"
		switch name {
		case "k", "s", "n":
			tbl = "g.pts"
		case "t", "day", "sec":
			tbl = "f.ev"
		}
		lit := func(k uint8) string {
			switch k % 5 {
			case 0:
				return strconv.FormatInt(iv, 10)
			case 1:
				return strconv.FormatFloat(fv, 'f', -1, 64)
			case 2:
				return "'" + strings.ReplaceAll(sv, "'", "''") + "'"
			case 3:
				// a datetime near the data, to the microsecond
				ts := time.Date(2021, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(iv%(86400*20*1e6)) * time.Microsecond)
				return "'" + ts.Format("2006-01-02 15:04:05.999999") + "'"
			}
			return "NULL"
		}
		l1, l2 := lit(shape), lit(shape>>3)
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
		other := map[string]string{"dense": "x < 8", "g.pts": "k > 3", "f.ev": "sec IS NOT NULL"}[tbl]
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

// datetimes writes f/ev: a sparse array with a millisecond dimension t, a
// day attribute and a nullable seconds attribute, over 20 days.
func datetimes(t testing.TB, mk func(name, js string), c aflight.Client) {
	mk("f/ev", `{"type":"sparse","dimensions":[{"name":"t","type":"datetime_ms","domain":[0,4102444800000],"tile":86400000}],
		"attributes":[{"name":"day","type":"datetime_day"},{"name":"sec","type":"datetime_sec","nullable":true}]}`)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "t", Type: &arrow.TimestampType{Unit: arrow.Millisecond}},
		{Name: "day", Type: arrow.FixedWidthTypes.Date32},
		{Name: "sec", Type: &arrow.TimestampType{Unit: arrow.Second}, Nullable: true}}, nil)
	b := arr.NewRecordBuilder(memory.DefaultAllocator, sc)
	base := time.Date(2021, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 200; i++ {
		ts := base.Add(time.Duration(i) * 2 * time.Hour).Add(time.Duration(i*137) * time.Millisecond)
		b.Field(0).(*arr.TimestampBuilder).Append(arrow.Timestamp(ts.UnixMilli()))
		b.Field(1).(*arr.Date32Builder).Append(arrow.Date32FromTime(ts))
		if i%3 == 0 {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*arr.TimestampBuilder).Append(arrow.Timestamp(ts.Unix()))
		}
	}
	put(t, c, `{"array":"f/ev"}`, b.NewRecordBatch())
	b.Release()
}
