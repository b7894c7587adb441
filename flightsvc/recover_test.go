package flightsvc

import (
	"context"
	"testing"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestRecoverTurnsPanicsIntoInternal(t *testing.T) {
	unary, stream := Recover(zerolog.Nop())
	_, err := unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/x/Unary"},
		func(context.Context, any) (any, error) { panic("index out of range") })
	if status.Code(err) != codes.Internal {
		t.Fatalf("unary: %v", err)
	}
	err = stream(nil, nil, &grpc.StreamServerInfo{FullMethod: "/x/Stream"},
		func(any, grpc.ServerStream) error {
			var m map[string]int
			//lint:ignore SA5000 a runtime panic is what this test recovers from
			m["x"] = 1
			return nil
		})
	if status.Code(err) != codes.Internal {
		t.Fatalf("stream: %v", err)
	}
	resp, err := unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/x/Ok"},
		func(context.Context, any) (any, error) { return 42, nil })
	if err != nil || resp != 42 {
		t.Fatalf("no panic: %v %v", resp, err)
	}
}
