package main

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/tileflight/tileflight/storage"
)

// createDemoArrays will write the demo arrays (a dense 2-D float array and
// a sparse point set with a string attribute) once the writer exists.
func createDemoArrays(ctx context.Context, store storage.Store, log zerolog.Logger) error {
	log.Warn().Msg("-demo: demo arrays need the writer, which is not built yet; serving the data directory as it is")
	return nil
}
