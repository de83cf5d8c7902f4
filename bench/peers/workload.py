"""The synth workload every peer runs, as `castlog bench synth` runs it.

A plan step emits W work items; per item a build step and an eval step run R times (eval is not
satisfied R-1 times, then satisfied); every step's reply is S bytes from a deterministic fake
model (no network). Steps in a run: 1 + 2*W*R.

The fake model's text is a function of the prompt alone: words of a 64-word vocabulary picked by
the bytes of blake2b(prompt || counter), joined by spaces and cut to S bytes.
"""

import hashlib
import os
import resource

WORDS = (
    "agent plan build eval item task code test patch diff fix rework review module function "
    "result error retry context tool call output input state graph node edge step check pass "
    "fail score note spec doc api type value field list map key log trace span event store load "
    "save fork replay time cost token model prompt reply reason draft final accept reject merge "
    "run"
).split()


def reply(prompt: str, size: int) -> str:
    """Exactly `size` bytes of word-like ASCII text, a function of `prompt`."""
    parts: list[str] = []
    length = 0
    counter = 0
    seed = prompt.encode()
    while length < size:
        for byte in hashlib.blake2b(seed + counter.to_bytes(4, "little")).digest():
            word = WORDS[byte & 63]
            parts.append(word)
            length += len(word) + 1
            if length >= size:
                break
        counter += 1
    return " ".join(parts).ljust(size)[:size]


def steps(items: int, rework: int) -> int:
    return 1 + 2 * items * rework


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def file_bytes(path: str, suffixes=("", "-wal", "-shm", "-journal")) -> int:
    return sum(os.path.getsize(path + s) for s in suffixes if os.path.exists(path + s))


def tenths_ms(stamps: list[float], t0: float) -> tuple[float, float]:
    """Mean ms per step over the first and last tenth of the steps."""
    deltas = [b - a for a, b in zip([t0, *stamps], stamps)]
    if not deltas:
        return 0.0, 0.0
    k = max(1, len(deltas) // 10)
    return sum(deltas[:k]) / k * 1e3, sum(deltas[-k:]) / k * 1e3
