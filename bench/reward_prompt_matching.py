"""How long the reward service takes to find a response after its (cut) prompt, side by side:
the bounded C-speed search of aeval.reward.service (issue #46) and the pure-Python prefix
function it replaced (kept here, verbatim in substance, only to measure against).

Inputs: a real cut prompt (the benchmark's longest question in a ChatML template, cut from the
left), a long real prompt of distinct lines, and a query crafted to match poorly (the prompt's
last characters end every block, so every block of the query is a candidate end of the prompt
that matches a whole block before it fails), each about --size characters. Prints best-of-N
seconds and the ratio.

    .venv/bin/python bench/reward_prompt_matching.py --size 500000 --repeat 3
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from aeval.reward.service import response_of

GOOD = "<think>.</think><answer>(assert (> x 1))</answer><|im_end|>"


def old_kept_end(prompt: str, query: str) -> int | None:
    """The matching before issue #46: the prefix function of head + separator + prompt, in
    Python, for up to five garbled leading characters."""
    tail = prompt[-16:]
    if tail not in query[: len(prompt) + 4]:
        return None
    best: int | None = None
    for skip in range(min(4, len(query)) + 1):
        head = query[skip : skip + len(prompt)]
        text = head + "\x00" + prompt
        border = [0] * len(text)
        for i in range(1, len(text)):
            k = border[i - 1]
            while k and text[i] != text[k]:
                k = border[k - 1]
            if text[i] == text[k]:
                k += 1
            border[i] = k
        kept = border[-1]
        if kept >= min(16, len(prompt)) and (best is None or skip + kept > best):
            best = skip + kept
        if best is not None:
            break
    return best


def old_response_of(query: str, prompt: str) -> bool:
    if query.find(prompt) >= 0:
        return True
    return old_kept_end(prompt, query) is not None


def inputs(size: int) -> dict[str, tuple[str, str]]:
    lines = "".join(f"Step {i}: the loop keeps x below {i * 7}.\n" for i in range(size // 36))
    real = f"<|im_start|>user\n{lines}<|im_end|>\n<|im_start|>assistant\n"
    # the prompt's last characters end every block: each block of the query's head is a
    # candidate, matching a whole block before it fails (the query's first block differs)
    block = "a" * 1000 + "<|im_start|>assistant\n"
    blocks = max(2, size // len(block))
    crafted = block * blocks
    crafted_query = "a" * 999 + "c" + block[1000:] + block * (blocks - 1) + GOOD
    return {
        "real prompt, cut to 3,000 chars": (real, real[-3000:] + GOOD),
        "real prompt, cut to half": (real, real[len(real) // 2 :] + GOOD),
        "crafted to match poorly": (crafted, crafted_query),
    }


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=500_000, help="characters of each prompt")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'input':36} {'found':>6} {'new s':>9} {'old s':>9} {'old/new':>8}")
    for name, (prompt, query) in inputs(args.size).items():
        found = response_of(query, prompt)[1]
        new = best(lambda p=prompt, q=query: response_of(q, p), args.repeat)
        old = best(lambda p=prompt, q=query: old_response_of(q, p), args.repeat)
        print(f"{name:36} {found!s:>6} {new:9.4f} {old:9.4f} {old / new:8.0f}")


if __name__ == "__main__":
    main()
