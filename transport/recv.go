package transport

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/bytedance/gopkg/lang/dirtmake"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The receiving half of sendCodec: a FlightData that a client sends
// (DoPut, DoExchange, Flight SQL ingest) is copied once out of gRPC's
// buffers into memory of its own, and its byte fields are slices of that
// copy.
//
// gRPC's protobuf codec first gathers the message into a buffer from its
// pool (zeroed, and a fresh allocation for anything above 1 MiB, which a
// batch body always is), then protobuf copies data_body out of it again
// into a second fresh allocation. For a 256 MiB DoPut that was 512 MiB
// allocated and 512 MiB copied before the writer saw a byte.

// FlightData's other fields (Flight.proto).
const (
	fieldFlightDescriptor protowire.Number = 1
	fieldAppMetadata      protowire.Number = 3
)

var errFlightData = errors.New("flight: malformed FlightData message")

// unmarshalFlightData decodes a FlightData from data, as proto.Unmarshal
// does, except that data_header, app_metadata and data_body alias the
// single copy of the message instead of each being copied again.
func unmarshalFlightData(data mem.BufferSlice, fd *flight.FlightData) error {
	buf := dirtmake.Bytes(data.Len(), data.Len())
	data.CopyTo(buf) // every byte of buf is written here
	return decodeFlightData(buf, fd)
}

// decodeFlightData fills fd from the protobuf encoding b, keeping slices
// of b for its byte fields. Like protobuf: the last occurrence of a scalar
// field wins, occurrences of the descriptor are merged, unknown fields are
// kept (they travel with the message, as in proto.Unmarshal).
func decodeFlightData(b []byte, fd *flight.FlightData) error {
	fd.Reset()
	var unknown []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", errFlightData, protowire.ParseError(n))
		}
		if num > protowire.MaxValidNumber {
			return fmt.Errorf("%w: field number %d", errFlightData, num)
		}
		field := b
		b = b[n:]
		var val []byte
		if typ == protowire.BytesType {
			val, n = protowire.ConsumeBytes(b)
		} else {
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("%w: field %d: %v", errFlightData, num, protowire.ParseError(n))
		}
		field, b = field[:len(field)-len(b)+n], b[n:]
		known := typ == protowire.BytesType
		switch {
		case known && num == fieldFlightDescriptor:
			if fd.FlightDescriptor == nil {
				fd.FlightDescriptor = new(flight.FlightDescriptor)
			}
			if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(val, fd.FlightDescriptor); err != nil {
				return fmt.Errorf("%w: flight_descriptor: %v", errFlightData, err)
			}
		case known && num == fieldDataHeader:
			fd.DataHeader = val
		case known && num == fieldAppMetadata:
			fd.AppMetadata = val
		case known && num == fieldDataBody:
			fd.DataBody = val
		default:
			unknown = append(unknown, field...)
		}
	}
	if unknown != nil {
		fd.ProtoReflect().SetUnknown(unknown)
	}
	return nil
}
