package sqlsvc

// Bulk ingest (CommandStatementIngest, ADBC's adbc_ingest): the stream is
// written into an existing array exactly as a DoPut with a PATH
// descriptor is (docs/protocol.md, "Queries, tickets and descriptors"): sparse arrays take every dimension and
// attribute, dense arrays every attribute for the cells of the whole
// domain in row-major order; one ingest is one atomic write.
//
// A table that does not exist is created by mode "create" or
// "create_append" (ingest_rowid.go): a sparse array whose one dimension
// is the row number.

import (
	"context"
	"strings"

	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/sqlsvc/tables"
)

func (s *Server) DoPutCommandStatementIngest(ctx context.Context, cmd flightsql.StatementIngest, rdr aflight.MessageReader) (int64, error) {
	n, err := s.ingest(ctx, cmd, rdr)
	return n, s.eng.Status(err)
}

func (s *Server) ingest(ctx context.Context, cmd flightsql.StatementIngest, rdr aflight.MessageReader) (int64, error) {
	if err := s.eng.RequireWrite(ctx, "bulk ingest"); err != nil {
		return 0, err
	}
	if cmd.GetTemporary() {
		return 0, errkind.Errorf(errkind.Unimplemented, "bulk ingest into a temporary table: tileflight has none; ingest into an existing array")
	}
	if len(cmd.GetTransactionId()) > 0 {
		return 0, errkind.Errorf(errkind.Unimplemented, "bulk ingest in a transaction: tileflight has no transactions (each ingest is atomic by itself)")
	}
	if c := cmd.GetCatalog(); c != "" && c != Catalog {
		return 0, errkind.Errorf(errkind.NotFound, "bulk ingest: no catalog %q (the catalog is %q)", c, Catalog)
	}
	path := cmd.GetTable()
	if db := cmd.GetSchema(); db != "" && !strings.Contains(path, "/") {
		if f := folderOf(db); f != "" {
			path = f + "/" + path
		}
	}
	if err := query.ValidateArrayName(path); err != nil {
		return 0, err
	}
	opts := cmd.GetTableDefinitionOptions()
	a, err := s.eng.Describe(ctx, path)
	exists := err == nil
	if err != nil && errkind.Of(err) != errkind.NotFound {
		return 0, err
	}
	created := false
	if !exists {
		if opts == nil || opts.IfNotExist != flightsql.TableDefinitionOptionsTableNotExistOptionCreate {
			return 0, errkind.Errorf(errkind.NotFound, "bulk ingest: no array %q (ingest with mode=\"create\" or \"create_append\" to create it, or create it with the create_array action)", path)
		}
		body, err := ingestSchema(path, rdr.Schema())
		if err != nil {
			return 0, err
		}
		if err := s.eng.CreateArray(ctx, body); err != nil {
			return 0, err
		}
		created = true
	} else if opts != nil {
		switch opts.IfExists {
		case flightsql.TableDefinitionOptionsTableExistsOptionAppend:
		case flightsql.TableDefinitionOptionsTableExistsOptionReplace:
			return 0, errkind.Errorf(errkind.Unimplemented, "bulk ingest into %q with mode \"replace\": not supported for an existing array (TileDB has no atomic way to replace an array's cells: a delete and a write are two commits); ingest with mode=\"append\" (new cells overwrite old ones at the same coordinates of a dense array or a sparse array without duplicates), or drop_array and ingest with mode=\"create\"", path)
		case flightsql.TableDefinitionOptionsTableExistsOptionFail:
			return 0, errkind.Errorf(errkind.AlreadyExists, "bulk ingest into %q with mode \"create\": the array exists; ingest into it with mode=\"append\" or \"create_append\"", path)
		}
	}
	release, err := s.eng.AcquireStream(ctx)
	if err != nil {
		return 0, err
	}
	defer release()
	src := tables.RecordSource(rdr)
	if created || isRowIDArray(a, rdr.Schema()) {
		start := int64(0)
		if !created {
			start = nextRowID(a)
		}
		src = &rowIDSource{in: rdr, next: start, mem: s.mem}
	}
	rows, err := s.eng.Write(ctx, path, src)
	if err != nil {
		if created {
			// The array was made for this ingest: leave nothing behind.
			if derr := s.eng.DropArray(ctx, path); derr != nil {
				s.log.Warn().Err(derr).Str("array", path).Msg("bulk ingest: dropping the array made for a failed ingest")
			}
		}
		return 0, err
	}
	return rows, nil
}
