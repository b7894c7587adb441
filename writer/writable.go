package writer

import (
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/pipeline"
	"github.com/tileflight/tileflight/format/schema"
)

// CheckWritable refuses (Unimplemented) an array whose filters can be
// decoded but not encoded (WebP: there is no pure-Go WebP encoder), so
// that a service can refuse a write before reading any row: without it
// the refusal would come only when the first fragment is cut.
func CheckWritable(s *schema.ArraySchema) error {
	check := func(role, field string, p pipeline.Pipeline) error {
		if p.Has(pipeline.WebP) {
			return errkind.Errorf(errkind.Unimplemented, "%s %q has a webp filter: WebP tiles are read but cannot be written (no pure-Go WebP encoder)", role, field)
		}
		return nil
	}
	for _, at := range s.Attributes {
		if err := check("attribute", at.Name, at.Filters); err != nil {
			return err
		}
	}
	if !s.IsDense() {
		for _, d := range s.Dimensions {
			if err := check("dimension", d.Name, d.Filters); err != nil {
				return err
			}
		}
	}
	return nil
}
