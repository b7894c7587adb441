"""Build the tileflight-server wheel: one platform's static flightd binary
in a package, ``tileflight_server``, that ``tileflight.local()`` finds.

    python3 scripts/server_wheel.py --binary dist/.../flightd --goos linux \
        --goarch amd64 --version 0.1.0 --out dist/

A wheel is a zip with a fixed layout (PEP 427); this writes it directly
because it holds no Python to build, only a file whose platform tag comes
from the Go target, not from the machine that builds it. The binary is
static (CGO_ENABLED=0), so the Linux wheels are tagged for both glibc
(manylinux2014) and musl (musllinux_1_1) systems.
"""

import argparse
import base64
import hashlib
import os
import stat
import zipfile

# Go target -> wheel platform tag. Go 1.26 needs macOS 12 or later.
TAGS = {
    ("linux", "amd64"): "manylinux2014_x86_64.musllinux_1_1_x86_64",
    ("linux", "arm64"): "manylinux2014_aarch64.musllinux_1_1_aarch64",
    ("darwin", "amd64"): "macosx_12_0_x86_64",
    ("darwin", "arm64"): "macosx_12_0_arm64",
    ("windows", "amd64"): "win_amd64",
}

INIT = '''"""The flightd daemon, bundled for ``tileflight.local()``.

``binary()`` is the path of the flightd executable this wheel carries.
"""

import os

__version__ = "{version}"


def binary() -> str:
    """The bundled flightd executable's path."""
    name = "flightd.exe" if os.name == "nt" else "flightd"
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", name)
'''

METADATA = """Metadata-Version: 2.1
Name: tileflight-server
Version: {version}
Summary: The tileflight daemon (flightd), a static binary, for tileflight.local()
Home-page: https://github.com/tileflight/tileflight
License: Apache-2.0
Requires-Python: >=3.9
Description-Content-Type: text/markdown

The `flightd` binary of tileflight {version} ({goos}/{goarch}), a static executable,
for `tileflight.local()`. Install with `pip install "tileflight[server]"`.
"""


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build(binary, goos, goarch, version, out, license_path):
    tag = TAGS[(goos, goarch)]
    exe = "flightd.exe" if goos == "windows" else "flightd"
    dist_info = f"tileflight_server-{version}.dist-info"
    with open(binary, "rb") as f:
        payload = f.read()
    with open(license_path, "rb") as f:
        license_text = f.read()
    files = [
        ("tileflight_server/__init__.py", INIT.format(version=version).encode(), 0o644),
        (f"tileflight_server/bin/{exe}", payload, 0o755),
        (f"{dist_info}/LICENSE", license_text, 0o644),
        (f"{dist_info}/METADATA", METADATA.format(version=version, goos=goos, goarch=goarch).encode(), 0o644),
        (f"{dist_info}/WHEEL", ("Wheel-Version: 1.0\nGenerator: tileflight scripts/server_wheel.py\n"
                                "Root-Is-Purelib: false\n" + "".join(
                                    f"Tag: py3-none-{t}\n" for t in tag.split("."))).encode(), 0o644),
    ]
    record = "\n".join(record_line(n, d) for n, d, _ in files) + f"\n{dist_info}/RECORD,,\n"
    files.append((f"{dist_info}/RECORD", record.encode(), 0o644))
    path = os.path.join(out, f"tileflight_server-{version}-py3-none-{tag}.whl")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, mode in files:
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", required=True)
    ap.add_argument("--goos", required=True)
    ap.add_argument("--goarch", required=True)
    ap.add_argument("--version", required=True, help="the Python version (0.1.0, 0.2.0rc1)")
    ap.add_argument("--license", default="LICENSE")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    print(build(a.binary, a.goos, a.goarch, a.version, a.out, a.license))


if __name__ == "__main__":
    main()
