"""Reliability campaigns against the real flightd: kill -9 at random
moments (kill9), corrupted files (corrupt), many clients (load) and slow or
hostile clients (evil). Each module's run(...) returns a summary dict whose
"failures" list must be empty; `python -m soak.run` (make soak) runs the
long versions and prints docs/reliability.md's figures, and
python_tests/test_soak.py runs short ones in `make test`."""
