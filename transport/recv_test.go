package transport

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// recvCases are FlightData encodings as clients send them, and the odd
// shapes protobuf allows: repeated fields, fields out of order, unknown
// fields, empty bytes, a field of a known number with another wire type.
func recvCases(t testing.TB) map[string][]byte {
	marshal := func(m *flight.FlightData) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	desc := &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(`{"array": "a"}`)}
	body := bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7, 8}, 1<<14)
	var odd []byte
	odd = protowire.AppendTag(odd, fieldDataBody, protowire.BytesType)
	odd = protowire.AppendBytes(odd, []byte("first body"))
	odd = protowire.AppendTag(odd, 77, protowire.VarintType) // unknown
	odd = protowire.AppendVarint(odd, 12345)
	odd = protowire.AppendTag(odd, fieldDataHeader, protowire.BytesType)
	odd = protowire.AppendBytes(odd, nil)
	odd = protowire.AppendTag(odd, fieldFlightDescriptor, protowire.BytesType)
	odd = protowire.AppendBytes(odd, []byte{8, 2}) // type CMD
	odd = protowire.AppendTag(odd, fieldFlightDescriptor, protowire.BytesType)
	odd = protowire.AppendBytes(odd, []byte{18, 1, 'x'})                    // cmd "x", merged
	odd = protowire.AppendTag(odd, fieldAppMetadata, protowire.Fixed32Type) // known number, wrong type
	odd = protowire.AppendFixed32(odd, 9)
	odd = protowire.AppendTag(odd, fieldDataBody, protowire.BytesType)
	odd = protowire.AppendBytes(odd, []byte("second body wins"))
	return map[string][]byte{
		"empty":      nil,
		"schema":     marshal(&flight.FlightData{FlightDescriptor: desc, DataHeader: []byte("schema header")}),
		"batch":      marshal(&flight.FlightData{DataHeader: []byte("batch header"), DataBody: body}),
		"metadata":   marshal(&flight.FlightData{AppMetadata: []byte("app"), DataBody: []byte{}}),
		"odd shapes": odd,
	}
}

// TestDecodeFlightData: the aliasing decoder reads every case as
// proto.Unmarshal does (unknown fields included), from any split of the
// message into gRPC buffers, and its byte fields are slices of one copy.
func TestDecodeFlightData(t *testing.T) {
	for name, enc := range recvCases(t) {
		t.Run(name, func(t *testing.T) {
			want := new(flight.FlightData)
			if err := proto.Unmarshal(enc, want); err != nil {
				t.Fatal(err)
			}
			for _, split := range []int{1, 3, 1 << 10, len(enc) + 1} {
				var bs mem.BufferSlice
				for rest := enc; len(rest) > 0; {
					n := min(split, len(rest))
					bs = append(bs, mem.SliceBuffer(rest[:n]))
					rest = rest[n:]
				}
				got := &flight.FlightData{DataBody: []byte("stale"), AppMetadata: []byte("stale")}
				if err := unmarshalFlightData(bs, got); err != nil {
					t.Fatalf("split %d: %v", split, err)
				}
				if !proto.Equal(got, want) {
					t.Fatalf("split %d: got %v, want %v", split, got, want)
				}
				if len(got.DataBody) > 0 && len(enc) > 0 && &got.DataBody[0] == &enc[len(enc)-len(got.DataBody)] {
					t.Fatalf("split %d: data_body aliases gRPC's buffer, which gRPC frees after Unmarshal", split)
				}
			}
		})
	}
}

func TestDecodeFlightDataErrors(t *testing.T) {
	full := recvCases(t)["batch"]
	for name, enc := range map[string][]byte{
		"truncated body":         full[:len(full)-1],
		"truncated tag":          {0x80},
		"field number 0":         {0x02, 0x00},
		"end group at the top":   {0x0c},
		"bad descriptor":         {0x0a, 0x02, 0x08, 0x80}, // flight_descriptor holding a truncated varint
		"length past the end":    {0x12, 0x05, 'a'},
		"overlong length varint": {0x12, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	} {
		if err := proto.Unmarshal(enc, new(flight.FlightData)); err == nil {
			t.Fatalf("%s: proto.Unmarshal accepts it; the case is wrong", name)
		}
		if err := decodeFlightData(enc, new(flight.FlightData)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzDecodeFlightData: for any bytes, the aliasing decoder fails where
// proto.Unmarshal fails and otherwise yields the same fields. Unknown
// fields are compared by the table test only: protobuf rewrites the tag
// of a known field number met with another wire type in canonical form,
// where ours keeps the bytes as they came (nobody reads them).
func FuzzDecodeFlightData(f *testing.F) {
	for _, enc := range recvCases(f) {
		f.Add(enc)
	}
	f.Fuzz(func(t *testing.T, enc []byte) {
		want := new(flight.FlightData)
		werr := proto.Unmarshal(enc, want)
		got := new(flight.FlightData)
		gerr := decodeFlightData(bytes.Clone(enc), got)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("proto.Unmarshal: %v; ours: %v", werr, gerr)
		}
		want.ProtoReflect().SetUnknown(nil)
		got.ProtoReflect().SetUnknown(nil)
		if werr == nil && !proto.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}
