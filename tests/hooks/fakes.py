"""Moved to tests/controller/fakes.py: the fake Metacontroller drives the pure sync (trainop.controller).

This name stays for the files that still import it and that other branches are changing
(tests/extensions/, tests/hooks/test_http.py, tests/hooks/strategies.py); new code imports
tests.controller.fakes. Delete this file once none of them does.
"""

from tests.controller.fakes import *  # noqa: F403
