"""A test that cannot run in this build: `python3 tests/lib/skip.py REASON...` says why on stderr
and exits 77, meson's status for a skipped test, so the run's summary counts it as skipped."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vwtest  # noqa: E402

vwtest.skip(" ".join(sys.argv[1:]) or "no reason given")
