package flight

// The array lifecycle actions of DESIGN.md §5: staged-write commits and
// aborts, consolidation, vacuuming, deletes and schema evolution. They
// register themselves here rather than in actions.go's table so that the
// table stays the short list of the basic actions.

import (
	"context"
	"fmt"

	"github.com/tileflight/tileflight/errkind"
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
