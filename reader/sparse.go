package reader

import (
	"context"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/reader/plan"
	"github.com/tileflight/tileflight/reader/sparse"
	"github.com/tileflight/tileflight/reader/tileio"
)

// openSparse hands a sparse plan to package reader/sparse.
func openSparse(ctx context.Context, p *plan.Plan, l *tileio.Loader, fields []arrowconv.Field) (source, error) {
	return sparse.NewReader(ctx, sparse.Input{Plan: p, Loader: l, Fields: fields})
}
