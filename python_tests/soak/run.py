"""Run the reliability campaigns and print their figures.

    python -m soak.run [--short] [--only kill9,corrupt,load,evil] [--out results.json]

(from python_tests/, or `make soak`). --short runs the CI sizes."""

import argparse
import json
import os
import sys
import tempfile
import time

import importlib
from .lib import flightd_binary, summary_line

FULL = {
    "kill9": dict(trials=150),
    "corrupt": dict(trials=600),
    "load": dict(clients=32, seconds=60, rounds=2),
    "evil": dict(idle_conns=300, never_read=12),
}
SHORT = {
    "kill9": dict(trials=10),
    "corrupt": dict(trials=60),
    "load": dict(clients=8, seconds=5, rounds=2, quiet=3),
    "evil": dict(idle_conns=60, never_read=4),
}
MODULES = {n: importlib.import_module("soak." + n) for n in ("kill9", "corrupt", "load", "evil")}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--short", action="store_true")
    ap.add_argument("--only", default="kill9,corrupt,load,evil")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--out", default="")
    a = ap.parse_args(argv)
    sizes = SHORT if a.short else FULL
    results = {"seed": a.seed}
    ok = True
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        exe = flightd_binary(tmp)
        for name in a.only.split(","):
            t0 = time.monotonic()
            work = os.path.join(tmp, name)
            os.makedirs(work)
            s = MODULES[name].run(exe, work, seed=a.seed, **sizes[name])
            s["wall_seconds"] = round(time.monotonic() - t0, 1)
            results[name] = s
            print(summary_line(name, s), flush=True)
            for f in s["failures"][:50]:
                print("  FAIL", f, flush=True)
            ok = ok and not s["failures"]
    if a.out:
        with open(a.out, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
