"""flightd over TLS: a self-signed certificate made with openssl, the daemon
started with -tls-cert/-tls-key, pyarrow Flight clients that trust it (or
not), and bearer tokens on top of TLS."""

import os
import subprocess

import numpy as np
import pyarrow.flight as fl
import pytest
import tiledb

from flightd_fixture import action, expect_code, flightd_bin, read, running  # noqa: F401

ROWS = 37


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    """(cert path, key path, cert PEM bytes) for 127.0.0.1 and localhost."""
    d = tmp_path_factory.mktemp("tls")
    crt, key = d / "cert.pem", d / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(crt), "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    return str(crt), str(key), crt.read_bytes()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A data directory with one sparse array written by TileDB."""
    d = tmp_path_factory.mktemp("tls-data")
    uri = os.path.join(d, "pts")
    dom = tiledb.Domain(tiledb.Dim("k", domain=(0, 999), tile=100, dtype=np.int64))
    tiledb.Array.create(uri, tiledb.ArraySchema(domain=dom, sparse=True,
                                                attrs=[tiledb.Attr("v", dtype=np.float64)]))
    k = np.arange(0, 3 * ROWS, 3, dtype=np.int64)
    with tiledb.open(uri, "w") as A:
        A[k] = {"v": k * 0.5}
    return d


def tiledb_rows(data):
    with tiledb.open(os.path.join(data, "pts")) as A:
        r = A.query(order="G")[:]
    return {"k": r["k"].tolist(), "v": r["v"].tolist()}


def tls_flags(cert):
    return ["-tls-cert", cert[0], "-tls-key", cert[1]]


def quick(seconds=10):
    return fl.FlightCallOptions(timeout=seconds)


def test_tls_list_flights_and_doget(flightd_bin, cert, data):
    with running(flightd_bin, data, *tls_flags(cert)) as d:
        assert d.url.startswith("grpc+tls://127.0.0.1:"), d.url
        c = fl.connect(d.url, tls_root_certs=cert[2])
        infos = list(c.list_flights(options=quick()))
        assert [i.descriptor.path for i in infos] == [[b"pts"]]
        assert infos[0].schema.names == ["k", "v"]
        got = read(c, options=quick(), array="pts", layout="global")
        assert got.to_pydict() == tiledb_rows(data)
        # The endpoint ListFlights hands out reads the same rows over TLS.
        t = c.do_get(infos[0].endpoints[0].ticket, options=quick()).read_all()
        assert t.sort_by("k").to_pydict() == tiledb_rows(data)
        c.close()


def test_tls_refuses_plaintext_and_untrusted_clients(flightd_bin, cert, data):
    with running(flightd_bin, data, *tls_flags(cert)) as d:
        host_port = d.url.split("://", 1)[1]
        plain = fl.connect("grpc://" + host_port)
        with pytest.raises(fl.FlightError):
            list(plain.list_flights(options=quick(5)))
        plain.close()
        # TLS without trusting the self-signed certificate: the handshake
        # fails on the client's side.
        untrusted = fl.connect(d.url)
        with pytest.raises(fl.FlightError):
            list(untrusted.list_flights(options=quick(5)))
        untrusted.close()
        # The daemon is still serving trusted clients after both.
        ok = fl.connect(d.url, tls_root_certs=cert[2])
        assert action(ok, "list_arrays", options=quick()) == ["pts"]
        ok.close()


def test_tls_with_tokens(flightd_bin, cert, data, tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("tls-secret ro\n")
    with running(flightd_bin, data, *tls_flags(cert), "-tokens-file", str(tokens)) as d:
        c = fl.connect(d.url, tls_root_certs=cert[2])
        expect_code("UNAUTHENTICATED", lambda: list(c.list_flights(options=quick())))
        expect_code("UNAUTHENTICATED", read, c, options=quick(), array="pts")
        bad = fl.FlightCallOptions(headers=[(b"authorization", b"Bearer nope")], timeout=10)
        expect_code("UNAUTHENTICATED", read, c, options=bad, array="pts")
        good = fl.FlightCallOptions(headers=[(b"authorization", b"Bearer tls-secret")], timeout=10)
        assert [i.descriptor.path for i in c.list_flights(options=good)] == [[b"pts"]]
        assert read(c, options=good, array="pts", layout="global").to_pydict() == tiledb_rows(data)
        # pyarrow's basic-auth handshake works over TLS too.
        hdr = c.authenticate_basic_token("anyone", "tls-secret", options=quick())
        assert read(c, options=fl.FlightCallOptions(headers=[hdr], timeout=10), array="pts").num_rows == ROWS
        c.close()
