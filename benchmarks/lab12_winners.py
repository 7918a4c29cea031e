"""Which platform and recovery option lab 12's search chooses over the briefs the check draws from many seeds: does
every decision win somewhere? (Issue 62: before briefs reached 2,048 accelerators and ties went to the simpler plan,
S3 won 35 of 36 drawn briefs and the platforms tied.)

    .venv/bin/python benchmarks/lab12_winners.py --seeds 0:100 --workers 2     # about 4 minutes on 2 cores
    .venv/bin/python benchmarks/lab12_winners.py --seeds 0:4

Prints how often each (platform, recovery) is chosen, with the briefs that allowed only one platform counted apart.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor

from lab12_seeds import parse_seeds  # the same --seeds syntax: "0:100" or "8,13,18"


def one_seed(seed: int) -> list[tuple[str, str, int]]:
    from fmlab.labs import lab12_map

    return lab12_map.choices(seed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0:100")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    started = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        chosen = [c for found in pool.map(one_seed, parse_seeds(args.seeds)) for c in found]
    every, alone = Counter((p, r) for p, r, _ in chosen), Counter(p for p, _, n in chosen if n == 1)
    print(f"{len(chosen)} drawn briefs in {time.perf_counter() - started:.0f} s")
    for (platform, recovery), n in every.most_common():
        print(f"  {platform:15} {recovery:25} {n:4}")
    print("  of which the brief allowed one platform only: "
          + ", ".join(f"{p} {n}" for p, n in alone.most_common()))


if __name__ == "__main__":
    main()
