"""The signals every process of the suite takes (a pytest plugin: `-p suite_signals` in
pyproject's addopts)."""

from __future__ import annotations

import signal

# A shell starts its background jobs with Ctrl-C (SIGINT) ignored, and a process passes that on to
# the ones it starts: the tests that interrupt a CLI process would wait on one that never stops.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
