package writer

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/arraymeta"
)

// MetadataFromJSON converts put_metadata's JSON values (one per key) to
// metadata values for PutMetadataWith. A key that is empty or holds a NUL
// byte, or a value that is not a string, a number, a boolean or a list of
// numbers, is InvalidArgument naming the key.
func MetadataFromJSON(raw map[string]json.RawMessage) (map[string]arraymeta.Value, error) {
	values := make(map[string]arraymeta.Value, len(raw))
	for k, r := range raw {
		if k == "" || strings.ContainsRune(k, 0) {
			return nil, errkind.Errorf(errkind.InvalidArgument, "metadata key %q: empty or holds a NUL byte", k)
		}
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.UseNumber()
		var x any
		if err := dec.Decode(&x); err != nil {
			return nil, errkind.Errorf(errkind.InvalidArgument, "metadata key %q: %v", k, err)
		}
		v, err := arraymeta.FromJSON(x)
		if err != nil {
			return nil, errkind.Errorf(errkind.InvalidArgument, "metadata key %q: %v (values are a string, a number, a boolean or a list of numbers)", k, err)
		}
		values[k] = v
	}
	return values, nil
}
