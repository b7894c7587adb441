"""The release artifacts, built and used as an operator or a data scientist
would: `make release` (linux/amd64 only, to stay within CI's time: the other
platforms are the same command with other GOOS/GOARCH), the static binary
and its stamped version, SHA256SUMS, the wheels installed into a fresh venv
(the Spark jar inside, tileflight.local() serving), and the container
image built and its flightd run from an export of its filesystem (skipped,
saying so, where no podman, buildah or docker is installed). README's
install blocks (marked `<!-- install-test: NAME -->`) run as written: the
binary, pip, the image (podman) and Maven (the jar installed into ~/.m2,
then resolved offline by a consumer project from README's dependency block).
"""

import glob
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VERSION = "v0.1.0"
STAMPED_COMMIT = ""  # set by the dist fixture
RELVER = VERSION[1:]


def _make(*args, timeout=1500):
    r = subprocess.run(["make", "--no-print-directory", *args], cwd=ROOT, capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode != 0:
        pytest.fail(f"make {' '.join(args)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    d = tmp_path_factory.mktemp("dist")
    # The commit the artifacts are stamped with: HEAD when make starts.
    global STAMPED_COMMIT
    STAMPED_COMMIT = (subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                                                    text=True, check=True).stdout.strip())
    _make("release", f"VERSION={VERSION}", "PLATFORMS=linux/amd64", f"DIST={d}")
    return d


def test_release_lists_and_checksums(dist):
    names = sorted(os.listdir(dist))
    want = [f"flightd_{RELVER}_linux_amd64.tar.gz", f"tileflight-{RELVER}-py3-none-any.whl",
            f"tileflight-spark_2.13-{RELVER}.jar", "SHA256SUMS",
            f"tileflight_server-{RELVER}-py3-none-manylinux2014_x86_64.musllinux_1_1_x86_64.whl"]
    assert sorted(want) == names
    r = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=dist, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count(": OK") == len(want) - 1


def test_release_binary_static_and_stamped(dist, tmp_path):
    with tarfile.open(dist / f"flightd_{RELVER}_linux_amd64.tar.gz") as tf:
        members = tf.getnames()
        tf.extractall(tmp_path, filter="data")
    top = f"flightd_{RELVER}_linux_amd64"
    for f in ("flightd", "LICENSE", "README.md", "CHANGELOG.md", "deploy/flightd.toml", "deploy/flightd.service"):
        assert f"{top}/{f}" in members
    exe = tmp_path / top / "flightd"
    commit = STAMPED_COMMIT
    out = subprocess.run([str(exe), "version"], capture_output=True, text=True, check=True).stdout
    assert out.startswith(f"flightd {VERSION} (commit {commit}"), out
    if shutil.which("file"):
        desc = subprocess.run(["file", "-L", str(exe)], capture_output=True, text=True).stdout
        assert "statically linked" in desc, desc
    if shutil.which("ldd"):
        r = subprocess.run(["ldd", str(exe)], capture_output=True, text=True)
        assert "not a dynamic executable" in (r.stdout + r.stderr) or "statically linked" in r.stdout, r


def _fresh_venv(tmp_path):
    """A new venv that sees the test venv's packages (pyarrow) after its own,
    so that pip installs the wheels with nothing from the network."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(site, "zz_shared_venv.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    return venv, py


def test_wheels_install_jar_and_local(dist, tmp_path):
    venv, py = _fresh_venv(tmp_path)
    wheels = sorted(glob.glob(str(dist / "*.whl")))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TILEFLIGHT_", "PYTHON"))}
    env["PIP_NO_INDEX"] = "1"
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--no-deps", *wheels], check=True, env=env)
    script = textwrap.dedent(f"""
        import os, tileflight, tileflight.spark, zipfile
        venv = {str(venv)!r}
        assert tileflight.__file__.startswith(venv), tileflight.__file__
        jar = tileflight.spark.jvm_jar()
        assert jar.startswith(venv) and zipfile.ZipFile(jar).getinfo("io/tileflight/spark/TileflightSource.class"), jar
        data = {str(tmp_path / "data")!r}
        with tileflight.local(path=data, args=["-demo"]) as client:
            assert client.uri.startswith("grpc://127.0.0.1:"), client.uri
            assert client.process.args[0].startswith(venv), client.process.args
            arrays = client.arrays()
            assert "demo/dense" in arrays, arrays
            t = client.read("demo/dense", columns=["v"], subarray={{"x": (0, 9), "y": (0, 9)}})
            assert t.num_rows == 100, t.num_rows
            proc = client.process
        assert proc.poll() is not None, "the daemon outlived its with block"
        print("served", len(arrays))
    """)
    r = subprocess.run([str(py), "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "served" in r.stdout


def _builder():
    for b in ("podman", "buildah", "docker"):
        if shutil.which(b):
            if b == "docker" and subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
                continue  # a client without a daemon cannot build
            return b
    return None


def test_image_builds_and_its_flightd_runs(tmp_path):
    b = _builder()
    if b is None:
        pytest.skip("no podman, buildah or docker with a daemon on this machine: the image is not built "
                    "(apt-get install podman)")
    if not shutil.which("podman"):
        pytest.skip(f"README's image block uses podman, which this machine lacks (it has {b}): "
                    "apt-get install podman")
    image = f"tileflight:{RELVER}"
    try:
        # README's image block, as written, from the checkout (make image
        # picks podman, the first builder it finds).
        env = {k: v for k, v in os.environ.items() if k not in ("CONTAINER_BUILDER", "IMAGE_TAG", "VERSION")}
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", _readme_block("image")], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, f"README image block:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        assert r.stdout.strip().splitlines()[-1] == "65532:65532 [-listen 0.0.0.0:8815 -data /data]", r.stdout
        b = "podman"
        # Containers cannot run here: export the image's filesystem and run
        # its flightd as the image would (its config says how).
        cfg = subprocess.run([b, "image", "inspect", image, "--format",
                              "{{json .Config.User}} {{json .Config.Entrypoint}} {{json .Config.Cmd}} "
                              "{{json .Config.ExposedPorts}} {{json .Config.Volumes}}"],
                             capture_output=True, text=True, check=True).stdout
        for want in ('"65532:65532"', '["/usr/local/bin/flightd"]', '["-listen","0.0.0.0:8815","-data","/data"]',
                     '"8815/tcp"', '"/data"'):
            assert want in cfg, cfg
        ctr = subprocess.run([b, "create", image], capture_output=True, text=True, check=True).stdout.strip()
        try:
            rootfs = tmp_path / "rootfs"
            rootfs.mkdir()
            exp = subprocess.run([b, "export", ctr], capture_output=True, check=True).stdout
            (tmp_path / "rootfs.tar").write_bytes(exp)
            with tarfile.open(tmp_path / "rootfs.tar") as tf:
                names = tf.getnames()
                tf.extractall(rootfs, filter="fully_trusted")
        finally:
            subprocess.run([b, "rm", ctr], capture_output=True)
        for f in ("usr/local/bin/flightd", "etc/ssl/certs/ca-certificates.crt", "etc/passwd", "data"):
            assert f in names, names
        assert "flightd:x:65532:65532" in (rootfs / "etc/passwd").read_text()
        out = subprocess.run([str(rootfs / "usr/local/bin/flightd"), "version"], capture_output=True, text=True,
                             check=True).stdout
        assert out.startswith(f"flightd {VERSION} "), out
    finally:
        subprocess.run([b, "rmi", "-f", image], capture_output=True)


def _readme_block(name, lang="sh"):
    text = open(os.path.join(ROOT, "README.md")).read()
    marker = f"<!-- install-test: {name} -->\n```{lang}\n"
    i = text.index(marker) + len(marker)
    return text[i:text.index("```", i)]


def test_readme_install_verbatim(dist, tmp_path):
    """README's binary and pip install blocks, run as written in a directory
    holding the release files (pip with no index, pyarrow from this venv)."""
    work = tmp_path / "download"
    shutil.copytree(dist, work)
    venv, py = _fresh_venv(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TILEFLIGHT_", "PYTHON"))}
    env.update(PIP_NO_INDEX="1", PATH=f"{venv}/bin:{os.environ['PATH']}")
    for name, want in (("binary", f"flightd {VERSION} "), ("pip", "demo/dense")):
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", _readme_block(name)], cwd=work, env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and want in r.stdout, f"README {name} block:\n{r.stdout}\n{r.stderr}"


CONSUMER_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>example</groupId><artifactId>consumer</artifactId><version>1</version>
  <dependencies>
{dependency}
  </dependencies>
  <build><plugins><plugin>
    <groupId>org.apache.maven.plugins</groupId><artifactId>maven-dependency-plugin</artifactId><version>3.8.1</version>
  </plugin></plugins></build>
</project>
"""


def test_readme_maven_verbatim(dist, tmp_path):
    """README's Maven install block, run as written where the release files
    are, then its dependency block in a consumer project: Maven resolves
    the installed artifact, offline, to the one jar (no dependencies of its
    own: Spark is provided, Flight is inside)."""
    if not shutil.which("mvn"):
        pytest.skip("no mvn on this machine (apt-get install maven)")
    work = tmp_path / "download"
    shutil.copytree(dist, work)
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", _readme_block("maven")], cwd=work,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"README maven block:\n{r.stdout}\n{r.stderr}"
    consumer = tmp_path / "consumer"
    consumer.mkdir()
    (consumer / "pom.xml").write_text(CONSUMER_POM.format(dependency=_readme_block("maven-dependency", "xml")))
    # Once with the network allowed (a fresh machine may lack the
    # dependency plugin), then offline: the artifact is local either way.
    for offline in ([], ["-o"]):
        cp = consumer / "cp.txt"
        cp.unlink(missing_ok=True)
        r = subprocess.run(["mvn", "-B", "-q", *offline, "dependency:build-classpath", f"-Dmdep.outputFile={cp}"],
                           cwd=consumer, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"consumer {offline}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        entries = cp.read_text().strip().split(os.pathsep)
        want = f"io/tileflight/tileflight-spark_2.13/{RELVER}/tileflight-spark_2.13-{RELVER}.jar"
        assert len(entries) == 1 and entries[0].endswith(want), entries
    import zipfile
    with zipfile.ZipFile(entries[0]) as z:
        assert z.getinfo("io/tileflight/spark/TileflightSource.class")
        assert any(n.startswith("io/tileflight/shaded/io/grpc/") for n in z.namelist())
