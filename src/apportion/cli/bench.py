"""`apportion bench ...`: measured figures, not adjectives."""

from __future__ import annotations

import typer

bench_app = typer.Typer(help="Benchmarks whose figures go into docs/performance.md.", no_args_is_help=True)
