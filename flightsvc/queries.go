package flightsvc

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/tileflight/tileflight/calls"
	"github.com/tileflight/tileflight/errkind"
)

// The running-queries actions: list_queries and cancel_query, over the
// daemon's call registry (package calls).
func init() {
	actions["list_queries"] = actionDef{
		desc: `List the running queries: DoGet, DoPut, SQL statements and actions. Body: empty. Result: a JSON list of {"id", "kind" (doget, doput, sql, action), "array" or "sql" (cut at 1000 characters), "user", "peer", "started", "rows", "bytes"}, oldest first. A read-only token sees only its own.`,
		run:  (*Service).actListQueries,
	}
	actions["cancel_query"] = actionDef{
		desc: `Cancel a running query. Body: {"id": ID} (from list_queries). Its client gets CANCELLED; its memory and files are released at once. Result: {"cancelled": ID}. NOT_FOUND when no running query has that id; a read-only token may cancel only its own (PERMISSION_DENIED).`,
		run:  (*Service).actCancelQuery,
	}
}

func (s *Service) actListQueries(ctx context.Context, _ []byte) (any, error) {
	if s.cfg.Calls == nil {
		return []calls.Snapshot{}, nil
	}
	list := s.cfg.Calls.List(ctx)
	if list == nil {
		list = []calls.Snapshot{}
	}
	return list, nil
}

func (s *Service) actCancelQuery(ctx context.Context, body []byte) (any, error) {
	var b struct {
		ID *string `json:"id"`
	}
	if err := json.Unmarshal(body, &b); err != nil || b.ID == nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, `cancel_query wants {"id": ID} (ids come from list_queries)`)
	}
	if s.cfg.Calls == nil {
		return nil, errkind.Errorf(errkind.NotFound, "query %q: %v", *b.ID, calls.ErrUnknownCall)
	}
	switch err := s.cfg.Calls.Cancel(ctx, *b.ID); {
	case errors.Is(err, calls.ErrUnknownCall):
		return nil, errkind.Errorf(errkind.NotFound, "query %q: %v", *b.ID, err)
	case errors.Is(err, calls.ErrNotYours):
		return nil, errkind.Errorf(errkind.PermissionDenied, "query %q: %v", *b.ID, err)
	case err != nil:
		return nil, err
	}
	return map[string]string{"cancelled": *b.ID}, nil
}
