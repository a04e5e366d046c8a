/* SPDX-License-Identifier: MIT */
/*
 * bench_memmap.c - the rows of tensordict's
 * benchmarks/common/memmap_benchmarks_test.py. The fixtures are anonymous
 * memory-mapped tensors (MemoryMappedTensor without a file name): here
 * tdstore's anonymous shared tensors, td_mmap_tensor_zeros() and
 * td_mmap_tensor_from_tensor() with no path (blocks of the shared-memory
 * arena). The creation rows time those calls, each result dropped; rows
 * that save a model are n/a here (tdstorebench measures saving).
 */
#include "config.h"

#include "bench.h"
#include "bench_fixtures.h"
#include "bench_suites.h"

#include <tdstore.h>

#include <stdlib.h>
#include <string.h>

#define MEMMAP_KEYS 30

static const int64_t b340[2] = { 3, 40 };

typedef struct mm {
	td_tensor mmt;    /* memmap_tensor: MemoryMappedTensor.zeros((3, 4, 5)) */
	td_tensor src;    /* torch.zeros((3, 4, 5)), for from_tensor */
	td_tensor two[2]; /* [memmap_tensor] * 2: borrowed copies of mmt, no references */
	td_dict *td;      /* td_memmap: 30 keys, zeros(3, 40) + i, batch [3, 40] */
} mm;

/* TensorDict({str(i): zeros(3, 40) + i for i in range(30)}, [3, 40]).memmap_() */
static int make_td_memmap(td_dict **out)
{
	td_dict *d;
	size_t i;
	int rc;

	rc = td_dict_new(&d, 2, b340);
	for (i = 0; rc >= 0 && i < MEMMAP_KEYS; i++) {
		td_tensor t = TD_TENSOR_INIT, m = TD_TENSOR_INIT;

		/* memmap_() puts each leaf in its own MemoryMappedTensor. */
		rc = td_tensor_full(&t, TD_DTYPE_F32, 2, b340, td_scalar_float((double)i));
		if (rc >= 0)
			rc = td_mmap_tensor_from_tensor(&m, NULL, &t, NULL);
		if (rc >= 0)
			rc = td_dict_set_tensor(d, fix_key(i), &m);
		td_tensor_release(&m);
		td_tensor_release(&t);
	}
	if (rc < 0) {
		td_dict_free(d);
		return rc;
	}
	*out = d;
	return 0;
}

static void mm_teardown(void *state)
{
	mm *s = state;

	if (!s)
		return;
	td_tensor_release(&s->mmt);
	td_tensor_release(&s->src);
	td_dict_free(s->td);
	free(s);
}

static int mm_setup(void **state, const void *arg)
{
	mm *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return bench_fail("out of memory");
	*state = s;
	rc = td_mmap_tensor_zeros(&s->mmt, NULL, TD_DTYPE_F32, 3, fix_s345, NULL);
	if (rc >= 0)
		rc = td_tensor_zeros(&s->src, TD_DTYPE_F32, 3, fix_s345);
	s->two[0] = s->mmt;
	s->two[1] = s->mmt;
	if (rc >= 0 && arg)
		rc = make_td_memmap(&s->td);
	return rc < 0 ? rc : 0;
}

/* MemoryMappedTensor.empty((3, 4, 5)): anonymous shared memory, made and dropped */
static int run_creation(void *state, size_t i)
{
	td_tensor out;
	int rc;

	(void)state;
	(void)i;
	rc = td_mmap_tensor_empty(&out, NULL, TD_DTYPE_F32, 3, fix_s345, NULL);
	if (rc >= 0)
		td_tensor_release(&out);
	return rc;
}

/* MemoryMappedTensor.from_tensor(torch.zeros((3, 4, 5))) */
static int run_creation_from_tensor(void *state, size_t i)
{
	mm *s = state;
	td_tensor out;
	int rc;

	(void)i;
	rc = td_mmap_tensor_from_tensor(&out, NULL, &s->src, NULL);
	if (rc >= 0)
		td_tensor_release(&out);
	return rc;
}

/* memmap_tensor + 1 */
static int run_add_one(void *state, size_t i)
{
	mm *s = state;
	td_tensor out;
	int rc;

	(void)i;
	rc = td_tensor_binary_scalar(&out, &s->mmt, td_scalar_int(1), TD_OP_ADD);
	if (rc >= 0)
		td_tensor_release(&out);
	return rc;
}

/* memmap_tensor.contiguous() */
static int run_contiguous(void *state, size_t i)
{
	mm *s = state;
	td_tensor out;
	int rc;

	(void)i;
	rc = td_tensor_contiguous(&out, &s->mmt);
	if (rc >= 0)
		td_tensor_release(&out);
	return rc;
}

/*
 * torch.stack([memmap_tensor] * 2, 0). The list is made in setup: Python
 * makes it of two pointers, where td_tensor_stack() takes an array of
 * tensors by value (560 bytes to copy, a fifth of a call).
 */
static int run_stack(void *state, size_t i)
{
	mm *s = state;
	td_tensor out;
	int rc;

	(void)i;
	rc = td_tensor_stack(&out, s->two, 2, 0);
	if (rc >= 0)
		td_tensor_release(&out);
	return rc;
}

static int apply_same(td_tensor *out, const td_tensor *in, const td_item *item, void *payload)
{
	(void)item;
	(void)payload;
	td_tensor_ref(out, in);
	return 0;
}

static int apply_add_one(td_tensor *out, const td_tensor *in, const td_item *item, void *payload)
{
	(void)item;
	(void)payload;
	return td_tensor_binary_scalar(out, in, td_scalar_int(1), TD_OP_ADD);
}

/* td_memmap[0], then optionally .apply(fn) on it; both results dropped */
static int index_then(const mm *s, td_apply_fn fn)
{
	static const td_index zero[1] = { { .kind = TD_INDEX_INT, .start = 0, .step = 1 } };
	td_dict *row = NULL, *applied = NULL;
	int rc;

	rc = td_dict_index(&row, s->td, zero, 1);
	if (rc >= 0 && fn)
		rc = td_dict_apply(&applied, row, fn, NULL);
	td_dict_free(applied);
	td_dict_free(row);
	return rc;
}

static int run_index(void *state, size_t i)
{
	(void)i;
	return index_then(state, NULL);
}

static int run_index_astensor(void *state, size_t i)
{
	(void)i;
	return index_then(state, apply_same);
}

static int run_index_op(void *state, size_t i)
{
	(void)i;
	return index_then(state, apply_add_one);
}

static const int with_td = 1;

#define ROW(nm, fn, n, arg_) \
	{ \
		.name = nm, .setup = mm_setup, .run = fn, .teardown = mm_teardown, .entries = n, \
		.arg = arg_ \
	}
#define ROW_NA(nm, why) \
	{ \
		.name = nm, .note = why \
	}

#define NA_SAVE \
	"saves nn.Transformer's weights (184 leaves, 176 MB) as a memmap " \
	"directory: the storage layer's save (storage issue)"
#define NA_PICKLE \
	"torch.save of a state_dict (Python pickle): a Python-only reference " \
	"with no tdstore counterpart"

static const bench_row memmap_rows[] = {
	{ .name = "test_creation[device0]",
		.setup = mm_setup,
		.run = run_creation,
		.teardown = mm_teardown,
		.note = "td_mmap_tensor_empty with no path: a block of "
				"the shared-memory arena (one memfd per 256 KiB chunk, no system call per "
				"tensor; TDSTORE_SHM_ARENA_MAX=0 gives one memfd per tensor, ~20 us)" },
	{ .name = "test_creation_from_tensor",
		.setup = mm_setup,
		.run = run_creation_from_tensor,
		.teardown = mm_teardown,
		.note = "as test_creation[device0], plus the 240-byte copy" },
	ROW("test_add_one[memmap_tensor0]", run_add_one, 0, NULL),
	ROW("test_contiguous[memmap_tensor0]", run_contiguous, 0, NULL),
	ROW("test_stack[memmap_tensor0]", run_stack, 0, NULL),
	ROW("test_memmaptd_index", run_index, MEMMAP_KEYS, &with_td),
	{ .name = "test_memmaptd_index_astensor",
		.setup = mm_setup,
		.run = run_index_astensor,
		.teardown = mm_teardown,
		.entries = MEMMAP_KEYS,
		.arg = &with_td,
		.note = "as_tensor() rebuilds the dict with the same leaves: "
				"td_dict_apply() with a callback returning a new reference" },
	ROW("test_memmaptd_index_op", run_index_op, MEMMAP_KEYS, &with_td),
	ROW_NA("test_serialize_model", "from_module(nn.Transformer()) then memmap(dir): " NA_SAVE),
	ROW_NA("test_serialize_model_pickle", NA_PICKLE),
	ROW_NA("test_serialize_weights", "weights.memmap(dir, num_threads=32): " NA_SAVE),
	ROW_NA("test_serialize_weights_returnearly",
		"memmap(..., return_early=True), "
		"asynchronous: " NA_SAVE),
	ROW_NA("test_serialize_weights_pickle", NA_PICKLE),
	ROW_NA("test_serialize_weights_filesystem", "memmap() into anonymous shared memory: " NA_SAVE),
	ROW_NA("test_serialize_model_filesystem",
		"from_module() then memmap() into "
		"anonymous shared memory: " NA_SAVE),
};

const bench_suite bench_memmap_suite = { "benchmarks/common/memmap_benchmarks_test.py", memmap_rows,
	sizeof(memmap_rows) / sizeof(memmap_rows[0]) };
