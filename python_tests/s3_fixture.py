"""A real S3-compatible server for the tests: moto's server (moto[server],
pinned in requirements.txt), started on a free loopback port once per
session, and a small fault-injecting HTTP proxy that tests put in front of
it. Tests give flightd `-data s3://BUCKET/PREFIX -s3-endpoint URL
-s3-path-style` and TileDB a Ctx whose S3 VFS points at the same server.

Why moto rather than MinIO: moto installs from PyPI like every other test
dependency (MinIO's server is a binary from its own site, which neither a
developer machine nor CI here may fetch), and it speaks the S3 REST API the
AWS SDKs and TileDB use: ranged GETs, multipart uploads, ListObjectsV2,
DeleteObjects."""

import http.client
import http.server
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
import uuid

import pytest

ACCESS_KEY = "testing"
SECRET_KEY = "testing"
REGION = "us-east-1"

S3_ENV = {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION,
          "AWS_EC2_METADATA_DISABLED": "true"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Moto:
    def __init__(self):
        exe = os.path.join(os.path.dirname(sys.executable), "moto_server")
        if not os.path.exists(exe):
            pytest.skip(f"S3 tests need {exe} (make setup installs moto[server])")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, **S3_ENV)
        self.proc = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        self.proc.kill()
        raise RuntimeError("moto_server did not start")

    def client(self):
        import boto3
        return boto3.client("s3", endpoint_url=self.url, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name=REGION)

    def new_bucket(self):
        name = "tf-" + uuid.uuid4().hex[:12]
        self.client().create_bucket(Bucket=name)
        return name

    def stop(self):
        self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="session")
def moto():
    m = Moto()
    try:
        yield m
    finally:
        m.stop()


def tiledb_s3_config(endpoint):
    """TileDB config parameters pointing its S3 VFS at the test server."""
    host = endpoint.split("://", 1)[1]
    return {
        "vfs.s3.endpoint_override": host, "vfs.s3.scheme": "http", "vfs.s3.use_virtual_addressing": "false",
        "vfs.s3.aws_access_key_id": ACCESS_KEY, "vfs.s3.aws_secret_access_key": SECRET_KEY,
        "vfs.s3.region": REGION, "vfs.s3.verify_ssl": "false",
    }


def tiledb_ctx(endpoint):
    """A TileDB context whose S3 VFS talks to the test server."""
    import tiledb
    return tiledb.Ctx(tiledb.Config(tiledb_s3_config(endpoint)))


def s3_flags(endpoint, *extra):
    return ["-s3-endpoint", endpoint, "-s3-path-style", *extra]


def upload_tree(client, local_dir, bucket, prefix):
    """Copy a local directory tree (TileDB arrays) into the bucket."""
    for root, _, files in os.walk(local_dir):
        for f in files:
            p = os.path.join(root, f)
            rel = os.path.relpath(p, local_dir).replace(os.sep, "/")
            client.upload_file(p, bucket, f"{prefix}/{rel}" if prefix else rel)


class FaultProxy:
    """An HTTP proxy in front of the S3 server that misbehaves on request.

    `rule(method, path, query)` returns None (pass through) or one of
    "503", "slowdown", "truncate" (send the headers and half the body, then
    drop the connection), ("stall", seconds) (answer nothing, then drop)
    or ("delay", seconds) (answer properly, that much later). `seen` counts the faults
    injected."""

    def __init__(self, target):
        self.target = target.split("://", 1)[1]
        self.rule = lambda method, path, query: None
        self.seen = 0
        self.lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                path, _, query = self.path.partition("?")
                if proxy.rule.__code__.co_argcount == 4:  # a rule that looks at headers (Range)
                    action = proxy.rule(self.command, path, query, self.headers)
                else:
                    action = proxy.rule(self.command, path, query)
                if action is not None:
                    with proxy.lock:
                        proxy.seen += 1
                if action in ("503", "slowdown"):
                    code = "SlowDown" if action == "slowdown" else "ServiceUnavailable"
                    msg = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                           f'<Message>injected</Message></Error>').encode()
                    self.send_response(503)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(msg)))
                    self.end_headers()
                    self.wfile.write(msg)
                    return
                if isinstance(action, tuple) and action[0] == "delay":
                    time.sleep(action[1])
                if isinstance(action, tuple) and action[0] == "stall":
                    time.sleep(action[1])
                    self.close_connection = True
                    return
                conn = http.client.HTTPConnection(proxy.target, timeout=60)
                headers = {k: v for k, v in self.headers.items()}
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                conn.close()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(k, v)
                # A HEAD's length is the object's, not its (empty) body's.
                length = resp.getheader("Content-Length") if self.command == "HEAD" else str(len(data))
                self.send_header("Content-Length", length or "0")
                self.end_headers()
                if action == "truncate" and len(data) > 1 and self.command == "GET":
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True

            def handle_error(self, request, client_address):
                pass  # a peer that hung up (a killed daemon) is expected here

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
