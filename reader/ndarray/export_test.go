package ndarray

// The tests of package ndarray_test read through package reader (which
// imports this one), so they reach the package's test hooks and counters
// through these names, defined for tests only.
var (
	GroupBytes       = &b2ndGroupBytes
	DirectGroupBytes = &b2ndDirectGroupBytes
	DirectReads      = &b2ndDirectReads
	DirectFrees      = &b2ndDirectFrees
	DirectBlock      = &b2ndDirectBlock
	SpanBlocks       = &b2ndSpanBlocks
	SpecialChunks    = &b2ndSpecialChunks
	BeforeDecode     = &b2ndBeforeDecode
	BeforeHead       = &b2ndBeforeHead
)

// BlockKey names a block of a chunk (DirectBlock's argument).
type BlockKey = blockKey

// Key is the BlockKey of block of chunk.
func Key(chunk int64, block int) BlockKey { return blockKey{chunk, block} }
