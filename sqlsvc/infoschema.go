package sqlsvc

// information_schema as SQL sees it: the tileflight catalog's schemas,
// tables (arrays) and columns, and nothing of the engine's own (it
// replaces the engine's MySQL information_schema, whose tables describe
// engine internals: innodb_*, routines, privileges, ...).

import (
	"sort"
	"strings"

	gms "github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"
)

// infoSchemaName is the schema's name.
const infoSchemaName = "information_schema"

// infoSchema is the information_schema database.
type infoSchema struct{ srv *Server }

var _ gms.Database = (*infoSchema)(nil)

func (d *infoSchema) Name() string { return infoSchemaName }

// infoTables are its tables: their columns and how their rows are made.
var infoTables = map[string]struct {
	schema func(table string) gms.Schema
	rows   func(s *Server, ctx *gms.Context) ([]gms.Row, error)
}{
	"schemata": {schema: func(t string) gms.Schema {
		return infoColumns(t, "catalog_name", "schema_name")
	}, rows: schemataRows},
	"tables": {schema: func(t string) gms.Schema {
		return infoColumns(t, "table_catalog", "table_schema", "table_name", "table_type")
	}, rows: tablesRows},
	"columns": {schema: func(t string) gms.Schema {
		sc := infoColumns(t, "table_catalog", "table_schema", "table_name", "column_name")
		sc = append(sc, &gms.Column{Name: "ordinal_position", Type: types.Int64, Source: t, DatabaseSource: infoSchemaName})
		return append(sc, infoColumns(t, "is_nullable", "data_type", "column_role")...)
	}, rows: columnsRows},
}

// infoColumns are text columns of an information_schema table.
func infoColumns(table string, names ...string) gms.Schema {
	out := make(gms.Schema, len(names))
	for i, n := range names {
		out[i] = &gms.Column{Name: n, Type: types.LongText, Nullable: false, Source: table, DatabaseSource: infoSchemaName}
	}
	return out
}

func (d *infoSchema) GetTableInsensitive(_ *gms.Context, name string) (gms.Table, bool, error) {
	key := strings.ToLower(name)
	if _, ok := infoTables[key]; !ok {
		return nil, false, nil
	}
	return &infoTable{srv: d.srv, name: key}, true, nil
}

func (d *infoSchema) GetTableNames(*gms.Context) ([]string, error) {
	out := make([]string, 0, len(infoTables))
	for n := range infoTables {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// infoTable is one table of information_schema.
type infoTable struct {
	srv  *Server
	name string
}

var _ gms.Table = (*infoTable)(nil)

func (t *infoTable) Name() string               { return t.name }
func (t *infoTable) String() string             { return infoSchemaName + "." + t.name }
func (t *infoTable) Schema() gms.Schema         { return infoTables[t.name].schema(t.name) }
func (t *infoTable) Collation() gms.CollationID { return gms.Collation_Default }
func (t *infoTable) Partitions(*gms.Context) (gms.PartitionIter, error) {
	return gms.PartitionsToPartitionIter(partition{}), nil
}

func (t *infoTable) PartitionRows(ctx *gms.Context, _ gms.Partition) (gms.RowIter, error) {
	rows, err := infoTables[t.name].rows(t.srv, ctx)
	if err != nil {
		return nil, err
	}
	return gms.RowsToRowIter(rows...), nil
}

func schemataRows(s *Server, ctx *gms.Context) ([]gms.Row, error) {
	var out []gms.Row
	for _, db := range s.schemas(ctx) {
		out = append(out, gms.Row{Catalog, db})
	}
	return append(out, gms.Row{Catalog, infoSchemaName}), nil
}

func tablesRows(s *Server, ctx *gms.Context) ([]gms.Row, error) {
	es, err := s.entries(ctx)
	if err != nil {
		return nil, err
	}
	var out []gms.Row
	for _, e := range es {
		typ := TypeArray
		if e.b2nd {
			typ = TypeB2ND
		}
		out = append(out, gms.Row{Catalog, e.schema, e.table, typ})
	}
	return out, nil
}

func columnsRows(s *Server, ctx *gms.Context) ([]gms.Row, error) {
	es, err := s.entries(ctx)
	if err != nil {
		return nil, err
	}
	var out []gms.Row
	for _, e := range es {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		a, err := s.eng.Describe(ctx, e.path)
		if err != nil {
			// One array that does not open must not hide the others
			// (GetTables lists it without a schema likewise).
			s.log.Warn().Str("array", e.path).Err(err).Msg("information_schema.columns: an array that does not open is left out")
			continue
		}
		for i, f := range a.Arrow.Fields() {
			nullable, role := "NO", "attribute"
			if f.Nullable {
				nullable = "YES"
			}
			if isDimension(f) {
				role = "dimension"
			}
			out = append(out, gms.Row{Catalog, e.schema, e.table, f.Name, int64(i + 1), nullable, sqlTypeName(f.Type), role})
		}
	}
	return out, nil
}
