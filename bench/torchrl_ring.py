#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""torchrl_ring.py - torchrl's LazyMemmapStorage on ringbench's rows.

The baseline of bench/ringbench's torchrl column, measured rather than
assumed. For each of ringbench's three row layouts (the same keys, dtypes,
shapes and ring capacities as template_for() and layouts[] in ringbench.c):

    64B    obs float32[14] + action int64        capacity 2^20
    4KiB   obs float32[1024]                     capacity 2^16
    28KiB  pixels uint8[84, 84, 4]               capacity 2^14

it builds ``ReplayBuffer(storage=LazyMemmapStorage(capacity,
scratch_dir=DIR/...), batch_size=256)``, fills it to capacity with
``extend`` of 256-row TensorDicts (untimed, which also faults every page
in), then times

    extend/<layout>/w1   ``rb.extend(batch)`` of 256 rows, one process
    sample256/<layout>   ``rb.sample()`` (256 rows, with replacement)

each as ringbench does: a warm-up, then calls repeated for a fixed time,
in several rounds, reporting the best round (calls/s and rows/s). torch
runs with one intra-op thread (--threads 1, the default), as ringbench's
one sampling process does: on a shared 2-core machine torch's default of
one thread per core made sample() times swing by 4x from call to call
(its parallel gather waits for a second core that another process holds);
--threads 0 keeps torch's default. Every
sampled batch is checked (the right shape, and the fill value in its
bytes), so that a wrong result fails the run.

Output: a TSV table, ``#`` comment lines first (versions, threads,
directory), a header line, then ``name<TAB>calls_per_s<TAB>rows_per_s``
per row; on stdout, and with ``--output FILE`` also into FILE (written
whole, then renamed into place), which ``ringbench --torchrl FILE`` reads
(see bench/README.md). torchrl's own log lines (which it prints on stdout)
are turned off below WARNING. Run by
``make bench-torchrl PYTHON=/path/to/python``; neither ``make check`` nor CI
runs it. Needs torch, tensordict and torchrl.

Usage: torchrl_ring.py [--dir DIR] [--output FILE] [--seconds S] [--rounds N]
                       [--warmup S] [--threads N] [--filter SUBSTR] [--quick]
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time

try:
    import torch
    import tensordict
    import torchrl
    from tensordict import TensorDict
    from torchrl.data import LazyMemmapStorage, ReplayBuffer
except ImportError as exc:  # pragma: no cover - environment problem
    sys.exit(f"torchrl_ring: needs torch, tensordict and torchrl ({exc}); "
             "run it with PYTHON=/path/to/venv/bin/python")

BATCH = 256
FILL = 0xA5  # ringbench's fill byte

# name, capacity, quick capacity, {key: (dtype, row shape)}: ringbench.c's
# layouts[] and template_for().
LAYOUTS = (
    ("28KiB", 1 << 14, 512, {"pixels": (torch.uint8, (84, 84, 4))}),
    ("4KiB", 1 << 16, 512, {"obs": (torch.float32, (1024,))}),
    ("64B", 1 << 20, 1024, {"obs": (torch.float32, (14,)), "action": (torch.int64, ())}),
)


def make_batch(leaves: dict, n: int) -> TensorDict:
    """n rows whose every byte is FILL (as ringbench's fill_batch)."""
    data = {}
    for key, (dtype, shape) in leaves.items():
        t = torch.empty((n, *shape), dtype=dtype)
        t.view(-1).view(torch.uint8).fill_(FILL)
        data[key] = t
    return TensorDict(data, batch_size=[n])


def check_sample(td, leaves: dict) -> None:
    """A sampled batch: 256 rows of the layout, holding what was written."""
    if list(td.batch_size) != [BATCH]:
        raise SystemExit(f"torchrl_ring: sample() gave batch {list(td.batch_size)}")
    for key, (dtype, shape) in leaves.items():
        t = td.get(key)
        if t.dtype != dtype or tuple(t.shape) != (BATCH, *shape):
            raise SystemExit(f"torchrl_ring: sample()[{key!r}] is {t.dtype}{list(t.shape)}")
        b = t.reshape(-1).view(torch.uint8)
        if b[0] != FILL or b[b.numel() // 2] != FILL or b[-1] != FILL:
            raise SystemExit(f"torchrl_ring: sample()[{key!r}] does not hold what was written")


def timed(fn, seconds: float, rounds: int, warmup: float) -> float:
    """Best calls/s over `rounds` rounds of `seconds` each, after a warm-up."""
    end = time.perf_counter() + warmup
    while time.perf_counter() < end:
        fn()
    best = 0.0
    for _ in range(rounds):
        calls = 0
        t0 = time.perf_counter()
        while True:
            fn()
            calls += 1
            t = time.perf_counter() - t0
            if t >= seconds:
                break
        best = max(best, calls / t)
    return best


def bench_layout(name, capacity, leaves, args, emit) -> None:
    rows_names = (f"extend/{name}/w1", f"sample256/{name}")
    if args.filter and not any(args.filter in r for r in rows_names):
        return
    scratch = os.path.join(args.dir, f"torchrl-{name}")
    rb = ReplayBuffer(storage=LazyMemmapStorage(capacity, scratch_dir=scratch),
                      batch_size=BATCH)
    batch = make_batch(leaves, BATCH)
    # Fill to capacity (untimed): every page of the memmap files is written once.
    for _ in range((capacity + BATCH - 1) // BATCH):
        rb.extend(batch)
    if len(rb) != capacity:
        raise SystemExit(f"torchrl_ring: {name}: {len(rb)} rows after filling, "
                         f"expected {capacity}")
    for row, fn in zip(rows_names, (lambda: rb.extend(batch), rb.sample)):
        if args.filter and args.filter not in row:
            continue
        calls_s = timed(fn, args.seconds / args.rounds, args.rounds, args.warmup)
        emit(f"{row}\t{calls_s:.1f}\t{calls_s * BATCH:.1f}")
    check_sample(rb.sample(), leaves)
    del rb
    shutil.rmtree(scratch, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=os.environ.get("TMPDIR") or "/tmp",
                    help="where the memmap files go (default $TMPDIR or /tmp)")
    ap.add_argument("--output", "-o", metavar="FILE", help="also write the table into FILE")
    ap.add_argument("--seconds", type=float, default=1.0,
                    help="time spent in rounds per row (default 1)")
    ap.add_argument("--rounds", type=int, default=4, help="rounds per row; the best is "
                    "reported (default 4)")
    ap.add_argument("--warmup", type=float, default=0.1, help="warm-up per row (default 0.1 s)")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads "
                    "(default 1; 0: torch's default)")
    ap.add_argument("--filter", help="rows whose name contains SUBSTR")
    ap.add_argument("--quick", action="store_true",
                    help="small capacities, a few milliseconds per row (a smoke test)")
    args = ap.parse_args(argv)
    if args.seconds <= 0 or args.rounds < 1 or args.warmup < 0 or args.threads < 0:
        ap.error("--seconds must be > 0, --rounds >= 1, --warmup >= 0, --threads >= 0")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.quick:
        args.seconds, args.rounds, args.warmup = 0.02, 1, 0.0

    logging.getLogger("torchrl").setLevel(logging.WARNING)
    lines: list = []

    def emit(line: str) -> None:
        lines.append(line)
        print(line, flush=True)

    base = tempfile.mkdtemp(prefix="torchrl_ring.", dir=args.dir)
    args.dir = base
    try:
        emit(f"# torchrl_ring.py: torchrl {torchrl.__version__}, tensordict "
             f"{tensordict.__version__}, torch {torch.__version__}, "
             f"intra-op threads: {torch.get_num_threads()}")
        emit(f"# ReplayBuffer(LazyMemmapStorage(capacity, scratch_dir={base}/...), "
             f"batch_size={BATCH}); {args.rounds} rounds of "
             f"{args.seconds / args.rounds:g} s per row, best round"
             + ("; --quick: small capacities, figures mean nothing" if args.quick else ""))
        emit("name\tcalls_per_s\trows_per_s")
        for name, capacity, quick_capacity, leaves in LAYOUTS:
            bench_layout(name, quick_capacity if args.quick else capacity, leaves, args, emit)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if args.output:
        tmp = f"{args.output}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
