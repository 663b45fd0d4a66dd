"""trainop: the operator's core (API, admission, sync, `trainop run`) and its command line."""
