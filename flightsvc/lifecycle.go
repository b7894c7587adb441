package flightsvc

// The array lifecycle actions of docs/protocol.md, "Array lifecycle": staged-write commits and
// aborts, consolidation, vacuuming, deletes and schema evolution. They
// register themselves here rather than in actions.go's table so that the
// table stays the short list of the basic actions.

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/lifecycle"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/writer"
)

func init() {
	actions["commit_fragments"] = actionDef{
		desc: `Commit staged fragments (written by DoPut with "stage": true), all at once, with one commit object. ` +
			`Body: {"array": NAME, "fragments": [names as PutResult listed them, from one or many DoPuts]}. ` +
			`Result: {"committed": [names], "commit": key of the commit object written, "" when all were already committed (a retry)}. ` +
			`NotFound when a fragment is not there (or its write did not finish); FailedPrecondition when some but not all are committed already.`,
		mutates: true,
		run:     (*Service).actCommitFragments,
	}
	actions["abort_fragments"] = actionDef{
		desc: `Delete staged fragments. Body: {"array": NAME, "fragments": [names]}. ` +
			`Result: {"aborted": [names]}; fragments already gone count as aborted. FailedPrecondition (nothing deleted) when one is committed.`,
		mutates: true,
		run:     (*Service).actAbortFragments,
	}
	actions["consolidate"] = actionDef{
		desc: `Consolidate as TileDB 2.30 does. Body: {"array": NAME, "mode": "fragments"|"commits"|"fragment_meta"|"array_meta" (default fragments), "timestamp": optional [start, end] or end}. ` +
			`Result: {"mode", "consolidated": [what was merged], "written": [new files, relative to the array]}; both empty when there was nothing to consolidate. ` +
			`Fragments mode: dense and sparse (per-cell timestamps); sparse over earlier consolidations or delete commits: Unimplemented.`,
		mutates: true,
		run:     (*Service).actConsolidate,
	}
	actions["vacuum"] = actionDef{
		desc: `Remove what consolidation made obsolete, as TileDB's vacuum of that mode does. Body: {"array": NAME, "mode": as consolidate (default fragments)}. ` +
			`Result: {"mode", "removed": [paths], "uncommitted": [fragments], "temp": {"names", "bytes"}}; a fragments vacuum also removes uncommitted fragments older than -vacuum-grace; every vacuum removes the temporary entries a killed process left at the data directory's root (untouched for -temp-grace).`,
		mutates: true,
		run:     (*Service).actVacuum,
	}
	actions["delete"] = actionDef{
		desc: `Delete the cells of a sparse array that match a condition, with a delete commit TileDB honours. ` +
			`Body: {"array": NAME, "filter": CONDITION in TileDB-Py's QueryCondition syntax, "timestamp": optional t (ms; default now)}. ` +
			`Result: {"commit": path of the .del file}. Reads at or after t leave the cells out; earlier timestamps still see them.`,
		mutates: true,
		run:     (*Service).actDelete,
	}
	actions["evolve_schema"] = actionDef{
		desc: `Evolve an array's schema as TileDB's ArraySchemaEvolution does: a new schema file, older fragments kept as written. ` +
			`Body: {"array": NAME, "add_attributes": [attribute objects of the schema JSON], "drop_attributes": [names], "timestamp": optional t}. ` +
			`Result: the new schema JSON (as describe).`,
		mutates: true,
		run:     (*Service).actEvolveSchema,
	}
}

// lifecycleBody is the body of consolidate and vacuum.
type lifecycleBody struct {
	Array     *string         `json:"array"`
	Mode      *string         `json:"mode"`
	Timestamp json.RawMessage `json:"timestamp"`
}

func (s *Service) lifecycleOf(ctx context.Context, body []byte, timestamps bool) (string, lifecycle.Mode, lifecycle.Options, []byte, error) {
	var b lifecycleBody
	var opt lifecycle.Options
	if err := parseBody(body, &b); err != nil {
		return "", "", opt, nil, errkind.Errorf(errkind.InvalidArgument, `%v (want {"array": NAME, "mode": MODE})`, err)
	}
	if b.Array == nil {
		return "", "", opt, nil, errkind.Errorf(errkind.InvalidArgument, `body needs "array": the array's name`)
	}
	name := *b.Array
	callInfo(ctx).SetArray(name)
	mode := lifecycle.Fragments
	if b.Mode != nil {
		m, err := lifecycle.ParseMode(*b.Mode)
		if err != nil {
			return "", "", opt, nil, fmt.Errorf("array %q: %w", name, err)
		}
		mode = m
	}
	if len(b.Timestamp) > 0 && string(b.Timestamp) != "null" {
		if !timestamps {
			return "", "", opt, nil, errkind.Errorf(errkind.InvalidArgument, `array %q: vacuum takes no "timestamp"`, name)
		}
		raw, _ := json.Marshal(map[string]json.RawMessage{"array": json.RawMessage(`"x"`), "timestamp": b.Timestamp})
		q, err := parseTimestampOnly(raw)
		if err != nil {
			return "", "", opt, nil, fmt.Errorf("array %q: %w", name, err)
		}
		opt.Start, opt.End = q.Start, q.End
	}
	if err := s.checkArray(ctx, name); err != nil {
		return "", "", opt, nil, err
	}
	key, err := s.writeKey(ctx, name)
	if err != nil {
		return "", "", opt, nil, err
	}
	opt.EncryptionKey = key
	opt.MaxFragmentBytes = s.cfg.MaxFragmentBytes
	return name, mode, opt, key, nil
}

func (s *Service) actConsolidate(ctx context.Context, body []byte) (any, error) {
	name, mode, opt, _, err := s.lifecycleOf(ctx, body, true)
	if err != nil {
		return nil, err
	}
	var res *lifecycle.Result
	err = s.exclusively(ctx, name, func(ctx context.Context) (err error) {
		res, err = lifecycle.Consolidate(ctx, s.cfg.Store, name, mode, opt)
		return err
	})
	if err != nil {
		return nil, storageErr(err)
	}
	return res, nil
}

func (s *Service) actVacuum(ctx context.Context, body []byte) (any, error) {
	name, mode, _, key, err := s.lifecycleOf(ctx, body, false)
	if err != nil {
		return nil, err
	}
	var res *lifecycle.VacuumResult
	err = s.exclusively(ctx, name, func(ctx context.Context) (err error) {
		res, err = lifecycle.Vacuum(ctx, s.cfg.Store, name, mode, lifecycle.VacuumOptions{EncryptionKey: key, Grace: s.cfg.VacuumGrace})
		return err
	})
	if err != nil {
		return nil, storageErr(err)
	}
	if res.Uncommitted == nil {
		res.Uncommitted = []string{}
	}
	out := vacuumResult{VacuumResult: res, Temp: storage.TempCleaned{Names: []string{}}}
	// A kill -9 during a DoPut or drop_array leaves hidden staging entries
	// at the store's root that no array owns: every vacuum removes those
	// of dead processes.
	if tc, ok := s.cfg.Store.(storage.TempCleaner); ok {
		got, err := tc.CleanTemp(ctx, s.cfg.TempGrace)
		if err != nil {
			return nil, storageErr(err)
		}
		if got.Names != nil {
			out.Temp = got
		}
	}
	return out, nil
}

// vacuumResult is vacuum's answer: the array's, and the temporary entries
// of dead processes removed from the store ("temp").
type vacuumResult struct {
	*lifecycle.VacuumResult
	Temp storage.TempCleaned `json:"temp"`
}

// fragmentsBody is the body of commit_fragments and abort_fragments.
type fragmentsBody struct {
	Array     *string  `json:"array"`
	Fragments []string `json:"fragments"`
}

func (s *Service) fragmentsOf(ctx context.Context, body []byte) (string, []string, error) {
	var b fragmentsBody
	if err := parseBody(body, &b); err != nil {
		return "", nil, errkind.Errorf(errkind.InvalidArgument, `%v (want {"array": NAME, "fragments": [names]})`, err)
	}
	if b.Array == nil {
		return "", nil, errkind.Errorf(errkind.InvalidArgument, `body needs "array": the array's name`)
	}
	name := *b.Array
	callInfo(ctx).SetArray(name)
	if err := s.checkArray(ctx, name); err != nil {
		return "", nil, err
	}
	if len(b.Fragments) == 0 {
		return "", nil, errkind.Errorf(errkind.InvalidArgument, `array %q: body needs "fragments": the staged fragments' names, as DoPut returned them`, name)
	}
	return name, b.Fragments, nil
}

func (s *Service) actCommitFragments(ctx context.Context, body []byte) (any, error) {
	name, frags, err := s.fragmentsOf(ctx, body)
	if err != nil {
		return nil, err
	}
	st, err := writer.CommitFragments(ctx, s.cfg.Store, name, frags)
	if err != nil {
		return nil, fmt.Errorf("array %q: %w", name, storageErr(err))
	}
	if st.Commit != "" {
		s.notifyWrite(name, len(st.Fragments))
	}
	return map[string]any{"committed": st.Fragments, "commit": st.Commit}, nil
}

func (s *Service) actAbortFragments(ctx context.Context, body []byte) (any, error) {
	name, frags, err := s.fragmentsOf(ctx, body)
	if err != nil {
		return nil, err
	}
	done, err := writer.AbortFragments(ctx, s.cfg.Store, name, frags)
	if err != nil {
		return nil, fmt.Errorf("array %q: %w", name, storageErr(err))
	}
	return map[string]any{"aborted": done}, nil
}

// parseTimestampOnly reads the "timestamp" of an action body by the query
// parser's rules (t = [0, t]; [start, end]).
func parseTimestampOnly(raw []byte) (*query.Timestamp, error) {
	q, err := query.Parse(raw)
	if err != nil {
		return nil, err
	}
	if q.Timestamp == nil {
		return &query.Timestamp{}, nil
	}
	return q.Timestamp, nil
}

func (s *Service) actDelete(ctx context.Context, body []byte) (any, error) {
	var b struct {
		Array     *string `json:"array"`
		Filter    *string `json:"filter"`
		Timestamp *uint64 `json:"timestamp"`
	}
	if err := parseBody(body, &b); err != nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, `%v (want {"array": NAME, "filter": CONDITION})`, err)
	}
	if b.Array == nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, `body needs "array": the array's name`)
	}
	name := *b.Array
	callInfo(ctx).SetArray(name)
	if b.Filter == nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, `array %q: body needs "filter": the condition of the cells to delete`, name)
	}
	if err := s.checkArray(ctx, name); err != nil {
		return nil, err
	}
	key, err := s.writeKey(ctx, name)
	if err != nil {
		return nil, err
	}
	var t uint64
	if b.Timestamp != nil {
		t = *b.Timestamp
	}
	rel, err := lifecycle.Delete(ctx, s.cfg.Store, name, *b.Filter, t, key)
	if err != nil {
		return nil, fmt.Errorf("array %q: delete: %w", name, storageErr(err))
	}
	return map[string]string{"commit": rel}, nil
}

func (s *Service) actEvolveSchema(ctx context.Context, body []byte) (any, error) {
	var b struct {
		Array     *string           `json:"array"`
		Add       []json.RawMessage `json:"add_attributes"`
		Drop      []string          `json:"drop_attributes"`
		Timestamp *uint64           `json:"timestamp"`
	}
	if err := parseBody(body, &b); err != nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, `%v (want {"array": NAME, "add_attributes": [...], "drop_attributes": [...]})`, err)
	}
	if b.Array == nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, `body needs "array": the array's name`)
	}
	name := *b.Array
	callInfo(ctx).SetArray(name)
	if err := s.checkArray(ctx, name); err != nil {
		return nil, err
	}
	key, err := s.writeKey(ctx, name)
	if err != nil {
		return nil, err
	}
	var t uint64
	if b.Timestamp != nil {
		t = *b.Timestamp
	}
	ns, err := writer.EvolveSchema(ctx, s.cfg.Store, name, b.Add, b.Drop, t, writer.ArrayOptions{EncryptionKey: key})
	if err != nil {
		return nil, fmt.Errorf("array %q: %w", name, storageErr(err))
	}
	out, err := schema.ToJSONArray(ns, name)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(withEncrypted(out, len(key) > 0)), nil
}
