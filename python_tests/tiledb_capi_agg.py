"""An oracle for TileDB 2.30's min/max aggregates of strings.

TileDB-Py 0.36.1's `query().agg()` cannot compute them (it gives the
aggregate a fixed-size result buffer: "Aggregate must have a fixed size
buffer"), but the TileDB core it bundles can: this module drives the core's
C API (the query channel / unary aggregate functions of
`tiledb/api/c_api/query_aggregate`) through ctypes on the very library
TileDB-Py loads, with the offsets, data and validity buffers a var-sized
result needs. Only what the tests need: min or max of one attribute, an
optional single-comparison condition, an optional range on dimension 0.
"""

import ctypes
import glob
import os

import tiledb

_LIB = None

READ, ROW_MAJOR, UNORDERED = 0, 0, 3
OPS = {"<": 0, "<=": 1, ">": 2, ">=": 3, "==": 4, "!=": 5}


def _lib():
    global _LIB
    if _LIB is None:
        libs = os.path.join(os.path.dirname(os.path.dirname(tiledb.__file__)), "tiledb.libs")
        path = sorted(glob.glob(os.path.join(libs, "libtiledb*.so*")))[0]
        _LIB = ctypes.CDLL(path)
    return _LIB


class CAPIError(Exception):
    pass


def string_minmax(uri, attr, op, dense, cond=None, dim_range=None, value_size=1 << 16):
    """TileDB's op ("min"/"max") of the string attribute attr: (bytes, valid).

    cond: (field, "<"|..., value bytes) or None; dim_range: (lo, hi, ctype)
    on dimension 0 or None. Raises CAPIError with TileDB's message."""
    lib = _lib()
    vp = ctypes.c_void_p
    ctx, arr, q, ch, oper, operation = vp(), vp(), vp(), vp(), vp(), vp()

    def check(rc):
        if rc != 0:
            err, msg = vp(), ctypes.c_char_p()
            lib.tiledb_ctx_get_last_error(ctx, ctypes.byref(err))
            lib.tiledb_error_message(err, ctypes.byref(msg))
            text = msg.value.decode() if msg.value else f"rc {rc}"
            lib.tiledb_error_free(ctypes.byref(err))
            raise CAPIError(text)

    check(lib.tiledb_ctx_alloc(None, ctypes.byref(ctx)))
    try:
        check(lib.tiledb_array_alloc(ctx, uri.encode(), ctypes.byref(arr)))
        check(lib.tiledb_array_open(ctx, arr, READ))
        check(lib.tiledb_query_alloc(ctx, arr, READ, ctypes.byref(q)))
        check(lib.tiledb_query_set_layout(ctx, q, ROW_MAJOR if dense else UNORDERED))
        keep = []
        if dim_range is not None:
            sub = vp()
            lo, hi, ct = dim_range
            a, b = ct(lo), ct(hi)
            keep += [a, b]
            check(lib.tiledb_subarray_alloc(ctx, arr, ctypes.byref(sub)))
            check(lib.tiledb_subarray_add_range(ctx, sub, ctypes.c_uint32(0), ctypes.byref(a), ctypes.byref(b), None))
            check(lib.tiledb_query_set_subarray_t(ctx, q, sub))
            lib.tiledb_subarray_free(ctypes.byref(sub))
        if cond is not None:
            qc = vp()
            field, cop, value = cond
            buf = ctypes.create_string_buffer(value, len(value))
            keep.append(buf)
            check(lib.tiledb_query_condition_alloc(ctx, ctypes.byref(qc)))
            check(lib.tiledb_query_condition_init(ctx, qc, field.encode(), buf, ctypes.c_uint64(len(value)), OPS[cop]))
            check(lib.tiledb_query_set_condition(ctx, q, qc))
            lib.tiledb_query_condition_free(ctypes.byref(qc))
        check(lib.tiledb_query_get_default_channel(ctx, q, ctypes.byref(ch)))
        getter = lib.tiledb_channel_operator_min_get if op == "min" else lib.tiledb_channel_operator_max_get
        check(getter(ctx, ctypes.byref(oper)))
        check(lib.tiledb_create_unary_aggregate(ctx, q, oper, attr.encode(), ctypes.byref(operation)))
        out = f"{op}_{attr}".encode()
        check(lib.tiledb_channel_apply_aggregate(ctx, ch, out, operation))
        with tiledb.open(uri) as A:
            at = A.schema.attr(attr)
            var, nullable, fixed = at.isvar, at.isnullable, at.dtype.itemsize
        data = ctypes.create_string_buffer(value_size if var else fixed)
        data_size = ctypes.c_uint64(len(data))
        offs = (ctypes.c_uint64 * 1)()
        offs_size = ctypes.c_uint64(8)
        valid = (ctypes.c_uint8 * 1)()
        valid_size = ctypes.c_uint64(1)
        if var:
            check(lib.tiledb_query_set_data_buffer(ctx, q, out, data, ctypes.byref(data_size)))
            check(lib.tiledb_query_set_offsets_buffer(ctx, q, out, offs, ctypes.byref(offs_size)))
        else:
            check(lib.tiledb_query_set_data_buffer(ctx, q, out, data, ctypes.byref(data_size)))
        if nullable:
            check(lib.tiledb_query_set_validity_buffer(ctx, q, out, valid, ctypes.byref(valid_size)))
        check(lib.tiledb_query_submit(ctx, q))
        value = data.raw[:data_size.value]
        return value, (bool(valid[0]) if nullable else True)
    finally:
        if operation:
            lib.tiledb_aggregate_free(None, ctypes.byref(operation))
        if ch:
            lib.tiledb_query_channel_free(None, ctypes.byref(ch))
        if q:
            lib.tiledb_query_free(ctypes.byref(q))
        if arr:
            lib.tiledb_array_close(ctx, arr)
            lib.tiledb_array_free(ctypes.byref(arr))
        lib.tiledb_ctx_free(ctypes.byref(ctx))
