"""Helpers for the fixture generators: describe what TileDB reports about an
array (schema, fragments, metadata, read results) as plain JSON.

The JSON layout is documented in python_tests/README.md; the Go mirror of it
lives in internal/fixtures.
"""

from .describe import (  # noqa: F401
    EXPECT_FORMAT,
    describe_fragments,
    describe_metadata,
    describe_schema,
    describe_to_vacuum,
    encode_read,
    list_files,
)
