"""A Dask computation on slots an apportion master grants: an ApportionCluster.

It starts a Dask scheduler in this process and asks the master for workers under a
consumer (``--workers N``: that many; ``--adapt MAX``: as many as Dask's adaptive
target wants, up to MAX). Each worker is an activity on a granted slot. It then sums
``da.arange(N)`` ``--rounds`` times, checking each result, and says what happened to
its workers: reclaims honoured (workers retired, slots released before the deadline)
and hosts lost.

    export APPORTION_MASTER=http://127.0.0.1:8470 APPORTION_TOKEN_FILE=admin.token
    python examples/service-dask/dask_sum.py --consumer /Apps/dask --adapt 8 --rounds 20

The master and token come from ``--master`` / ``--token-file``, else from
``APPORTION_MASTER`` and ``APPORTION_TOKEN`` or ``APPORTION_TOKEN_FILE``, as for the SDK.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

import dask.array as da
from distributed import Client

from apportion.dask import ApportionCluster


def say(*parts: object) -> None:
    print(time.strftime("%H:%M:%S"), *parts, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--master", help="master URL(s) (default: APPORTION_MASTER or http://127.0.0.1:8470)")
    ap.add_argument("--token-file", help="a file with the token (default: APPORTION_TOKEN, APPORTION_TOKEN_FILE)")
    ap.add_argument("--consumer", default="/Apps/dask", help="the leaf consumer to run as (default /Apps/dask)")
    ap.add_argument("--group", help="the resource group (default: the consumer's groups)")
    how = ap.add_mutually_exclusive_group()
    how.add_argument("--workers", type=int, default=4, help="ask for this many workers (default 4)")
    how.add_argument("--adapt", type=int, metavar="MAX", help="adaptive scaling from 0 to MAX workers instead")
    ap.add_argument("--size", type=int, default=10**8, help="elements to sum (default 10**8)")
    ap.add_argument("--chunk", type=int, default=10**6, help="elements per chunk (default 10**6)")
    ap.add_argument("--rounds", type=int, default=3, help="times to compute the sum (default 3)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("distributed").setLevel(logging.ERROR)  # Dask's own INFO lines are many

    expected = args.size * (args.size - 1) // 2
    with ApportionCluster(args.consumer, args.group, master=args.master, token_file=args.token_file) as cluster, \
            Client(cluster) as client:
        say(f"allocation {cluster.allocation_id} under {args.consumer}; scheduler at {cluster.scheduler_address}")
        if args.adapt is not None:
            cluster.adapt(minimum=0, maximum=args.adapt)
            say(f"adaptive: 0 to {args.adapt} workers")
        else:
            cluster.scale(args.workers)
            client.wait_for_workers(1, timeout=120)
            say(f"asked for {args.workers} workers")
        x = da.arange(args.size, chunks=args.chunk)
        wrong = 0
        for i in range(1, args.rounds + 1):
            started = time.monotonic()
            total = int(x.sum().compute())
            ok = total == expected
            wrong += not ok
            say(f"round {i}: sum = {total} ({'right' if ok else 'WRONG'}) in {time.monotonic() - started:.2f} s "
                f"on {len(client.scheduler_info()['workers'])} workers")
        for r in cluster.reclaims:
            say(f"reclaim of {r.slots} slot(s) on {r.host} for {r.beneficiary}: retired {r.workers}, released "
                f"{r.released} {(r.deadline - r.released_at):.1f} s before the deadline" if r.released_at
                else f"reclaim of {r.slots} slot(s) on {r.host}: not released yet")
        for lost in cluster.lost:
            say(f"{lost['kind']}: {lost['slots']} slot(s) on {lost['host']}, workers {lost['workers']}")
    say("cluster closed: workers gone, allocation ended")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
