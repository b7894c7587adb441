//go:build tools

// Package deps pins the project's chosen third-party modules in go.mod
// before every one of them is imported by code.
package deps

import (
	_ "github.com/apache/arrow-go/v18/arrow/flight"
	_ "github.com/aws/aws-sdk-go-v2/service/s3"
	_ "github.com/dsnet/compress/bzip2"
	_ "github.com/google/uuid"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/pierrec/lz4/v4"
	_ "github.com/rs/zerolog"
	_ "golang.org/x/image/webp"
	_ "google.golang.org/grpc"
)
