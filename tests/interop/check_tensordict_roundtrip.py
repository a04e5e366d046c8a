#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks that Python tensordict loads the stores tdstore writes.

Usage:
    python3 tests/interop/check_tensordict_roundtrip.py [WRITE_STORES] [--keep DIR]

    WRITE_STORES  the built tests/interop/write_stores program
                  (default: _build/tests/interop/write_stores)
    --keep DIR    write the stores into DIR (created, must not exist) and keep
                  them, instead of a temporary directory

or, from a configured build tree, ``make interop-check`` (which builds the
program first; set PYTHON to an interpreter that has tensordict, e.g.
``PYTHON=/tmp/tdvenv/bin/python make interop-check``).

Needs torch and tensordict (``pip install torch tensordict numpy``); builds
nothing itself, and CI does not run it.  This is the write direction of the
interop proof; the read direction is tests/data/tensordict (fixtures written
by tensordict, read by the C tests).

What it does:
  1. runs WRITE_STORES OUTDIR, which writes several stores with
     td_store_memmap() and OUTDIR/expected.json describing every leaf as
     tdstore mapped it (key path, torch dtype, shape, C-order bytes as hex,
     or the string), every nested dict (path, batch size) and each store's
     batch size;
  2. loads each store with ``TensorDict.load_memmap`` and compares, for every
     store: the batch size, every nested dict's batch size, the exact set of
     keys (nothing missing, nothing extra), and every leaf: dtype, shape and
     exact bytes for tensors (so NaN, -0.0 and subnormals are compared
     bit for bit), type and value for strings;
  3. compares the "flat" store against values recomputed here with torch
     (independent of tdstore's conversions, e.g. float32 -> bfloat16), and
     each ring (a store with a "ring" entry: td_ring_create, extend, add,
     wrapped or not) against the rows recomputed here from their tickets:
     slot s holds the last ticket t with t % capacity == s, every leaf of
     every written row derives from t, unwritten slots are zeros;
  4. saves every loaded TensorDict again with tensordict's own
     ``TensorDict.memmap`` into a second directory, reloads that and runs
     the same comparison, showing that what tensordict loaded is a complete,
     ordinary TensorDict;
  5. compares the two directories: the same file names, the same .memmap
     bytes, the same meta.json content except the entries that only
     tensordict writes (format version, class id; listed as notes).

Prints one summary line per store and exits 1 on any mismatch or load
failure (with the Python traceback of a failed load), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

try:
    import torch
    import tensordict
    from tensordict import TensorDict, TensorDictBase
    from tensordict import NonTensorStack
    from tensordict.utils import is_non_tensor
except ImportError as exc:  # pragma: no cover - environment problem
    sys.exit(
        f"check_tensordict_roundtrip: needs torch and tensordict ({exc}); "
        "run it with PYTHON=/path/to/venv/bin/python"
    )

DEFAULT_BINARY = "_build/tests/interop/write_stores"


def path_str(path) -> str:
    return "/".join(repr(p) for p in path)


def tensor_bytes(t: torch.Tensor) -> bytes:
    """The C-order bytes of a CPU tensor of any dtype."""
    t = t.detach().cpu().contiguous().reshape(-1)
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return bytes(t.view(torch.uint8).numpy().tobytes())


def normalize_key(k) -> tuple:
    return k if isinstance(k, tuple) else (k,)


def check_td(td: TensorDictBase, exp: dict, errors: list) -> tuple[int, int]:
    """Compare a loaded TensorDict with one store of expected.json.

    Appends a message to ``errors`` for every mismatch; returns the numbers
    of tensor and string leaves checked.
    """
    want_bs = list(exp["batch_size"])
    if list(td.batch_size) != want_bs:
        errors.append(f"batch size {list(td.batch_size)}, expected {want_bs}")

    # Keys: leaves and nested dicts, at every depth.
    want_keys = {tuple(x["path"]) for x in exp["leaves"]}
    want_keys |= {tuple(x["path"]) for x in exp["dicts"]}
    got_keys = {
        normalize_key(k) for k in td.keys(include_nested=True, leaves_only=False)
    }
    for k in sorted(want_keys - got_keys):
        errors.append(f"missing key {path_str(k)}")
    for k in sorted(got_keys - want_keys):
        errors.append(f"extra key {path_str(k)}")

    for d in exp["dicts"]:
        key = tuple(d["path"])
        if key not in got_keys:
            continue
        sub = td.get(key)
        if not isinstance(sub, TensorDictBase) or is_non_tensor(sub):
            errors.append(f"{path_str(key)}: a {type(sub).__name__}, expected a TensorDict")
        elif list(sub.batch_size) != list(d["batch_size"]):
            errors.append(
                f"{path_str(key)}: batch size {list(sub.batch_size)}, "
                f"expected {d['batch_size']}"
            )

    ntensors = nstrings = 0
    for leaf in exp["leaves"]:
        key = tuple(leaf["path"])
        where = path_str(key)
        if key not in got_keys:
            continue
        value = td.get(key)
        if leaf["kind"] == "tensor":
            ntensors += 1
            if not isinstance(value, torch.Tensor):
                errors.append(f"{where}: a {type(value).__name__}, expected a tensor")
                continue
            if str(value.dtype) != leaf["dtype"]:
                errors.append(f"{where}: dtype {value.dtype}, expected {leaf['dtype']}")
                continue
            if list(value.shape) != list(leaf["shape"]):
                errors.append(f"{where}: shape {list(value.shape)}, expected {leaf['shape']}")
                continue
            got = tensor_bytes(value)
            want = bytes.fromhex(leaf["hex"])
            if got != want:
                first = next(
                    (i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                    min(len(got), len(want)),
                )
                errors.append(
                    f"{where}: bytes differ ({len(got)} vs {len(want)} bytes, "
                    f"first difference at byte {first})"
                )
        elif leaf["kind"] == "string":
            nstrings += 1
            if not is_non_tensor(value):
                errors.append(f"{where}: a {type(value).__name__}, expected NonTensorData")
                continue
            data = td.get_non_tensor(key)
            if not isinstance(data, str) or data != leaf["value"]:
                errors.append(f"{where}: string {data!r}, expected {leaf['value']!r}")
        elif leaf["kind"] == "string_list":
            # An array of strings: a NonTensorStack of the array's shape.
            nstrings += 1
            if not isinstance(value, NonTensorStack):
                errors.append(f"{where}: a {type(value).__name__}, expected NonTensorStack")
                continue
            if list(value.batch_size) != list(leaf["shape"]):
                errors.append(
                    f"{where}: stack of shape {list(value.batch_size)}, "
                    f"expected {leaf['shape']}"
                )
                continue
            data = value.tolist()
            if data != leaf["value"]:
                errors.append(f"{where}: strings {data!r}, expected {leaf['value']!r}")
        else:
            errors.append(f"{where}: unknown kind {leaf['kind']!r} in expected.json")
    return ntensors, nstrings


def flat_reference() -> dict:
    """The "flat" store's values, recomputed with torch from the formulas of
    make_flat() in write_stores.c (kept in step with it by hand)."""
    n = 12
    i = torch.arange(n, dtype=torch.int64)
    b = (3, 4)

    def ints(values, dtype):
        return torch.tensor(values, dtype=dtype).reshape(b)

    vi = list(range(n))
    u8 = [x * 23 for x in vi]
    u8[-1] = 255
    i8 = [x * 23 - 128 for x in vi]
    i8[-1] = 127
    i16 = [x * 5000 - 30000 for x in vi]
    i16[0], i16[-1] = -(2**15), 2**15 - 1
    i32 = [x * 300000000 - 1500000000 for x in vi]
    i32[0], i32[-1] = -(2**31), 2**31 - 1
    i64 = [(x - 6) * 10**12 for x in vi]
    i64[0], i64[-1] = -(2**63), 2**63 - 1
    u16 = [x * 5000 for x in vi]
    u16[-1] = 2**16 - 1
    u32 = [x * 390000000 for x in vi]
    u32[-1] = 2**32 - 1
    u64 = [x * 2**60 + x for x in vi]
    u64[-1] = 2**64 - 1

    f16 = i.to(torch.float32) * 0.25 - 1
    f16[-1] = 65504.0
    bf16 = i.to(torch.float32) * 0.5 - 2
    bf16[-1] = 2.0**100
    f32 = torch.arange(60, dtype=torch.float32) / 8 - 3
    f32[1] = -0.0
    f32[2] = float("inf")
    f32[3] = float("-inf")
    f32[4] = torch.finfo(torch.float32).tiny / 4
    f32[5] = torch.finfo(torch.float32).max
    f64 = i.to(torch.float64) / 4 - 1
    f64[1] = -0.0
    f64[2] = torch.finfo(torch.float64).max
    f64[3] = torch.finfo(torch.float64).tiny / 8
    f64[4] = float("-inf")
    fi = i.to(torch.float32)
    di = i.to(torch.float64)
    ref = {
        "bool": (i % 3 == 0).reshape(3, 4, 1),
        "uint8": ints(u8, torch.uint8),
        "int8": ints(i8, torch.int8),
        "int16": ints(i16, torch.int16),
        "int32": ints(i32, torch.int32),
        "int64": ints(i64, torch.int64),
        "float16": f16.to(torch.float16).reshape(b),
        "bfloat16": bf16.to(torch.bfloat16).reshape(b),
        "float32": f32.reshape(3, 4, 5),
        "float64": f64.reshape(b),
        "complex64": torch.complex(fi, -fi * 0.5).reshape(b),
        "complex128": torch.complex(di / 4, di - 100).reshape(b),
    }
    for name, values, bits in (("uint16", u16, 16), ("uint32", u32, 32), ("uint64", u64, 64)):
        dtype = getattr(torch, name, None)
        if dtype is not None:
            ref[name] = torch.tensor(values, dtype=dtype).reshape(b)
        else:  # older torch: compare the bit pattern through a signed type
            signed = getattr(torch, f"int{bits}")
            ref[name] = torch.tensor(
                [v - 2**bits if v >= 2 ** (bits - 1) else v for v in values], dtype=signed
            ).reshape(b)
    return ref


def check_flat_reference(td: TensorDictBase, errors: list) -> None:
    for key, want in flat_reference().items():
        if key not in td.keys():
            errors.append(f"reference: missing {key!r}")
            continue
        got = td.get(key)
        if got.shape != want.shape or tensor_bytes(got) != tensor_bytes(want):
            errors.append(f"reference: {key!r} differs from the value recomputed with torch")


def ring_reference(capacity: int, tickets: int) -> dict:
    """A ring's leaves, recomputed from the formulas of ring_row() in
    write_stores.c (kept in step with it by hand): slot s holds the row of
    the last ticket t < tickets with t % capacity == s, or zeros."""
    ref = {
        ("obs",): torch.zeros(capacity, 3, dtype=torch.float32),
        ("action",): torch.zeros(capacity, dtype=torch.int64),
        ("next", "obs"): torch.zeros(capacity, 3, dtype=torch.float32),
        ("next", "reward"): torch.zeros(capacity, 1, dtype=torch.float32),
        ("next", "done"): torch.zeros(capacity, 1, dtype=torch.bool),
        ("next", "info", "step"): torch.zeros(capacity, dtype=torch.int32),
        ("frames", "pixels"): torch.zeros(capacity, 2, 4, dtype=torch.uint8),
    }
    k3 = torch.arange(3, dtype=torch.float32)
    for s in range(min(capacity, tickets)):
        t = s + (tickets - 1 - s) // capacity * capacity
        ref[("obs",)][s] = t + 0.25 * k3 + 1
        ref[("action",)][s] = 1000 * (t + 1) + 7
        ref[("next", "obs")][s] = -t - 0.5 * k3 - 1
        ref[("next", "reward")][s] = 1.5 * (t + 1)
        ref[("next", "done")][s] = True
        ref[("next", "info", "step")][s] = t + 1
        ref[("frames", "pixels")][s] = ((t * 8 + torch.arange(8) + 1) % 256).reshape(2, 4)
    return ref


def check_ring_reference(td: TensorDictBase, ring: dict, errors: list) -> str:
    """Compare a loaded ring with ring_reference(); returns a summary."""
    capacity, tickets = ring["capacity"], ring["tickets"]
    ref = ring_reference(capacity, tickets)
    got_keys = {normalize_key(k) for k in td.keys(include_nested=True, leaves_only=True)}
    if got_keys != set(ref):
        errors.append(f"ring: leaves {sorted(got_keys)}, expected {sorted(ref)}")
    if list(td.batch_size) != [capacity]:
        errors.append(f"ring: batch size {list(td.batch_size)}, expected [{capacity}]")
    for key, want in ref.items():
        if key not in got_keys:
            continue
        got = td.get(key)
        if got.dtype != want.dtype or got.shape != want.shape:
            errors.append(f"ring: {path_str(key)} is {got.dtype}{list(got.shape)}, expected "
                          f"{want.dtype}{list(want.shape)}")
            continue
        for s in range(capacity):
            if tensor_bytes(got[s]) != tensor_bytes(want[s]):
                what = "zeros (never written)" if s >= tickets else \
                    f"the row of ticket {s + (tickets - 1 - s) // capacity * capacity}"
                errors.append(f"ring: {path_str(key)} slot {s} differs from {what}")
    written = min(capacity, tickets)
    overwritten = sum(1 for s in range(written) if (tickets - 1 - s) // capacity > 0)
    return (f"ring: {tickets} rows into {capacity} slots, {written} written "
            f"({overwritten} overwritten), {capacity - written} zeros; every slot "
            "recomputed from its ticket")


# meta.json entries that tensordict may write and tdstore does not (_names
# only for named dims, which tdstore does not have). tdstore writes
# _format_version, _class and _is_non_tensor as tensordict 0.15 does; an
# older tensordict skips them.
TENSORDICT_ONLY_META = ("_names",)


NON_TENSOR_STACK = "<class 'tensordict.tensorclass.NonTensorStack'>"


def compare_layout(ours: Path, theirs: Path, errors: list, notes: set) -> None:
    """Compare the directory tdstore wrote with the one tensordict wrote for
    the same content: the same files, the same .memmap bytes, the same
    meta.json content apart from TENSORDICT_ONLY_META (collected in notes)."""

    def files(root: Path) -> set:
        # .tdstore-coord (coordination), .tdstore-ring (a ring's live state) and
        # .tdstore-index (the directory key index) are tdstore's own files
        # (doc/format.md); tensordict ignores files its meta.json does not name.
        return {p.relative_to(root).as_posix() for p in root.rglob("*")
                if p.is_file() and p.name not in (".tdstore-coord", ".tdstore-ring",
                                                  ".tdstore-index")}

    a, b = files(ours), files(theirs)
    for f in sorted(a - b):
        errors.append(f"layout: {f} written by tdstore only")
    for f in sorted(b - a):
        errors.append(f"layout: {f} written by tensordict only")
    for f in sorted(a & b):
        pa, pb = ours / f, theirs / f
        if f.endswith(".memmap"):
            if pa.read_bytes() != pb.read_bytes():
                errors.append(f"layout: {f} differs from tensordict's")
        elif Path(f).name == "meta.json":
            ma = json.loads(pa.read_text(encoding="utf-8"))
            mb = json.loads(pb.read_text(encoding="utf-8"))
            for name in TENSORDICT_ONLY_META:
                if name in mb and name not in ma:
                    notes.add(f"{name} ({mb.pop(name)!r}, in {mb.get('_type', '?')})")
            if (mb.get("_type") == NON_TENSOR_STACK and ma.get("device") is None
                    and mb.get("device") == "cpu"):
                # A stack re-saved from a loaded TensorDict takes the dict's
                # device; a fresh tensordict save writes null, as tdstore does
                # (tests/data/tensordict/strings/lst, written by tensordict).
                mb["device"] = None
                notes.add("device ('cpu' for null, in NonTensorStacks re-saved after loading)")
            if ma != mb:
                diff = sorted(k for k in set(ma) | set(mb) if ma.get(k) != mb.get(k))
                errors.append(f"layout: {f} differs from tensordict's in {diff}")


def load(path: Path, errors: list):
    try:
        return TensorDict.load_memmap(path)
    except Exception as exc:  # noqa: BLE001 - any failure is a finding
        tb = traceback.extract_tb(exc.__traceback__)
        frames = "; ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in tb[-3:])
        errors.append(f"load_memmap failed: {type(exc).__name__}: {exc} [{frames}]")
        traceback.print_exc(file=sys.stderr)
        return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary", nargs="?", default=DEFAULT_BINARY, help="write_stores program")
    ap.add_argument("--keep", metavar="DIR", help="write into DIR and keep it")
    args = ap.parse_args(argv)

    binary = Path(args.binary)
    if not binary.is_file():
        print(f"check_tensordict_roundtrip: {binary}: not found (build it first: "
              "make interop-check, or make tests/interop/write_stores)", file=sys.stderr)
        return 2

    if args.keep:
        work = Path(args.keep)
        work.mkdir(parents=True)
        cleanup = None
    else:
        cleanup = tempfile.TemporaryDirectory(prefix="tdstore-interop-")
        work = Path(cleanup.name)
    try:
        return run(binary.resolve(), work)
    finally:
        if cleanup is not None:
            cleanup.cleanup()


def run(binary: Path, work: Path) -> int:
    out = work / "tdstore"
    resaved = work / "resaved"
    proc = subprocess.run([str(binary), str(out)], capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"FAIL: {binary} exited with {proc.returncode}:\n{proc.stdout}{proc.stderr}",
              file=sys.stderr)
        return 1
    expected = json.loads((out / "expected.json").read_text(encoding="utf-8"))
    print(f"tdstore {expected.get('tdstore_version', '?')} wrote, "
          f"tensordict {tensordict.__version__} (torch {torch.__version__}) loads")

    failed = 0
    notes: set = set()
    for name, exp in expected["stores"].items():
        errors: list[str] = []
        td = load(out / name, errors)
        ntensors = nstrings = 0
        ring_note = None
        if td is not None:
            ntensors, nstrings = check_td(td, exp, errors)
            if name == "flat":
                check_flat_reference(td, errors)
            if "ring" in exp:
                ring_note = check_ring_reference(td, exp["ring"], errors)
            # tensordict saves what it loaded again, and reloads that.
            try:
                td.memmap(resaved / name, copy_existing=True)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"re-save with TensorDict.memmap failed: "
                              f"{type(exc).__name__}: {exc}")
            else:
                td2 = load(resaved / name, errors)
                if td2 is not None:
                    sub_errors: list[str] = []
                    check_td(td2, exp, sub_errors)
                    errors.extend(f"re-saved: {e}" for e in sub_errors)
                compare_layout(out / name, resaved / name, errors, notes)
        status = "ok  " if not errors else "FAIL"
        print(f"{status} {name:<14} batch {exp['batch_size']}, {len(exp['dicts'])} nested "
              f"dicts, {ntensors} tensors, {nstrings} strings checked, re-saved")
        if ring_note:
            print(f"     {ring_note}")
        for e in errors:
            print(f"     - {e}")
        failed += bool(errors)

    for note in sorted(notes):
        print(f"note: tensordict also writes {note}; tdstore does not")
    total = len(expected["stores"])
    print(f"{total - failed}/{total} stores match" + ("" if not failed else "; FAILED"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
