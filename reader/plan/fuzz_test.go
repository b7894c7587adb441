package plan

import (
	"testing"

	"github.com/tileflight/tileflight/query"
)

// Any query, however malformed, resolves or fails with an error, and a
// resolved plan splits and estimates without panicking.
func FuzzResolve(f *testing.F) {
	a := openCase(f, "rd_col_multirange")
	u := openCase(f, "rd_int_extremes")
	for _, s := range []string{
		`{"array":"x"}`,
		`{"array":"x","subarray":{"r":[[1,9],[2,2]],"c":[[2,11]]},"layout":"col-major"}`,
		`{"array":"x","subarray":{"u":[[18446744073709551496,18446744073709551585]]}}`,
		`{"array":"x","subarray":{"r":[[1e0,5.0]]},"columns":["a","r"],"limit":3}`,
		`{"array":"x","subarray":{"r":[["a","b"]]}}`,
	} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, b []byte, n uint8) {
		q, err := query.Parse(b)
		if err != nil {
			return
		}
		for _, ar := range []*arrayRef{{a}, {u}} {
			p, err := Resolve(ar.a, q)
			if err != nil {
				continue
			}
			EstimateRows(p)
			for _, sq := range Split(p, int(n%8)) {
				if _, err := sq.MarshalJSON(); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}
