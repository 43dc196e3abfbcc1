"""The soak's CI version: tests/soak/soak.py for about a minute with 64 streams over gRPC and
HTTP (cancels, deadlines, stop sequences, disconnects), then KV blocks, fds, threads and RSS back
at their baseline. No timing assertions: on a busy 2-core machine the streams just queue longer.
The long run (minutes) is soak.py itself; see its docstring.

--max_resets: under load the server resets a few HTTP connections before reading the request
(about 1 in 150 in the long run; the server never sees them, and the soak checks that). A known
issue, described in docs/RELIABILITY.md (Soak); allowed here so that CI stays green on it while
every other promise is still checked. The long run allows none."""

import pathlib
import subprocess
import sys

SOAK = pathlib.Path(__file__).resolve().parent / "soak.py"


def test_soak_64_streams_for_a_minute_leaves_nothing_behind():
    out = subprocess.run([sys.executable, str(SOAK), "--duration_s=60", "--streams=64",
                          "--ranks=3", "--seed=7", "--max_resets=8"],
                         capture_output=True, text=True, timeout=1800)
    print(out.stdout, out.stderr[-4000:])
    assert out.returncode == 0, out.stdout + out.stderr[-4000:]
    assert "soak: passed" in out.stdout
