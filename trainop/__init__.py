"""trainop: the operator's core (API, admission, sync, `trainop run`) and its command line."""

# Written by hack/release.sh (hack/lib/versions.py) with pyproject.toml's version; a test checks they agree.
__version__ = "0.1.0"
