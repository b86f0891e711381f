"""A DUCC job's process: each work item is a range of integers whose primes it counts (pure Python).

The master starts it on a share of its job with APPORTION_MASTER, APPORTION_JOB,
APPORTION_PROCESS, APPORTION_THREADS and a process token in its environment;
``serve`` fetches items (up to the job's threads at a time), runs ``count_primes`` on
each and reports it done (or failed, with the exception), until the job has nothing
left for this process.
"""

from __future__ import annotations

from apportion.client import serve


def count_primes(item: dict) -> int:
    """The primes in [from, to), by trial division (real work: a few tens of milliseconds an item)."""
    count = 0
    for n in range(max(2, item["from"]), item["to"]):
        if n % 2 == 0 and n != 2:
            continue
        d = 3
        while d * d <= n and n % d:
            d += 2
        count += d * d > n
    return count


if __name__ == "__main__":
    done = serve(count_primes)
    print(f"this process finished {done} item(s)")
