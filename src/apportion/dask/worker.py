"""The Dask worker an ``ApportionCluster`` runs as an activity on its granted slots.

    python -m apportion.dask.worker tcp://SCHEDULER:PORT --name-prefix PREFIX [--nthreads N]
        [--memory-limit LIMIT] [--local-directory DIR] [--death-timeout S]

Lean on purpose, because many of them start at once on few cores and each pays for
importing Dask: no nanny (the activity's process *is* the worker, so the agent's
signals and the activity's end are the worker's own), no dashboard, no command-line
framework. It names itself ``PREFIX-ACTIVITY`` from ``APPORTION_ACTIVITY`` (set by the
agent), so the cluster knows which activity each worker is. SIGTERM or SIGINT close it
gracefully: the scheduler reschedules its tasks and the process exits with code 0.
Closed by the scheduler (a retirement), it exits with code 0 too.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m apportion.dask.worker", description=__doc__.split("\n\n")[0])
    ap.add_argument("scheduler", help="the scheduler's address, e.g. tcp://10.0.0.5:8786")
    ap.add_argument("--name-prefix", default="apportion", help="the worker is named PREFIX-ACTIVITY")
    ap.add_argument("--nthreads", type=int, default=1, help="threads running tasks (default 1)")
    ap.add_argument("--memory-limit", default="auto", help="bytes, '4GiB', 'auto' or 0 for none (default auto)")
    ap.add_argument("--local-directory", help="scratch space (default: the activity's directory)")
    ap.add_argument("--death-timeout", type=float, default=60.0,
                    help="seconds without a scheduler before the worker gives up (default 60)")
    args = ap.parse_args(argv)
    if args.nthreads < 1:
        ap.error("--nthreads must be 1 or more")
    return args


def worker_name(prefix: str) -> str:
    return f"{prefix}-{os.environ.get('APPORTION_ACTIVITY') or f'pid{os.getpid()}'}"


async def serve(args: argparse.Namespace) -> int:
    from distributed import Worker

    memory: str | int = args.memory_limit
    if isinstance(memory, str) and memory.isdigit():
        memory = int(memory)
    worker = Worker(args.scheduler, name=worker_name(args.name_prefix), nthreads=args.nthreads,
                    memory_limit=memory, local_directory=args.local_directory or os.getcwd(),
                    death_timeout=args.death_timeout, dashboard=False)
    loop = asyncio.get_running_loop()
    closing: list[asyncio.Task[None]] = []

    def stop(signum: int) -> None:
        if not closing:
            closing.append(loop.create_task(worker.close(reason=f"signal {signal.Signals(signum).name}")))

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop, sig)
    await worker
    await worker.finished()
    for task in closing:
        await task
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        return asyncio.run(serve(args))
    except OSError as e:  # the scheduler cannot be reached (after death_timeout)
        print(f"apportion.dask.worker: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
