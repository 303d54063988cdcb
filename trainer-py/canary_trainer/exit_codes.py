"""Trainer exit codes. src/contracts/progress.ts (TRAINER_EXIT) holds the same table: keep them equal.

Retrying helps only for FAILURE; INTERRUPTED means "resume me"; BUSY means another live trainer holds
the output folder and nothing was done (the worker tries again without spending an attempt); the
others are final.
"""

OK = 0
FAILURE = 1
BAD_INPUT = 2
DIVERGED = 3
MISSING_MODEL = 4
OOM = 5
BUSY = 6
INTERRUPTED = 75
