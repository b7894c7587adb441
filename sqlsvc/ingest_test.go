package sqlsvc

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	arr "github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestIngestModes: mode "create" makes a sparse array numbered by _rowid
// from the stream's schema, "create_append" appends (numbering on),
// "create" on an existing table is AlreadyExists, "replace" of an existing
// one Unimplemented, and a failed create leaves no array behind.
func TestIngestModes(t *testing.T) {
	c, _ := serveSQL(t)
	ctx := context.Background()
	db := "h"
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64},
		{Name: "ok", Type: arrow.FixedWidthTypes.Boolean},
	}, nil)
	batch := func(names []string, scores []float64) arr.RecordReader {
		b := arr.NewRecordBuilder(memory.DefaultAllocator, sc)
		defer b.Release()
		for i, n := range names {
			if n == "" {
				b.Field(0).AppendNull()
			} else {
				b.Field(0).(*arr.StringBuilder).Append(n)
			}
			b.Field(1).(*arr.Float64Builder).Append(scores[i])
			b.Field(2).(*arr.BooleanBuilder).Append(scores[i] > 1)
		}
		rec := b.NewRecordBatch()
		rdr, err := arr.NewRecordReader(sc, []arrow.RecordBatch{rec})
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		return rdr
	}
	mode := func(ifNot flightsql.TableDefinitionOptionsTableNotExistOption, ifExists flightsql.TableDefinitionOptionsTableExistsOption) *flightsql.ExecuteIngestOpts {
		return &flightsql.ExecuteIngestOpts{Table: "scores", Schema: &db,
			TableDefinitionOptions: &flightsql.TableDefinitionOptions{IfNotExist: ifNot, IfExists: ifExists}}
	}
	create := mode(flightsql.TableDefinitionOptionsTableNotExistOptionCreate, flightsql.TableDefinitionOptionsTableExistsOptionFail)
	createAppend := mode(flightsql.TableDefinitionOptionsTableNotExistOptionCreate, flightsql.TableDefinitionOptionsTableExistsOptionAppend)
	replace := mode(flightsql.TableDefinitionOptionsTableNotExistOptionCreate, flightsql.TableDefinitionOptionsTableExistsOptionReplace)

	if n, err := c.ExecuteIngest(ctx, batch([]string{"a", "", "c"}, []float64{0.5, 1.5, 2.5}), create); err != nil || n != 3 {
		t.Fatalf("create: %d %v", n, err)
	}
	if n, err := c.ExecuteIngest(ctx, batch([]string{"d"}, []float64{3.5}), createAppend); err != nil || n != 1 {
		t.Fatalf("create_append: %d %v", n, err)
	}
	got, sch, err := rows(t, c, `SELECT * FROM h.scores ORDER BY _rowid`)
	if err != nil {
		t.Fatal(err)
	}
	if g := strings.Join(got, ";"); g != "0|a|0.5|false;1|(null)|1.5|true;2|c|2.5|true;3|d|3.5|true" {
		t.Errorf("rows %s", g)
	}
	if names := strings.Join(func() []string {
		var o []string
		for _, f := range sch.Fields() {
			o = append(o, f.Name)
		}
		return o
	}(), ","); names != "_rowid,name,score,ok" {
		t.Errorf("columns %s", names)
	}
	if _, err := c.ExecuteIngest(ctx, batch([]string{"e"}, []float64{1}), create); status.Code(err) != codes.AlreadyExists {
		t.Errorf("create of an existing table: %v", err)
	}
	if _, err := c.ExecuteIngest(ctx, batch([]string{"e"}, []float64{1}), replace); status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "replace") {
		t.Errorf("replace of an existing table: %v", err)
	}
	// a stream whose columns cannot be attributes: nothing is created
	bad := arrow.NewSchema([]arrow.Field{{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)}}, nil)
	lb := arr.NewRecordBuilder(memory.DefaultAllocator, bad)
	lb.Field(0).AppendNull()
	rec := lb.NewRecordBatch()
	lb.Release()
	rdr, _ := arr.NewRecordReader(bad, []arrow.RecordBatch{rec})
	rec.Release()
	o := mode(flightsql.TableDefinitionOptionsTableNotExistOptionCreate, flightsql.TableDefinitionOptionsTableExistsOptionFail)
	o.Table = "lists"
	if _, err := c.ExecuteIngest(ctx, rdr, o); status.Code(err) != codes.Unimplemented {
		t.Errorf("create from a list column: %v", err)
	}
	if _, _, err := rows(t, c, `SELECT * FROM h.lists`); status.Code(err) != codes.NotFound {
		t.Errorf("the refused create left an array: %v", err)
	}
}
