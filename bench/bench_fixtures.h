/* SPDX-License-Identifier: MIT */
/*
 * bench_fixtures.h - the fixtures of tensordict's benchmarks, built as
 * section 6 of the format notes describes them (shapes, dtypes, key order,
 * nesting), and the memory-per-leaf measurement made on them.
 */
#ifndef TD_BENCH_FIXTURES_H
#define TD_BENCH_FIXTURES_H

#include "bench.h"

#include <tdstore.h>

/** Leaves of big_nested_td: "0.t", "0.1.t", ..., "0.1.(...).18.t". */
#define FIX_NESTED_LEAVES 19
/** Keys of big_td: "0".."99". */
#define FIX_BIG_KEYS 100

extern const int64_t fix_b34[2];  /* batch [3, 4] */
extern const int64_t fix_b310[2]; /* batch [3, 10] (the stacked fixture) */
extern const int64_t fix_b320[2]; /* batch [3, 20] (split / chunk) */
extern const int64_t fix_s345[3]; /* a, b, c = zeros(3, 4, 5) */

/** K20 = ("20", "19", ..., "1"). */
extern const char *const fix_k20[20];
/** LEAF = ("0", ..., "18", "t"); its first 19 components are NODE. */
extern const char *const fix_leaf[20];
/** LEAF as a dotted key. */
extern const char fix_leaf_dotted[];

/** "0".."99" (static strings). */
const char *fix_key(size_t i);

/** zeros(shape) + value, float32 (torch.zeros(shape) + i). */
int fix_full(td_tensor *t, int ndim, const int64_t *shape, double value);

/** `n` leaves zeros(shape) + first + i. On failure none is left allocated. */
int fix_leaves(td_tensor *out, size_t n, double first, int ndim, const int64_t *shape);

/** Release `n` tensors. */
void fix_release(td_tensor *t, size_t n);

/** td = {"a": a, "b": {"b1": b}}, batch [3, 4]. */
int fix_build_td(td_dict **out, const td_tensor *a, const td_tensor *b);

/** big_td from FIX_BIG_KEYS given leaves (shared, not copied). */
int fix_build_big(td_dict **out, const td_tensor *leaves);

/**
 * big_nested_td from FIX_NESTED_LEAVES given leaves (leaves[i - 1] is
 * the one of value i): the chain root{"0"}, each level holding "t" then the
 * next level, every level of batch `batch` (2 dims).
 */
int fix_build_nested(td_dict **out, const td_tensor *leaves, const int64_t *batch);

/** big_td, with its own leaves. */
int fix_big_td(td_dict **out);

/** big_nested_td(size=batch), with its own leaves. */
int fix_big_nested_td(td_dict **out, const int64_t *batch);

/**
 * big_nested_stacked_td: the chain of batch [3, 10], unbound along dim 1
 * and stacked back along dim 1 - dense, as torch.stack makes it with
 * lazy_legacy() False.
 */
int fix_big_nested_stacked_td(td_dict **out);

/**
 * The same chain unbound along dim 1 and stacked back lazily along dim 1
 * (td_lazy_stack(), owning the 10 pieces): tensordict's
 * LazyStackedTensorDict fixture (LAZY_LEGACY_OP=1).
 */
int fix_big_nested_lazy_td(td_dict **out);

/** Memory per leaf of big_td and big_nested_td (bench_program.memory). */
int fix_memory(bench_memory *out, size_t cap);

#endif /* TD_BENCH_FIXTURES_H */
