"""'Did you mean' for a name a person typed: a kind, a replica type, an example."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice ``word`` most likely meant: the same name in another case first, else the closest
    spelling (difflib's ratio at least 0.6), else None."""
    by_lower = {option.lower(): option for option in choices}
    if word.lower() in by_lower:
        return by_lower[word.lower()]
    matches = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[matches[0]] if matches else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``'; did you mean "X"?'`` for the closest choice, or '' when none is close."""
    option = closest(word, choices)
    return f'; did you mean "{option}"?' if option is not None and option != word else ""
