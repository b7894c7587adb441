"""Write TileDB array schemas covering the schema format, for format/schema.

usage: schema_cases.py OUTDIR

For every case an array is created with the tiledb package (TileDB 2.30), and
OUTDIR receives:
  <case>.<i>.schema      the i-th schema file of the array (generic tile, as
                         written), in the order TileDB wrote them
  <case>.enum.<file>     each enumeration file (generic tile, as written)
  <case>.json            what tiledb reports about each schema, keyed by the
                         schema file index, plus the enumeration values

The Go tests in format/schema decode the files, compare them with the JSON
and require that re-encoding the payload reproduces TileDB's bytes.
"""

import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import tiledb

OUT = None
TMP = None


def filt_json(f):
    d = {"class": type(f).__name__}
    for opt in ("level", "window", "reinterp_dtype", "factor", "offset", "bytewidth",
                "quality", "lossless", "input_format"):
        if hasattr(f, opt):
            v = getattr(f, opt)
            if opt == "reinterp_dtype":
                v = None if v is None else str(np.dtype(v))
            elif opt == "input_format":
                v = int(v.value) if hasattr(v, "value") else int(v)
            elif isinstance(v, (np.floating, float)):
                v = float(v)
            elif isinstance(v, (np.integer, int, bool, np.bool_)):
                v = int(v)
            d[opt] = v
    return d


def flist(fl):
    return {"chunksize": int(fl.chunksize), "filters": [filt_json(f) for f in fl]}


def tdtype(x):
    return str(x._tiledb_dtype).split(".")[-1].lower()


def scalar(v):
    if v is None:
        return None
    if isinstance(v, (bytes, np.bytes_)):
        return "hex:" + bytes(v).hex()
    if isinstance(v, str):
        return v
    if isinstance(v, np.datetime64) or isinstance(v, np.timedelta64):
        return int(v.astype(np.int64))
    if isinstance(v, (np.floating, float)):
        f = float(v)
        return "nan" if f != f else f
    if isinstance(v, (np.integer, int, np.bool_, bool)):
        return int(v)
    return repr(v)


def dump(schema):
    d = {
        "version": int(schema.version),
        "sparse": bool(schema.sparse),
        "allows_duplicates": bool(schema._allows_dups),
        "cell_order": schema.cell_order,
        "tile_order": schema.tile_order,
        "capacity": int(schema.capacity),
        "coords_filters": flist(schema.coords_filters),
        "offsets_filters": flist(schema.offsets_filters),
        "validity_filters": flist(schema.validity_filters),
        "dims": [],
        "attrs": [],
    }
    for dim in schema.domain:
        dd = {
            "name": dim.name,
            "type": tdtype(dim),
            "cell_val_num": int(dim._ncell),
            "filters": flist(dim.filters),
        }
        if dim.isvar:
            dd["domain"] = None
            dd["tile"] = None
        else:
            dd["domain"] = [scalar(x) for x in dim.domain]
            t = dim.tile
            dd["tile"] = None if t is None else scalar(t)
        d["dims"].append(dd)
    for i in range(schema.nattr):
        a = schema.attr(i)
        ad = {
            "name": a.name,
            "type": tdtype(a),
            "cell_val_num": int(a._ncell),
            "nullable": bool(a.isnullable),
            "filters": flist(a.filters),
            "enum_label": a.enum_label,
        }
        if not a.isnullable:
            try:
                fb = np.asarray(a._fill).tobytes()
            except Exception:  # noqa: BLE001 - pybind cannot convert some types
                fb = None
            ad["fill_hex"] = None if fb is None else fb.hex()
        d["attrs"].append(ad)
    try:
        cd = schema.current_domain
        if cd is not None and not cd.is_empty:
            nd = cd.ndrectangle
            d["current_domain"] = [[scalar(x) for x in nd.range(i)] for i in range(schema.domain.ndim)]
    except Exception:  # noqa: BLE001 - absent in old schemas
        pass
    return d


def save(name, uri, steps):
    """Copy the schema and enumeration files of uri; steps[i] = dump of schema i."""
    sdir = os.path.join(uri, "__schema")
    files = sorted(f for f in os.listdir(sdir) if f.startswith("__") and os.path.isfile(os.path.join(sdir, f)))
    assert len(files) == len(steps), (name, files, len(steps))
    for i, f in enumerate(files):
        shutil.copy(os.path.join(sdir, f), os.path.join(OUT, f"{name}.{i}.schema"))
        steps[i]["file"] = f
    enums = {}
    edir = os.path.join(sdir, "__enumerations")
    if os.path.isdir(edir):
        for f in sorted(os.listdir(edir)):
            shutil.copy(os.path.join(edir, f), os.path.join(OUT, f"{name}.enum.{f}"))
    with tiledb.open(uri) as A:
        for ename in sorted(enums_of(A.schema)):
            e = A.enum(ename)
            vals = e.values()
            enums[ename] = {
                "type": str(e.dtype),
                "ordered": bool(e.ordered),
                "cell_val_num": int(e.cell_val_num),
                "values": [scalar(v) for v in vals],
            }
    with open(os.path.join(OUT, f"{name}.json"), "w") as fh:
        json.dump({"schemas": steps, "enumerations": enums}, fh, indent=1, sort_keys=True)


def enums_of(schema):
    names = set()
    for i in range(schema.nattr):
        if schema.attr(i).enum_label:
            names.add(schema.attr(i).enum_label)
    return names


def create(name, schema, evolve=()):
    uri = os.path.join(TMP, name)
    tiledb.Array.create(uri, schema)
    steps = [dump(tiledb.ArraySchema.load(uri))]
    for ev in evolve:
        # Schema files are ordered by their millisecond timestamps.
        time.sleep(0.005)
        se = tiledb.ArraySchemaEvolution()
        ev(se)
        se.array_evolve(uri)
        steps.append(dump(tiledb.ArraySchema.load(uri)))
    save(name, uri, steps)


def dim(name, lo, hi, tile, dtype, **kw):
    return tiledb.Dim(name, domain=(lo, hi), tile=tile, dtype=dtype, **kw)


def main():
    global OUT, TMP
    OUT = sys.argv[1]
    os.makedirs(OUT, exist_ok=True)
    TMP = tempfile.mkdtemp()
    try:
        cases()
    finally:
        shutil.rmtree(TMP)


def cases():
    # Dense 2D with defaults.
    create("dense_basic", tiledb.ArraySchema(
        domain=tiledb.Domain(dim("rows", 1, 4, 2, np.int32), dim("cols", 1, 4, 2, np.int32)),
        attrs=[tiledb.Attr("a", dtype=np.int32)]))

    # Dense: null tile extent, col-major orders, every integer dim type.
    for dt in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"):
        create(f"dense_dim_{dt}", tiledb.ArraySchema(
            domain=tiledb.Domain(dim("d", 0, 99, None if dt == "int8" else 10, dt)),
            attrs=[tiledb.Attr("v", dtype=np.float64)],
            cell_order="col-major", tile_order="col-major"))
    create("dense_datetime", tiledb.ArraySchema(
        domain=tiledb.Domain(tiledb.Dim("t", domain=(np.datetime64(0, "D"), np.datetime64(365, "D")),
                                        tile=np.timedelta64(7, "D"), dtype="datetime64[D]")),
        attrs=[tiledb.Attr("v", dtype=np.int16)]))

    # Every attribute datatype the Python API can express, dense.
    attrs = []
    for dt in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
               "float32", "float64", "bool"):
        attrs.append(tiledb.Attr(f"a_{dt}", dtype=dt))
    for unit in ("Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns", "ps", "fs", "as"):
        attrs.append(tiledb.Attr(f"dt_{unit}", dtype=f"datetime64[{unit}]"))
    for unit in ("h", "m", "s", "ms", "us", "ns", "ps", "fs", "as"):
        attrs.append(tiledb.Attr(f"tm_{unit}", dtype=f"timedelta64[{unit}]"))
    attrs += [
        tiledb.Attr("s_ascii", dtype="ascii", var=True),
        tiledb.Attr("s_utf8", dtype=str, var=True),
        tiledb.Attr("s_bytes", dtype=bytes, var=True),
        tiledb.Attr("s_fixed", dtype="S3"),
        tiledb.Attr("f_pair", dtype=np.dtype([("", np.float64)] * 2)),
        tiledb.Attr("c_i32", dtype=np.dtype("int32, int32, int32")),
        tiledb.Attr("v_f64", dtype=np.float64, var=True),
    ]
    create("dense_all_attr_types", tiledb.ArraySchema(
        domain=tiledb.Domain(dim("d", 0, 9, 5, np.uint64)), attrs=attrs))

    # Blob / geometry types via the low-level datatype enum, if accepted.
    try:
        from tiledb.datatypes import DataType  # noqa: F401
    except Exception:  # noqa: BLE001
        pass
    extra = []
    for nm, dt in (("blob", "blob"), ("wkb", "wkb"), ("wkt", "wkt")):
        try:
            extra.append(tiledb.Attr(nm, dtype=dt, var=True))
        except Exception:  # noqa: BLE001
            pass
    if extra:
        try:
            create("sparse_blob_geom", tiledb.ArraySchema(
                domain=tiledb.Domain(dim("d", 0, 9, 5, np.int64)), attrs=extra, sparse=True))
        except Exception as e:  # noqa: BLE001
            print("skip blob/geom:", e)

    # Fill values, nullable attributes.
    create("dense_fill", tiledb.ArraySchema(
        domain=tiledb.Domain(dim("d", 0, 9, 5, np.int32)),
        attrs=[
            tiledb.Attr("i", dtype=np.int32, fill=-7),
            tiledb.Attr("f", dtype=np.float32, fill=1.5),
            tiledb.Attr("u", dtype=np.uint8, fill=3),
            tiledb.Attr("s", dtype="S2", fill=b"zz"),
            tiledb.Attr("n", dtype=np.int64, nullable=True),
            tiledb.Attr("ns", dtype="ascii", var=True, nullable=True),
            tiledb.Attr("p", dtype=np.dtype("float64, float64"), fill=(1.0, 2.0)),
            tiledb.Attr("dt", dtype="datetime64[ms]", fill=np.datetime64(5, "ms")),
        ]))

    # Sparse: float, string and mixed dimensions; hilbert; capacity; dups.
    create("sparse_float_hilbert", tiledb.ArraySchema(
        domain=tiledb.Domain(dim("x", -1000.0, 1000.0, 100.0, np.float64), dim("y", 0.0, 1.0, None, np.float32)),
        attrs=[tiledb.Attr("v", dtype=np.float32)],
        sparse=True, cell_order="hilbert", capacity=777, allows_duplicates=True))
    create("sparse_string_dims", tiledb.ArraySchema(
        domain=tiledb.Domain(tiledb.Dim("s", domain=(None, None), tile=None, dtype="ascii"),
                             dim("i", 0, 1 << 40, 1 << 20, np.int64)),
        attrs=[tiledb.Attr("v", dtype=np.int8)],
        sparse=True, cell_order="col-major", tile_order="row-major", capacity=3))
    create("sparse_time_dims", tiledb.ArraySchema(
        domain=tiledb.Domain(
            tiledb.Dim("t", domain=(np.datetime64(-5, "ns"), np.datetime64(10**15, "ns")), tile=np.timedelta64(10**9, "ns"), dtype="datetime64[ns]"),
            tiledb.Dim("u", domain=(0, 1000), tile=10, dtype=np.uint16)),
        attrs=[tiledb.Attr("v", dtype=np.uint32)], sparse=True))
    create("sparse_no_attrs", tiledb.ArraySchema(
        domain=tiledb.Domain(dim("x", 0, 9, 2, np.int32)), attrs=[], sparse=True))

    # Filters with non-default options on every pipeline.
    Z = tiledb
    create("sparse_filters", tiledb.ArraySchema(
        domain=tiledb.Domain(
            dim("x", 0, 1 << 30, 1024, np.int64, filters=Z.FilterList([Z.DoubleDeltaFilter(reinterp_dtype=np.int64), Z.ZstdFilter(level=7)])),
            dim("y", 0.0, 10.0, 1.0, np.float64, filters=Z.FilterList([Z.FloatScaleFilter(factor=0.5, offset=2.0, bytewidth=4), Z.XORFilter()])),
            tiledb.Dim("s", domain=(None, None), tile=None, dtype="ascii", filters=Z.FilterList([Z.RleFilter(), Z.GzipFilter(level=9)]))),
        attrs=[
            tiledb.Attr("a", dtype=np.int32, filters=Z.FilterList([Z.BitWidthReductionFilter(window=128), Z.LZ4Filter(level=2)], chunksize=4096)),
            tiledb.Attr("b", dtype=np.uint64, filters=Z.FilterList([Z.PositiveDeltaFilter(window=64), Z.Bzip2Filter(level=3)])),
            tiledb.Attr("c", dtype=np.float32, filters=Z.FilterList([Z.BitShuffleFilter(), Z.ByteShuffleFilter(), Z.ChecksumMD5Filter(), Z.ChecksumSHA256Filter()])),
            tiledb.Attr("d", dtype="ascii", var=True, filters=Z.FilterList([Z.DictionaryFilter(level=-1), Z.ZstdFilter(level=-3)])),
            tiledb.Attr("e", dtype=np.int16, filters=Z.FilterList([Z.DeltaFilter(reinterp_dtype=np.int16), Z.NoOpFilter()])),
            tiledb.Attr("f", dtype=np.int64, filters=Z.FilterList([Z.DoubleDeltaFilter()])),
            tiledb.Attr("g", dtype=np.int8, nullable=True, filters=Z.FilterList([])),
        ],
        coords_filters=Z.FilterList([Z.LZ4Filter(level=5)]),
        offsets_filters=Z.FilterList([Z.PositiveDeltaFilter(window=32), Z.BitWidthReductionFilter(window=256), Z.GzipFilter(level=4)]),
        validity_filters=Z.FilterList([Z.ChecksumMD5Filter(), Z.Bzip2Filter()]),
        sparse=True))
    try:
        create("dense_webp", tiledb.ArraySchema(
            domain=tiledb.Domain(dim("y", 1, 64, 16, np.uint32), dim("x", 1, 96, 48, np.uint32)),
            attrs=[tiledb.Attr("rgb", dtype=np.uint8, filters=Z.FilterList([Z.WebpFilter(input_format=tiledb.libtiledb.WebpInputFormat.WEBP_RGB, quality=80.0, lossless=False)]))]))
        create("dense_webp_lossless", tiledb.ArraySchema(
            domain=tiledb.Domain(dim("y", 1, 64, 8, np.int64), dim("x", 1, 128, 32, np.int64)),
            attrs=[tiledb.Attr("bgra", dtype=np.uint8, filters=Z.FilterList([Z.WebpFilter(input_format=tiledb.libtiledb.WebpInputFormat.WEBP_BGRA, quality=100.0, lossless=True)]))]))
    except Exception as e:  # noqa: BLE001
        print("skip webp:", e)

    # Enumerations: integer and string, ordered and not.
    create("enum_basic", tiledb.ArraySchema(
        domain=tiledb.Domain(dim("d", 0, 9, 10, np.int64)),
        attrs=[tiledb.Attr("color", dtype=np.uint8, enum_label="colors"),
               tiledb.Attr("level", dtype=np.int32, enum_label="levels"),
               tiledb.Attr("w", dtype=np.uint16, enum_label="weights")],
        enums=[tiledb.Enumeration("colors", False, values=["red", "green", "blue"]),
               tiledb.Enumeration("levels", True, values=np.array([10, 20, 30], dtype=np.int64)),
               tiledb.Enumeration("weights", True, values=np.array([0.5, 1.5], dtype=np.float32)),
               tiledb.Enumeration("empty", False, dtype=np.int32)],
        sparse=True))

    # Schema evolution: add, drop, extend an enumeration.
    def add_attr(se):
        se.add_attribute(tiledb.Attr("added", dtype=np.float64, fill=3.25))

    def drop_attr(se):
        se.drop_attribute("b")

    def extend_enum(se):
        with tiledb.open(os.path.join(TMP, "evolution")) as A:
            e = A.enum("colors")
        se.extend_enumeration(e.extend(["cyan", "magenta"]))

    def add_enum(se):
        se.add_enumeration(tiledb.Enumeration("sizes", True, values=["s", "m", "l"]))
    create("evolution", tiledb.ArraySchema(
        domain=tiledb.Domain(dim("d", 0, 99, 10, np.int32)),
        attrs=[tiledb.Attr("a", dtype=np.int32), tiledb.Attr("b", dtype="ascii", var=True),
               tiledb.Attr("c", dtype=np.int16, enum_label="colors")],
        enums=[tiledb.Enumeration("colors", False, values=["red", "green"])]),
        evolve=[add_attr, drop_attr, extend_enum, add_enum])

    # Current domain (NDRectangle).
    ctx = tiledb.default_ctx()
    dom = tiledb.Domain(dim("x", 0, 1 << 20, 64, np.int64), dim("y", 0, 999, 10, np.uint32))
    cd = tiledb.CurrentDomain(ctx)
    nd = tiledb.NDRectangle(ctx, dom)
    nd.set_range(0, 0, 99)
    nd.set_range(1, 5, 50)
    cd.set_ndrectangle(nd)
    s = tiledb.ArraySchema(domain=dom, attrs=[tiledb.Attr("v", dtype=np.float64)], sparse=True)
    s.set_current_domain(cd)
    create("current_domain", s)

    dom = tiledb.Domain(tiledb.Dim("s", domain=(None, None), tile=None, dtype="ascii"), dim("i", 0, 99, 10, np.int32))
    cd = tiledb.CurrentDomain(ctx)
    nd = tiledb.NDRectangle(ctx, dom)
    nd.set_range(0, "apple", "pear")
    nd.set_range(1, 3, 7)
    cd.set_ndrectangle(nd)
    s = tiledb.ArraySchema(domain=dom, attrs=[tiledb.Attr("v", dtype=np.int32)], sparse=True)
    s.set_current_domain(cd)
    create("current_domain_string", s)

    # Dimension labels.
    try:
        d0 = dim("d", 0, 9, 5, np.uint64)
        s = tiledb.ArraySchema(
            domain=tiledb.Domain(d0), attrs=[tiledb.Attr("a", dtype=np.int32)],
            dim_labels={0: {"lab": d0.create_label_schema("decreasing", np.float64),
                            "slab": d0.create_label_schema("increasing", "ascii")}})
        create("dim_labels", s)
    except Exception as e:  # noqa: BLE001
        print("skip dim labels:", e)


if __name__ == "__main__":
    main()
