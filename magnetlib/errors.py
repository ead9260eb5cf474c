"""Errors that name the file and what is wrong with it, in one line."""
from __future__ import annotations

import os


class TraceError(Exception):
    """Input that cannot be used as what it claims to be.

    str() is one line, "PATH: problem", fit for a command-line error message.
    """

    def __init__(self, path: str | os.PathLike, problem: str):
        self.path = os.fspath(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")
