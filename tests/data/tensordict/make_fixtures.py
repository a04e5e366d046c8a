#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the tensordict interop fixtures that tdstore's tests read.

Usage:
    python3 tests/data/tensordict/make_fixtures.py [NAME ...]

Run it with a Python that has torch and tensordict installed (a throwaway
virtualenv is enough: ``pip install torch tensordict numpy``).  It writes the
fixture directories and ``expected.json`` next to itself, deleting and
recreating each fixture directory first.  CI never runs it: the committed
fixtures are golden files written by the real tensordict library, and
regenerating them changes what the tests check.  Only regenerate on purpose
(e.g. to add a fixture) and record the versions used in README.md.  With
fixture names as arguments only those are written (and their entries of
expected.json replaced, the others kept as they are): the way to add one.

The output is deterministic: every value comes from ``torch.arange`` or a
literal, nothing is random, and the script writes sequentially (no executor).

Fixtures (each written with ``TensorDict.memmap(prefix)`` and the default
``robust_key=True`` unless said otherwise):

  flat/               batch [3, 4], one leaf of every supported dtype
  nested/             batch [2], nested TensorDicts two levels deep, strings
  strings/            batch [3], NonTensorData strings (one non-ASCII) and a
                      list of strings, which tensordict stores as a
                      NonTensorStack
  strings_nd/         batch [2]: a list of lists of strings (a NonTensorStack
                      of shape [2, 2], one dim past the batch) and, in "sub"
                      (batch [2, 3]), a 2-d NonTensorStack "grid"
  lazy_stack/         LazyStackedTensorDict of two batch-[] dicts whose "x"
                      has different lengths (ragged)
  lazy_stack_dense/   LazyStackedTensorDict of two batch-[] dicts with equal
                      shapes and a key ("only0") present in the first only
  encoded_keys/       keys that the robust key encoding has to escape
  zero_elem/          batch [0], leaf of shape [0, 3]
  zero_elem_inner/    batch [2], leaf of shape [2, 0] next to a normal leaf
  legacy_raw/         written with robust_key=False: raw file names
  lazy_nested/        batch [2], lazy stacks as values: "z" (two batch-[]
                      dicts with "x" and a nested "n") and, inside the
                      dense "sub", a ragged "w"

Notes on the requested contents:
  * nested/: a child TensorDict's batch size must start with its parent's, so
    "sub/deeper" has batch [2, 5] (not [2]) and "y" has shape [2, 5, 2].
  * encoded_keys/: tensordict accepted every key requested ("a/b", "my key",
    "50%", "", ".", "..", "tab\\there", "colon:x", "q?*" and the nested
    "sub/dir"); none had to be skipped.  If a future version refuses one, the
    script raises rather than silently dropping it.

expected.json layout (all keys always present for their kind):

  {
    "format": 1,
    "versions": {"torch": str, "tensordict": str, "numpy": str},
    "fixtures": {
      "<fixture dir name>": NODE,
      ...
    }
  }

  NODE is either a TensorDict node:
    {
      "kind": "tensordict",
      "batch_size": [int, ...],
      "robust_key": bool,          # how file names were encoded
      "dicts": [                   # every nested TensorDict, root excluded,
        {"path": [str, ...],       #   parents before children
         "batch_size": [int, ...],
         "disk_path": str}         #   directory, relative to this node's dir
      ],
      "leaves": [LEAF, ...],       # every leaf at any depth, depth-first in
                                   # insertion order
      "lazy": [                    # only when the dict holds lazy stacks:
        {"path": [str, ...],       #   each stack held at any depth (not
         "disk_path": str,         #   looked into: its leaves are not in
         "stack": NODE}            #   "leaves"), a lazy stack node
      ]
    }
  or a lazy stack node:
    {
      "kind": "lazy_stack",
      "stack_dim": int,
      "batch_size": [int, ...],    # of the stack, as tensordict reports it
      "children": [NODE, ...]      # child i lives in the subdirectory "<i>"
    }

  LEAF is one of:
    {"path": [str, ...], "kind": "tensor",
     "dtype": "torch.float32",     # str(dtype), as meta.json spells it
     "shape": [int, ...],
     "nbytes": int,
     "hex": str,                   # lowercase hex of the C-contiguous,
                                   # little-endian bytes ("" if no elements)
     "disk_path": str}             # the .memmap file relative to the node's
                                   # dir (absent on disk when nbytes == 0)
    {"path": [str, ...], "kind": "string", "value": str,
     "disk_path": str}             # NonTensorData directory (has meta.json)
    {"path": [str, ...], "kind": "string_list", "value": [str, ...],
     "disk_path": str}             # NonTensorStack directory (has meta.json)

  "path" is the key path from the node's root; "disk_path" joins the encoded
  path components with "/".  bool is stored as one byte per element (0/1);
  complex as (real, imag) pairs; bfloat16/float16 as their 2-byte patterns.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy
import tensordict
import torch
from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    lazy_stack,
)

HERE = Path(__file__).resolve().parent

# The rule of tensordict's robust key encoding (robust_key=True), restated
# here so that expected.json records file names independently of
# tensordict's private helpers; the script checks it against the disk.
_UNSAFE = set('/<>:"|?*\\ \0%') | {chr(i) for i in range(32)} | {chr(127)}


def encode_key(key: str, robust: bool) -> str:
    if not robust:
        return key
    if key == "":
        return "%"
    if key in (".", ".."):
        return "%2E" * len(key)
    return "".join(f"%{ord(c):02X}" if c in _UNSAFE else c for c in key)


def ar(n, dtype):
    return torch.arange(n).to(dtype)


# --------------------------------------------------------------------------
# Fixture contents
# --------------------------------------------------------------------------


def make_flat():
    b = (3, 4)
    n = 12
    i8 = (torch.arange(n) - 6).to(torch.int8)
    i8[0] = -128
    i8[-1] = 127
    leaves = {
        "obs": (torch.arange(60, dtype=torch.float32) / 10).reshape(3, 4, 5),
        "action": (torch.arange(n, dtype=torch.int64) - 6).reshape(b),
        "done": (torch.arange(n) % 2 == 0).reshape(3, 4, 1),
        "u8": (torch.arange(24) * 10).to(torch.uint8).reshape(3, 4, 2),
        "bf16": (torch.arange(n, dtype=torch.float32) * 0.5 - 2)
        .to(torch.bfloat16)
        .reshape(b),
        "f16": (torch.arange(n, dtype=torch.float32) * 0.25 - 1)
        .to(torch.float16)
        .reshape(b),
        "f64": (torch.arange(n, dtype=torch.float64) / 3).reshape(b),
        "i8": i8.reshape(b),
        "i16": (torch.arange(n) * 1000 - 6000).to(torch.int16).reshape(b),
        "i32": (torch.arange(n) * 100000 - 600000).to(torch.int32).reshape(b),
        "c64": torch.complex(
            torch.arange(n, dtype=torch.float32),
            -torch.arange(n, dtype=torch.float32) * 0.5,
        ).reshape(b),
        "c128": torch.complex(
            torch.arange(n, dtype=torch.float64) / 4,
            torch.arange(n, dtype=torch.float64) - 100,
        ).reshape(b),
    }
    # Unsigned types beyond uint8: values above the signed maximum.
    if hasattr(torch, "uint16"):
        leaves["u16"] = torch.tensor(
            [i * 5000 for i in range(n)], dtype=torch.uint16
        ).reshape(b)
    if hasattr(torch, "uint32"):
        leaves["u32"] = torch.tensor(
            [i * 390_000_000 for i in range(n)], dtype=torch.uint32
        ).reshape(b)
    if hasattr(torch, "uint64"):
        leaves["u64"] = torch.tensor(
            [i * (1 << 60) + i for i in range(n)], dtype=torch.uint64
        ).reshape(b)
    return TensorDict(leaves, batch_size=b)


def make_nested():
    deeper = TensorDict(
        {"y": (torch.arange(20) + 100).to(torch.uint8).reshape(2, 5, 2)},
        batch_size=[2, 5],
    )
    sub = TensorDict(
        {
            "x": torch.arange(10, dtype=torch.int64).reshape(2, 5) * 7,
            "deeper": deeper,
            "label": "inside sub",
        },
        batch_size=[2, 5],
    )
    return TensorDict(
        {
            "a": torch.arange(6, dtype=torch.float32).reshape(2, 3) + 0.5,
            "sub": sub,
            "name": "hello",
        },
        batch_size=[2],
    )


def make_strings():
    td = TensorDict(
        {
            "s": "plain string",
            "lst": ["alpha", "beta", "gamma"],  # becomes a NonTensorStack
            "utf8": "héllo wörld ✓",
        },
        batch_size=[3],
    )
    assert isinstance(td.get("lst"), NonTensorStack), type(td.get("lst"))
    assert isinstance(td.get("s"), NonTensorData), type(td.get("s"))
    return td


def make_strings_nd():
    sub = TensorDict(
        {"grid": [["a", "b", "c"], ["d", "e", "é"]]},  # a 2-d NonTensorStack
        batch_size=[2, 3],
    )
    td = TensorDict(
        {
            "pairs": [["x", "y"], ["z", "w"]],  # a stack of shape [2, 2] in batch [2]
            "sub": sub,
        },
        batch_size=[2],
    )
    assert isinstance(td.get("pairs"), NonTensorStack), type(td.get("pairs"))
    assert list(td.get("pairs").batch_size) == [2, 2], td.get("pairs").batch_size
    assert list(td.get(("sub", "grid")).batch_size) == [2, 3]
    return td


def make_lazy_stack():
    return lazy_stack(
        [
            TensorDict(
                {"x": torch.arange(2, dtype=torch.float32) + 1,
                 "k": torch.tensor(10, dtype=torch.int64)},
                batch_size=[],
            ),
            TensorDict(
                {"x": torch.arange(3, dtype=torch.float32) * -1.5,
                 "k": torch.tensor(-20, dtype=torch.int64)},
                batch_size=[],
            ),
        ]
    )


def make_lazy_stack_dense():
    return lazy_stack(
        [
            TensorDict(
                {"x": torch.arange(3, dtype=torch.float32),
                 "only0": torch.arange(2, dtype=torch.int64) + 40},
                batch_size=[],
            ),
            TensorDict(
                {"x": torch.arange(3, dtype=torch.float32) + 3},
                batch_size=[],
            ),
        ]
    )


def make_lazy_nested():
    z = lazy_stack(
        [
            TensorDict(
                {"x": torch.arange(3, dtype=torch.float32) + 1,
                 "n": TensorDict({"y": torch.arange(2, dtype=torch.int64)},
                                 batch_size=[])},
                batch_size=[],
            ),
            TensorDict(
                {"x": torch.arange(3, dtype=torch.float32) * -2,
                 "n": TensorDict({"y": torch.arange(2, dtype=torch.int64) + 7},
                                 batch_size=[])},
                batch_size=[],
            ),
        ]
    )
    w = lazy_stack(
        [
            TensorDict({"r": torch.arange(2, dtype=torch.int16)}, batch_size=[]),
            TensorDict({"r": torch.arange(4, dtype=torch.int16) - 9},
                       batch_size=[]),
        ]
    )
    return TensorDict(
        {"a": torch.arange(2, dtype=torch.int32) + 5,
         "z": z,
         "sub": TensorDict({"w": w, "v": torch.arange(2, dtype=torch.float64)},
                           batch_size=[2])},
        batch_size=[2],
    )


ENCODED_KEYS = ["a/b", "my key", "50%", "", ".", "..", "tab\there",
                "colon:x", "q?*"]


def make_encoded_keys():
    leaves = {}
    for i, k in enumerate(ENCODED_KEYS):
        leaves[k] = torch.arange(2, dtype=torch.int32) + 10 * i
    leaves["sub/dir"] = TensorDict(
        {"v": torch.arange(2, dtype=torch.float32) - 0.25}, batch_size=[2]
    )
    td = TensorDict(leaves, batch_size=[2])
    missing = [k for k in list(ENCODED_KEYS) + ["sub/dir"] if k not in td.keys()]
    if missing:
        raise RuntimeError(f"tensordict dropped keys {missing!r}")
    return td


def make_zero_elem():
    return TensorDict({"x": torch.zeros(0, 3, dtype=torch.float32)},
                      batch_size=[0])


def make_zero_elem_inner():
    return TensorDict(
        {"x": torch.zeros(2, 0, dtype=torch.float32),
         "y": torch.arange(2, dtype=torch.int64) + 1},
        batch_size=[2],
    )


def make_legacy_raw():
    return TensorDict(
        {"my key": torch.arange(3, dtype=torch.int64) + 5,
         "plain": torch.arange(3, dtype=torch.float32) * 2},
        batch_size=[3],
    )


# (name, builder, robust_key)
FIXTURES = [
    ("flat", make_flat, True),
    ("nested", make_nested, True),
    ("strings", make_strings, True),
    ("strings_nd", make_strings_nd, True),
    ("lazy_stack", make_lazy_stack, True),
    ("lazy_stack_dense", make_lazy_stack_dense, True),
    ("encoded_keys", make_encoded_keys, True),
    ("zero_elem", make_zero_elem, True),
    ("zero_elem_inner", make_zero_elem_inner, True),
    ("legacy_raw", make_legacy_raw, False),
    ("lazy_nested", make_lazy_nested, True),
]


# --------------------------------------------------------------------------
# expected.json
# --------------------------------------------------------------------------


def tensor_hex(t: torch.Tensor) -> str:
    t = t.detach().cpu().contiguous().reshape(-1)
    if t.numel() == 0:
        return ""
    return t.view(torch.uint8).numpy().tobytes().hex()


def describe(td, robust: bool) -> dict:
    if isinstance(td, LazyStackedTensorDict):
        return {
            "kind": "lazy_stack",
            "stack_dim": td.stack_dim,
            "batch_size": list(td.batch_size),
            "children": [describe(c, robust) for c in td.tensordicts],
        }
    node = {
        "kind": "tensordict",
        "batch_size": list(td.batch_size),
        "robust_key": robust,
        "dicts": [],
        "leaves": [],
    }

    def walk(d, path):
        for key, value in d.items():
            p = path + [key]
            disk = "/".join(encode_key(k, robust) for k in p)
            if isinstance(value, NonTensorStack):
                node["leaves"].append({"path": p, "kind": "string_list",
                                       "value": value.tolist(),
                                       "disk_path": disk})
            elif isinstance(value, NonTensorData):
                assert isinstance(value.data, str), value
                node["leaves"].append({"path": p, "kind": "string",
                                       "value": value.data,
                                       "disk_path": disk})
            elif isinstance(value, LazyStackedTensorDict):
                node.setdefault("lazy", []).append(
                    {"path": p, "disk_path": disk,
                     "stack": describe(value, robust)})
            elif isinstance(value, TensorDict):
                node["dicts"].append({"path": p,
                                      "batch_size": list(value.batch_size),
                                      "disk_path": disk})
                walk(value, p)
            elif isinstance(value, torch.Tensor):
                node["leaves"].append({
                    "path": p,
                    "kind": "tensor",
                    "dtype": str(value.dtype),
                    "shape": list(value.shape),
                    "nbytes": value.numel() * value.element_size(),
                    "hex": tensor_hex(value),
                    "disk_path": disk + ".memmap",
                })
            else:
                raise TypeError(f"unexpected leaf {p!r}: {type(value)}")

    walk(td, [])
    return node


# --------------------------------------------------------------------------
# Verification: reload with tensordict and compare with expected.json and
# with the raw files on disk.
# --------------------------------------------------------------------------


def verify(root: Path, node: dict, loaded) -> None:
    if node["kind"] == "lazy_stack":
        assert isinstance(loaded, LazyStackedTensorDict), type(loaded)
        assert loaded.stack_dim == node["stack_dim"]
        assert len(loaded.tensordicts) == len(node["children"])
        for i, (child, ltd) in enumerate(zip(node["children"],
                                             loaded.tensordicts)):
            verify(root / str(i), child, ltd)
        return
    assert list(loaded.batch_size) == node["batch_size"], root
    assert (root / "meta.json").is_file(), root
    for lz in node.get("lazy", []):
        verify(root / lz["disk_path"], lz["stack"], loaded.get(tuple(lz["path"])))
    for d in node["dicts"]:
        sub = loaded.get(tuple(d["path"]))
        assert list(sub.batch_size) == d["batch_size"], d
        assert (root / d["disk_path"] / "meta.json").is_file(), d
    for leaf in node["leaves"]:
        key = tuple(leaf["path"])
        where = root / leaf["disk_path"]
        if leaf["kind"] == "tensor":
            t = loaded.get(key)
            assert str(t.dtype) == leaf["dtype"], leaf["path"]
            assert list(t.shape) == leaf["shape"], leaf["path"]
            assert tensor_hex(t) == leaf["hex"], leaf["path"]
            if leaf["nbytes"]:
                raw = where.read_bytes()
                # No header, no trailing bytes: the file is the data.
                assert raw.hex() == leaf["hex"], (where, len(raw))
        else:
            v = loaded.get(key)
            if leaf["kind"] == "string":
                assert isinstance(v, NonTensorData), type(v)
                assert v.data == leaf["value"], (v.data, leaf)
            else:
                assert isinstance(v, NonTensorStack), type(v)
                assert v.tolist() == leaf["value"], (v.tolist(), leaf)
            assert (where / "meta.json").is_file(), where


def main() -> int:
    if sys.byteorder != "little":
        raise SystemExit("run this on a little-endian machine")
    only = set(sys.argv[1:])
    unknown = only - {name for name, _, _ in FIXTURES}
    if unknown:
        raise SystemExit(f"unknown fixtures: {sorted(unknown)}")
    fixtures = {}
    if only:
        # Keep every other fixture's entry exactly as it is.
        with open(HERE / "expected.json", encoding="utf-8") as f:
            fixtures = json.load(f)["fixtures"]
    for name, build, robust in FIXTURES:
        if only and name not in only:
            continue
        prefix = HERE / name
        if prefix.exists():
            shutil.rmtree(prefix)
        td = build()
        td.memmap(prefix, robust_key=robust, num_threads=0)
        fixtures[name] = describe(td, robust)

    expected = {
        "format": 1,
        "versions": {
            "torch": torch.__version__.split("+")[0],
            "tensordict": tensordict.__version__,
            "numpy": numpy.__version__,
        },
        "fixtures": fixtures,
    }
    with open(HERE / "expected.json", "w", encoding="utf-8") as f:
        json.dump(expected, f, indent=1, ensure_ascii=True)
        f.write("\n")

    for name, _, robust in FIXTURES:
        if only and name not in only:
            continue
        loaded = TensorDict.load_memmap(HERE / name, robust_key=robust)
        verify(HERE / name, fixtures[name], loaded)
        print(f"{name}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
