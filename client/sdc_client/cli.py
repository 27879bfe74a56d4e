"""``sdc``: suppression, audit and sensitivity of a CSV or Parquet file from the shell.

``sdc suppress turnover.csv --dimensions region,size --value turnover --holding
enterprise --hierarchy region=region.hrc --rules '[{"type": "p_percent", "p": 15}]' -o
protected.csv`` writes one row per cell (margins included) with its value, status and
audit (:mod:`sdc_client.frames`). With ``--url`` (and ``--api-key`` or ``SDC_API_KEY``)
a server computes it; without, the service's pipeline runs in this process
(:mod:`sdc_client.local`), which needs the service's package installed.

Exit status: 0 done and safe; 1 done but no safe pattern (suppress) or a verdict other
than ``safe`` (audit); 2 the request was refused or could not be made (the message names
the field and the cell).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .client import Client, Routes
from .errors import ServiceError


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _rules(text: str) -> Any:
    """``--rules``: a rule set or a list of rules, as JSON or ``@file.json``."""
    if text.startswith("@"):
        text = Path(text[1:]).read_text()
    try:
        rules = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"--rules is not JSON: {exc}") from None
    return {"rules": rules} if isinstance(rules, list) else rules


def _hierarchy(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"--hierarchy takes DIM=FILE.hrc, not {text!r}")
    return name, path


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("input", type=Path, help="CSV or Parquet (.parquet, .pq) file")
    common.add_argument(
        "--dimensions", required=True, type=_split, help="the cell's columns, comma-separated"
    )
    common.add_argument("--value", required=True, help="the value (contribution) column")
    common.add_argument("--holding", help="enterprise-group column: one holding's rows are summed")
    common.add_argument("--weight", help="sampling-weight column")
    how = common.add_mutually_exclusive_group()
    how.add_argument("--rules", type=_rules, help="rule set or list of rules, JSON or @file.json")
    how.add_argument("--profile", help="a rule profile configured on the service")
    common.add_argument("-o", "--output", type=Path, help="CSV to write (default: stdout)")
    common.add_argument("--url", help="the service (http://host:8787); default: in process")
    common.add_argument(
        "--api-key", default=os.environ.get("SDC_API_KEY"), help="default: $SDC_API_KEY"
    )
    common.add_argument("--timeout", type=float, default=120.0, help="seconds per attempt")

    table = argparse.ArgumentParser(add_help=False)
    table.add_argument(
        "--hierarchy",
        action="append",
        type=_hierarchy,
        default=[],
        metavar="DIM=FILE.hrc",
        help="a dimension's tau-ARGUS hierarchy file (repeatable)",
    )
    table.add_argument("--total", default="Total", help="code of each dimension's total")
    table.add_argument(
        "--rows",
        choices=["contributions", "cells"],
        help="one row per contribution (default) or per cell (default with --threshold)",
    )
    table.add_argument(
        "--threshold", type=float, help="a count table: cells 0 < count < threshold are sensitive"
    )
    table.add_argument("--time-limit", type=float, help="seconds for the service's solver")

    top = argparse.ArgumentParser(
        prog="sdc", description="Disclosure control of a table in a CSV or Parquet file."
    )
    commands = top.add_subparsers(dest="command", required=True)
    s = commands.add_parser(
        "suppress", parents=[common, table], help="primary and secondary suppression"
    )
    s.add_argument("--method", choices=["fast", "exact"], default="fast")
    s.add_argument("--cost", choices=["value", "unity", "contributors", "log"], default="value")
    a = commands.add_parser("audit", parents=[common, table], help="audit a suppression pattern")
    a.add_argument("--suppressed", required=True, help="boolean column: the cell is suppressed")
    commands.add_parser(
        "sensitivity", parents=[common], help="primary sensitivity of each cell, no margins"
    )
    return top


def read_frame(path: Path, text_columns: Sequence[str]) -> Any:
    """The file as a DataFrame; codes read as text (``01`` stays ``01``)."""
    from .frames import _pandas

    pd = _pandas()
    if path.suffix.lower() in (".parquet", ".pq"):
        frame = pd.read_parquet(path)
    else:
        # Only an empty field is missing: "NA" is a code (North America), not a gap.
        frame = pd.read_csv(
            path, dtype=dict.fromkeys(text_columns, str), keep_default_na=False, na_values=[""]
        )
    return frame


def _service(args: argparse.Namespace) -> Routes:
    if args.url:
        return Client(args.url, args.api_key, timeout=args.timeout)
    from .local import LocalService

    return LocalService()


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Send what is written to file descriptor 1 to 2 meanwhile: the solver's library
    prints a banner from C, and stdout is where the CSV goes."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def run(args: argparse.Namespace) -> int:
    with _stdout_to_stderr():
        result, message, status = compute(args)
    text = result.to_csv(index=False)
    if args.output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        args.output.write_text(text)
    print(message, file=sys.stderr)
    return status


def compute(args: argparse.Namespace) -> tuple[Any, str, int]:
    """The result frame, a line for the terminal, and the exit status."""
    from . import frames

    text_columns = [*args.dimensions] + ([args.holding] if args.holding else [])
    frame = read_frame(args.input, text_columns)
    service = _service(args)
    common: dict[str, Any] = {
        "holding": args.holding,
        "weight": args.weight,
        "rules": args.rules,
        "profile": args.profile,
        "client": service,
    }
    status = 0
    if args.command == "sensitivity":
        result = frames.sensitivity(frame, args.dimensions, args.value, **common)
        summary = result.attrs["reply"]["summary"]
        message = f"{summary['sensitive']} sensitive of {summary['cells']} cells"
    else:
        table: dict[str, Any] = {
            "hierarchies": dict(args.hierarchy),
            "total": args.total,
            "rows": args.rows,
            "counts": {"threshold": args.threshold} if args.threshold is not None else None,
            "time_limit": args.time_limit,
        }
        if args.command == "suppress":
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # said below, once
                result = frames.suppress(
                    frame,
                    args.dimensions,
                    args.value,
                    method=args.method,
                    cost=args.cost,
                    **common,
                    **table,
                )
            reply = result.attrs["reply"]
            counts = result["status"].value_counts()
            if reply["safe"]:
                message = (
                    f"safe: {counts.get('primary', 0)} primary, {counts.get('secondary', 0)} "
                    f"secondary of {len(result)} cells ({reply['solver']['status']})"
                )
            else:
                message = f"no safe pattern: {reply['solver']['message']}"
                status = 1
        else:
            result = frames.audit(
                frame, args.dimensions, args.value, suppressed=args.suppressed, **common, **table
            )
            reply = result.attrs["reply"]
            message = f"verdict: {reply['verdict']}" + "".join(f"\n  {r}" for r in reply["reasons"])
            status = 0 if reply["verdict"] == "safe" else 1
    return result, message, status


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return run(args)
    except ServiceError as exc:
        print(f"sdc: the service refused the request: {exc}", file=sys.stderr)
        return 2
    except (ValueError, OSError, RuntimeError, ImportError) as exc:
        print(f"sdc: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
