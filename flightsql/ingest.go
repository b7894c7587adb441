package flightsql

// Bulk ingest (CommandStatementIngest, ADBC's adbc_ingest): the stream is
// written into an existing array exactly as a DoPut with a PATH
// descriptor is (DESIGN §3): sparse arrays take every dimension and
// attribute, dense arrays every attribute for the cells of the whole
// domain in row-major order; one ingest is one atomic write.

import (
	"context"
	"strings"

	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/flight"
	"github.com/tileflight/tileflight/query"
)

func (s *Server) DoPutCommandStatementIngest(ctx context.Context, cmd flightsql.StatementIngest, rdr aflight.MessageReader) (int64, error) {
	n, err := s.ingest(ctx, cmd, rdr)
	return n, flight.Status(err)
}

func (s *Server) ingest(ctx context.Context, cmd flightsql.StatementIngest, rdr aflight.MessageReader) (int64, error) {
	if err := flight.RequireWrite(ctx, "bulk ingest"); err != nil {
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
	_, _, err := s.svc.OpenArray(ctx, path)
	exists := err == nil
	if err != nil && errkind.Of(err) != errkind.NotFound {
		return 0, err
	}
	if !exists {
		if opts != nil && opts.IfNotExist == flightsql.TableDefinitionOptionsTableNotExistOptionCreate {
			return 0, errkind.Errorf(errkind.Unimplemented, "bulk ingest into %q: creating an array from a table is not supported (an array needs dimensions and tiles): create it with the create_array action, then ingest with mode=\"append\"", path)
		}
		return 0, errkind.Errorf(errkind.NotFound, "bulk ingest: no array %q (create it with the create_array action first)", path)
	}
	if opts != nil {
		switch opts.IfExists {
		case flightsql.TableDefinitionOptionsTableExistsOptionAppend:
		case flightsql.TableDefinitionOptionsTableExistsOptionReplace:
			return 0, errkind.Errorf(errkind.Unimplemented, "bulk ingest into %q with mode \"replace\": not supported; ingest with mode=\"append\" (new cells overwrite old ones at the same coordinates of a dense array or a sparse array without duplicates)", path)
		case flightsql.TableDefinitionOptionsTableExistsOptionFail:
			if opts.IfNotExist == flightsql.TableDefinitionOptionsTableNotExistOptionCreate {
				return 0, errkind.Errorf(errkind.AlreadyExists, "bulk ingest into %q with mode \"create\": the array exists; ingest into it with mode=\"append\"", path)
			}
		}
	}
	release, err := s.svc.AcquireStream()
	if err != nil {
		return 0, err
	}
	defer release()
	res, err := s.svc.Write(ctx, &query.Query{Array: path, Limit: -1}, rdr)
	if err != nil {
		return 0, err
	}
	return res.Rows, nil
}
