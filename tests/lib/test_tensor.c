/* SPDX-License-Identifier: MIT */
/*
 * test_tensor.c - tensor creation, validation, properties, single-element
 * access, references and release (lib/tensor.c).
 */
#include "td_test.h"

#include <string.h>

/* C-order strides as torch computes them (sizes 0 and 1 count as 1). */
static void c_strides(int ndim, const int64_t *shape, int64_t *strides)
{
	int64_t s = 1;
	int i;

	for (i = ndim - 1; i >= 0; i--) {
		strides[i] = s;
		s *= shape[i] > 1 ? shape[i] : 1;
	}
}

/* Whether two tensor values describe the same view (entries past ndim are unspecified). */
static bool same_view(const td_tensor *a, const td_tensor *b)
{
	return a->buffer == b->buffer && a->offset == b->offset && a->dtype == b->dtype &&
		a->ndim == b->ndim &&
		memcmp(td_tensor_shape(a), td_tensor_shape(b), sizeof(int64_t) * (size_t)a->ndim) == 0 &&
		memcmp(td_tensor_strides(a), td_tensor_strides(b), sizeof(int64_t) * (size_t)a->ndim) == 0;
}

static td_buffer *device_buffer(size_t nbytes)
{
	td_buffer_wrap_opts o = TD_BUFFER_WRAP_OPTS_INIT;
	td_buffer *b;

	o.memory = TD_MEMORY_DEVICE;
	o.device = 0;
	/* A fake device address: the library must never dereference it. */
	td_cr_assert_ok(td_buffer_wrap(&b, (void *)(uintptr_t)0xdead0000u, nbytes, &o));
	return b;
}

static td_buffer *readonly_buffer(void *data, size_t nbytes)
{
	td_buffer_wrap_opts o = TD_BUFFER_WRAP_OPTS_INIT;
	td_buffer *b;

	o.flags = TD_BUFFER_READONLY;
	td_cr_assert_ok(td_buffer_wrap(&b, data, nbytes, &o));
	return b;
}

static int hook_calls;

static void count_release(void *data, size_t nbytes, void *payload)
{
	(void)data;
	(void)nbytes;
	(void)payload;
	hook_calls++;
}

/* A wrapped host buffer over `data` whose release is counted in hook_calls. */
static td_buffer *counted_buffer(void *data, size_t nbytes)
{
	td_buffer_wrap_opts o = TD_BUFFER_WRAP_OPTS_INIT;
	td_buffer *b;

	o.release = count_release;
	td_cr_assert_ok(td_buffer_wrap(&b, data, nbytes, &o));
	return b;
}

/* ------------------------------------------------------------------------ */
/* Creation                                                                  */
/* ------------------------------------------------------------------------ */

Test(tensor, empty_gives_a_contiguous_tensor_in_a_fresh_buffer)
{
	static const struct {
		int ndim;
		int64_t shape[4];
	} shapes[] = {
		{ 0, { 0 } },
		{ 1, { 5 } },
		{ 3, { 2, 3, 4 } },
		{ 3, { 3, 0, 2 } },
		{ 4, { 1, 1, 7, 1 } },
		{ 1, { 0 } },
	};
	size_t s, k;

	for (k = 0; k < TD_DTYPE_COUNT; k++) {
		for (s = 0; s < TD_TEST_ARRAY_LEN(shapes); s++) {
			int64_t strides[4], numel = 1;
			td_tensor t;
			int i;

			td_cr_assert_ok(td_tensor_empty(&t, td_test_all_dtypes[k], shapes[s].ndim,
				shapes[s].ndim ? shapes[s].shape : NULL));
			c_strides(shapes[s].ndim, shapes[s].shape, strides);
			for (i = 0; i < shapes[s].ndim; i++)
				numel *= shapes[s].shape[i];
			cr_assert_eq(t.dtype, td_test_all_dtypes[k]);
			cr_assert_eq(t.ndim, shapes[s].ndim);
			cr_assert_eq(t.offset, 0);
			for (i = 0; i < t.ndim; i++) {
				cr_assert_eq(td_tensor_shape(&t)[i], shapes[s].shape[i]);
				cr_assert_eq(td_tensor_strides(&t)[i], strides[i], "%s shape %zu dim %d: %lld",
					td_dtype_name(t.dtype), s, i, (long long)td_tensor_strides(&t)[i]);
			}
			cr_assert_eq(td_tensor_numel(&t), numel);
			cr_assert_eq(td_tensor_nbytes(&t), (size_t)numel * td_dtype_size(t.dtype));
			cr_assert(td_tensor_is_contiguous(&t));
			cr_assert_eq(td_buffer_memory(t.buffer), TD_MEMORY_HEAP);
			cr_assert_eq(td_buffer_refcount(t.buffer), 1);
			cr_assert_eq(td_buffer_size(t.buffer), td_tensor_nbytes(&t));
			cr_assert_eq(td_tensor_data(&t), td_buffer_data(t.buffer));
			cr_assert_eq((uintptr_t)td_tensor_data(&t) % TD_BUFFER_ALIGNMENT, 0);
			td_tensor_release(&t);
		}
	}
}

Test(tensor, max_dims_are_accepted)
{
	int64_t shape[TD_MAX_DIMS];
	td_tensor t;
	int i;

	for (i = 0; i < TD_MAX_DIMS; i++)
		shape[i] = i % 3 == 0 ? 2 : 1;
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_I16, TD_MAX_DIMS, shape));
	cr_assert_eq(t.ndim, TD_MAX_DIMS);
	cr_assert_eq(td_tensor_numel(&t), 64);
	td_tensor_release(&t);
}

Test(tensor, zeros_and_full_initialize_every_element)
{
	static const int64_t shape[2] = { 3, 5 };
	size_t k;

	for (k = 0; k < TD_DTYPE_COUNT; k++) {
		td_dtype d = td_test_all_dtypes[k];
		td_tensor z, f;
		int64_t idx[2];
		size_t b;

		td_cr_assert_ok(td_tensor_zeros(&z, d, 2, shape));
		for (b = 0; b < td_tensor_nbytes(&z); b++)
			cr_assert_eq(((unsigned char *)td_tensor_data(&z))[b], 0, "%s byte %zu",
				td_dtype_name(d), b);
		td_cr_assert_ok(td_tensor_full(&f, d, 2, shape, td_scalar_int(3)));
		for (idx[0] = 0; idx[0] < 3; idx[0]++) {
			for (idx[1] = 0; idx[1] < 5; idx[1]++) {
				td_scalar s;
				td_cr_assert_ok(td_tensor_get(&s, &f, idx));
				switch (td_dtype_category(d)) {
				case TD_CATEGORY_BOOL:
					cr_assert(s.v.b);
					break;
				case TD_CATEGORY_INT:
					cr_assert_eq(s.v.i, 3);
					break;
				case TD_CATEGORY_UINT:
					cr_assert_eq(s.v.u, 3);
					break;
				case TD_CATEGORY_FLOAT:
					cr_assert_eq(s.v.f, 3.0);
					break;
				case TD_CATEGORY_COMPLEX:
					cr_assert_eq(s.v.c[0], 3.0);
					cr_assert_eq(s.v.c[1], 0.0);
					break;
				}
			}
		}
		td_tensor_release(&z);
		td_tensor_release(&f);
	}
}

/* Dispatch to one of the four creation functions. */
static int create(int which, td_tensor *out, td_dtype dtype, int ndim, const int64_t *shape)
{
	static const double data[128]; /* enough for every shape below */

	switch (which) {
	case 0:
		return td_tensor_empty(out, dtype, ndim, shape);
	case 1:
		return td_tensor_zeros(out, dtype, ndim, shape);
	case 2:
		return td_tensor_full(out, dtype, ndim, shape, td_scalar_float(1.5));
	default:
		return td_tensor_from_data(out, dtype, ndim, shape, data);
	}
}

Test(tensor, creation_refuses_bad_arguments)
{
	static const int64_t ok[2] = { 2, 3 }, negative[2] = { 2, -1 };
	static const int64_t too_many[2] = { INT64_MAX, 2 };         /* numel overflows int64 */
	static const int64_t too_big[1] = { (int64_t)1 << 62 };      /* f32 bytes overflow size_t */
	static const int64_t over_ptrdiff[1] = { (int64_t)1 << 60 }; /* 2^63 bytes of f64 */
	int64_t shape17[TD_MAX_DIMS + 1];
	int which, i;

	for (i = 0; i <= TD_MAX_DIMS; i++)
		shape17[i] = 1;
	for (which = 0; which < 4; which++) {
		td_tensor t;

		td_test_poison(&t);
		td_cr_assert_err(create(which, NULL, TD_DTYPE_F32, 2, ok), TD_EINVAL);
		td_cr_assert_err(create(which, &t, (td_dtype)-1, 2, ok), TD_EINVAL);
		td_cr_assert_err(create(which, &t, (td_dtype)TD_DTYPE_COUNT, 2, ok), TD_EINVAL);
		td_cr_assert_err(create(which, &t, TD_DTYPE_F32, -1, ok), TD_EINVAL);
		td_cr_assert_err(create(which, &t, TD_DTYPE_F32, TD_MAX_DIMS + 1, shape17), TD_EINVAL);
		td_cr_assert_err(create(which, &t, TD_DTYPE_F32, 2, NULL), TD_EINVAL);
		td_cr_assert_err(create(which, &t, TD_DTYPE_F32, 2, negative), TD_EINVAL);
		td_cr_assert_err(create(which, &t, TD_DTYPE_F32, 2, too_many), TD_EOVERFLOW);
		td_cr_assert_err(create(which, &t, TD_DTYPE_F32, 1, too_big), TD_EOVERFLOW);
		td_cr_assert_err(create(which, &t, TD_DTYPE_F64, 1, over_ptrdiff), TD_EOVERFLOW);
		td_cr_assert_err(create(which, &t, TD_DTYPE_C128, 1, too_big), TD_EOVERFLOW);
		td_test_assert_poisoned(&t);
	}
}

Test(tensor, full_refuses_an_invalid_scalar_without_leaking)
{
	static const int64_t shape[1] = { 4 };
	td_scalar bad = td_scalar_int(1);
	td_tensor t;

	bad.kind = (td_scalar_kind)7;
	td_test_poison(&t);
	td_test_alloc_install(-1);
	td_cr_assert_err(td_tensor_full(&t, TD_DTYPE_F32, 1, shape, bad), TD_EINVAL);
	cr_assert_eq(td_test_alloc_live(), 0);
	td_test_alloc_uninstall();
	td_test_assert_poisoned(&t);
}

Test(tensor, from_data_copies_the_caller_bytes)
{
	static const int64_t shape[2] = { 2, 2 };
	int32_t data[4] = { 1, -2, 3, -4 };
	td_tensor t;

	td_cr_assert_ok(td_tensor_from_data(&t, TD_DTYPE_I32, 2, shape, data));
	cr_assert_neq(td_tensor_data(&t), (void *)data);
	data[0] = 99;
	cr_assert_eq(((int32_t *)td_tensor_data(&t))[0], 1);
	cr_assert_eq(((int32_t *)td_tensor_data(&t))[3], -4);
	td_tensor_release(&t);
}

Test(tensor, from_data_needs_data_only_for_elements)
{
	static const int64_t empty[2] = { 3, 0 }, two[1] = { 2 };
	td_tensor t;

	td_cr_assert_ok(td_tensor_from_data(&t, TD_DTYPE_F64, 2, empty, NULL));
	cr_assert_eq(td_tensor_numel(&t), 0);
	td_tensor_release(&t);
	td_test_poison(&t);
	td_cr_assert_err(td_tensor_from_data(&t, TD_DTYPE_F64, 1, two, NULL), TD_EINVAL);
	td_cr_assert_err(td_tensor_from_data(&t, TD_DTYPE_F64, 0, NULL, NULL), TD_EINVAL);
	td_test_assert_poisoned(&t);
}

/* ------------------------------------------------------------------------ */
/* Views of existing buffers                                                 */
/* ------------------------------------------------------------------------ */

Test(tensor, from_buffer_makes_a_view_and_takes_a_reference)
{
	static const int64_t shape[2] = { 2, 3 }, strides[2] = { 6, 2 };
	float data[24];
	td_buffer *b;
	td_tensor t, c;
	int64_t idx[2];
	int i;

	for (i = 0; i < 24; i++)
		data[i] = (float)i;
	hook_calls = 0;
	b = counted_buffer(data, sizeof(data));
	td_cr_assert_ok(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, 2, shape, strides, 1));
	cr_assert_eq(t.buffer, b);
	cr_assert_eq(td_buffer_refcount(b), 2);
	cr_assert_eq(td_tensor_data(&t), (void *)&data[1]);
	cr_assert_not(td_tensor_is_contiguous(&t));
	for (idx[0] = 0; idx[0] < 2; idx[0]++) {
		for (idx[1] = 0; idx[1] < 3; idx[1]++) {
			td_scalar s;
			td_cr_assert_ok(td_tensor_get(&s, &t, idx));
			cr_assert_eq(s.v.f, (double)(1 + 6 * idx[0] + 2 * idx[1]));
		}
	}
	/* NULL strides: C order. */
	td_cr_assert_ok(td_tensor_from_buffer(&c, b, TD_DTYPE_F32, 2, shape, NULL, 18));
	cr_assert_eq(td_tensor_strides(&c)[0], 3);
	cr_assert_eq(td_tensor_strides(&c)[1], 1);
	cr_assert(td_tensor_is_contiguous(&c));
	cr_assert_eq(td_buffer_refcount(b), 3);
	/* The views keep the buffer alive after the caller's reference is gone. */
	td_buffer_unref(b);
	td_tensor_release(&t);
	cr_assert_eq(hook_calls, 0);
	cr_assert_eq(((float *)td_tensor_data(&c))[5], 23.0f);
	td_tensor_release(&c);
	cr_assert_eq(hook_calls, 1);
}

Test(tensor, from_buffer_accepts_views_that_end_at_the_buffer_end)
{
	static const int64_t n24[1] = { 24 }, n12[1] = { 12 }, one[1] = { 1 };
	static const int64_t sq[2] = { 3, 3 }, sq_strides[2] = { 10, 1 };
	static const int64_t empty[2] = { 4, 0 };
	float data[24];
	td_buffer *b = counted_buffer(data, sizeof(data));
	td_tensor t;

	td_cr_assert_ok(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, 1, n24, NULL, 0));
	td_tensor_release(&t);
	td_cr_assert_ok(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, 1, one, NULL, 23));
	td_tensor_release(&t);
	td_cr_assert_ok(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, 0, NULL, NULL, 23));
	cr_assert_eq(td_tensor_numel(&t), 1);
	td_tensor_release(&t);
	td_cr_assert_ok(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, 2, sq, sq_strides, 1));
	td_tensor_release(&t);
	td_cr_assert_ok(td_tensor_from_buffer(&t, b, TD_DTYPE_F64, 1, n12, NULL, 0));
	td_tensor_release(&t);
	/* A view without elements may sit anywhere, as in torch. */
	td_cr_assert_ok(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, 2, empty, NULL, 1000));
	cr_assert_eq(td_tensor_numel(&t), 0);
	td_tensor_release(&t);
	cr_assert_eq(td_buffer_refcount(b), 1);
	td_buffer_unref(b);
}

Test(tensor, from_buffer_refuses_views_outside_the_buffer)
{
	static const int64_t n25[1] = { 25 }, n13[1] = { 13 }, two[1] = { 2 };
	static const int64_t sq[2] = { 3, 3 }, sq_strides[2] = { 11, 1 };
	static const int64_t huge[1] = { (int64_t)1 << 62 }, huge_stride[1] = { 4 };
	static const int64_t wide[2] = { 2, 0 }, wide_strides[2] = { INT64_MAX, 1 };
	float data[24];
	td_buffer *b = counted_buffer(data, sizeof(data));
	td_tensor t;

	td_test_poison(&t);
	td_cr_assert_err(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, 1, n25, NULL, 0), TD_EINDEX);
	td_cr_assert_err(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, 0, NULL, NULL, 24), TD_EINDEX);
	td_cr_assert_err(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, 1, two, NULL, 23), TD_EINDEX);
	td_cr_assert_err(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, 2, sq, sq_strides, 2), TD_EINDEX);
	td_cr_assert_err(td_tensor_from_buffer(&t, b, TD_DTYPE_F64, 1, n13, NULL, 0), TD_EINDEX);
	td_cr_assert_err(td_tensor_from_buffer(&t, b, TD_DTYPE_C128, 0, NULL, NULL, 6), TD_EINDEX);
	/* Offsets and strides whose arithmetic would overflow are refused, not wrapped. */
	td_cr_assert_err(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, 0, NULL, NULL, INT64_MAX),
		TD_EINDEX);
	td_cr_assert_err(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, 0, NULL, NULL, INT64_MAX / 2),
		TD_EINDEX);
	td_cr_assert_err(td_tensor_from_buffer(&t, b, TD_DTYPE_BOOL, 1, huge, huge_stride, 0),
		TD_EOVERFLOW);
	td_cr_assert_err(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, 1, huge, NULL, 0), TD_EOVERFLOW);
	/* Even without elements, an extent that does not fit in memory is refused. */
	td_cr_assert_err(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, 2, wide, wide_strides, 0),
		TD_EINDEX);
	td_cr_assert_err(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, 1, &wide[1], NULL, INT64_MAX / 2),
		TD_EINDEX);
	td_test_assert_poisoned(&t);
	cr_assert_eq(td_buffer_refcount(b), 1);
	td_buffer_unref(b);
}

Test(tensor, from_buffer_refuses_bad_arguments)
{
	static const int64_t shape[2] = { 2, 3 }, negative[2] = { -2, 3 };
	static const int64_t bad_strides[2] = { 3, -1 };
	int64_t shape17[TD_MAX_DIMS + 1];
	float data[24];
	td_buffer *b = counted_buffer(data, sizeof(data));
	td_tensor t;
	int i;

	for (i = 0; i <= TD_MAX_DIMS; i++)
		shape17[i] = 1;
	td_test_poison(&t);
	td_cr_assert_err(td_tensor_from_buffer(NULL, b, TD_DTYPE_F32, 2, shape, NULL, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_from_buffer(&t, NULL, TD_DTYPE_F32, 2, shape, NULL, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_from_buffer(&t, b, (td_dtype)42, 2, shape, NULL, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, -1, shape, NULL, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, TD_MAX_DIMS + 1, shape17, NULL, 0),
		TD_EINVAL);
	td_cr_assert_err(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, 2, NULL, NULL, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, 2, negative, NULL, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, 2, shape, bad_strides, 0),
		TD_EINVAL);
	td_cr_assert_err(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, 2, shape, NULL, -1), TD_EINVAL);
	td_test_assert_poisoned(&t);
	cr_assert_eq(td_buffer_refcount(b), 1);
	td_buffer_unref(b);
}

Test(tensor, like_constructors_copy_dtype_and_shape_but_not_strides)
{
	static const int64_t shape[2] = { 3, 4 }, strides[2] = { 1, 3 };
	int16_t data[12];
	td_buffer *b = counted_buffer(data, sizeof(data));
	td_tensor v, e, z;
	int i;

	td_cr_assert_ok(td_tensor_from_buffer(&v, b, TD_DTYPE_I16, 2, shape, strides, 0));
	td_cr_assert_ok(td_tensor_empty_like(&e, &v));
	td_cr_assert_ok(td_tensor_zeros_like(&z, &v));
	for (i = 0; i < 2; i++) {
		const td_tensor *r = i ? &z : &e;
		cr_assert_eq(r->dtype, TD_DTYPE_I16);
		cr_assert_eq(r->ndim, 2);
		cr_assert_eq(td_tensor_shape(r)[0], 3);
		cr_assert_eq(td_tensor_shape(r)[1], 4);
		cr_assert(td_tensor_is_contiguous(r));
		cr_assert_neq(r->buffer, b);
		cr_assert_eq(td_buffer_memory(r->buffer), TD_MEMORY_HEAP);
	}
	for (i = 0; i < 12; i++)
		cr_assert_eq(((int16_t *)td_tensor_data(&z))[i], 0);
	cr_assert_eq(td_buffer_refcount(b), 2);

	/* out aliasing the input: the view's reference is released. */
	td_cr_assert_ok(td_tensor_zeros_like(&v, &v));
	cr_assert_eq(td_buffer_refcount(b), 1);
	cr_assert_neq(v.buffer, b);
	td_tensor_release(&v);
	td_cr_assert_ok(td_tensor_from_buffer(&v, b, TD_DTYPE_I16, 2, shape, strides, 0));
	td_cr_assert_ok(td_tensor_empty_like(&v, &v));
	cr_assert_eq(td_buffer_refcount(b), 1);
	td_tensor_release(&v);
	td_tensor_release(&e);
	td_tensor_release(&z);
	td_buffer_unref(b);
}

Test(tensor, like_constructors_refuse_bad_arguments)
{
	static const int64_t shape[1] = { 4 };
	td_tensor t, out, released = TD_TENSOR_INIT;

	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_U8, 1, shape));
	td_test_poison(&out);
	td_cr_assert_err(td_tensor_empty_like(NULL, &t), TD_EINVAL);
	td_cr_assert_err(td_tensor_zeros_like(NULL, &t), TD_EINVAL);
	td_cr_assert_err(td_tensor_empty_like(&out, NULL), TD_EINVAL);
	td_cr_assert_err(td_tensor_zeros_like(&out, NULL), TD_EINVAL);
	td_cr_assert_err(td_tensor_empty_like(&out, &released), TD_EINVAL);
	td_cr_assert_err(td_tensor_zeros_like(&out, &released), TD_EINVAL);
	td_test_assert_poisoned(&out);
	td_tensor_release(&t);
}

Test(tensor, like_of_a_device_tensor_is_a_host_tensor)
{
	static const int64_t shape[2] = { 2, 8 };
	td_buffer *b = device_buffer(64);
	td_tensor d, z;

	td_cr_assert_ok(td_tensor_from_buffer(&d, b, TD_DTYPE_F32, 2, shape, NULL, 0));
	td_cr_assert_ok(td_tensor_zeros_like(&z, &d));
	cr_assert_eq(td_buffer_memory(z.buffer), TD_MEMORY_HEAP);
	cr_assert_eq(((float *)td_tensor_data(&z))[15], 0.0f);
	td_tensor_release(&z);
	td_tensor_release(&d);
	td_buffer_unref(b);
}

/* ------------------------------------------------------------------------ */
/* References                                                                */
/* ------------------------------------------------------------------------ */

Test(tensor, ref_and_release_count_buffer_references)
{
	static const int64_t shape[1] = { 4 };
	static const td_tensor init = TD_TENSOR_INIT;
	double data[4] = { 0 };
	td_tensor t, r;

	hook_calls = 0;
	{
		td_buffer *b = counted_buffer(data, sizeof(data));
		td_cr_assert_ok(td_tensor_from_buffer(&t, b, TD_DTYPE_F64, 1, shape, NULL, 0));
		td_buffer_unref(b);
	}
	cr_assert_eq(td_buffer_refcount(t.buffer), 1);
	td_tensor_ref(&r, &t);
	cr_assert(same_view(&r, &t));
	cr_assert_eq(td_buffer_refcount(t.buffer), 2);
	/* A reference onto itself changes nothing; NULLs are ignored. */
	td_tensor_ref(&t, &t);
	td_tensor_ref(NULL, &t);
	td_tensor_ref(&r, NULL);
	cr_assert_eq(td_buffer_refcount(t.buffer), 2);
	td_tensor_release(&t);
	/* Released: the fields of TD_TENSOR_INIT that matter (the unused tails
	 * of shape and strides are not rewritten). */
	cr_assert_eq(t.buffer, init.buffer);
	cr_assert_eq(t.ndim, init.ndim);
	cr_assert_eq(t.offset, init.offset);
	cr_assert_eq(t.dtype, init.dtype);
	cr_assert_eq(td_tensor_numel(&t), 1);
	cr_assert_null(td_tensor_data(&t));
	cr_assert_eq(td_buffer_refcount(r.buffer), 1);
	cr_assert_eq(hook_calls, 0);
	td_tensor_release(&t); /* already released: nothing happens */
	td_tensor_release(NULL);
	td_tensor_release(&r);
	cr_assert_eq(hook_calls, 1);
}

Test(tensor, array_free_releases_every_element)
{
	static const int64_t shape[2] = { 3, 2 }, empty[2] = { 0, 2 };
	td_tensor t, *arr;
	size_t n;

	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_I8, 2, shape));
	td_cr_assert_ok(td_tensor_unbind(&arr, &n, &t, 0));
	cr_assert_eq(n, 3);
	cr_assert_eq(td_buffer_refcount(t.buffer), 4);
	td_tensor_array_free(arr, n);
	cr_assert_eq(td_buffer_refcount(t.buffer), 1);
	td_tensor_release(&t);

	/* An unbind of an empty dim still returns an array to free. */
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_I8, 2, empty));
	td_test_alloc_install(-1);
	td_cr_assert_ok(td_tensor_unbind(&arr, &n, &t, 0));
	cr_assert_eq(n, 0);
	cr_assert_not_null(arr);
	td_tensor_array_free(arr, n);
	cr_assert_eq(td_test_alloc_live(), 0);
	td_test_alloc_uninstall();
	td_tensor_array_free(NULL, 5);
	td_tensor_release(&t);
}

/* ------------------------------------------------------------------------ */
/* Properties                                                                */
/* ------------------------------------------------------------------------ */

Test(tensor, properties_follow_shape_and_strides)
{
	static const int64_t shape[3] = { 2, 1, 3 };
	static const int64_t odd_strides[3] = { 3, 77, 1 }; /* size-1 dims do not matter */
	static const int64_t transposed[3] = { 1, 1, 2 };
	static const int64_t empty_shape[2] = { 0, 5 }, empty_strides[2] = { 9, 2 };
	int64_t data[16];
	td_buffer *b = counted_buffer(data, sizeof(data));
	td_tensor t, bad;

	td_cr_assert_ok(td_tensor_from_buffer(&t, b, TD_DTYPE_I64, 3, shape, odd_strides, 2));
	cr_assert(td_tensor_is_contiguous(&t));
	cr_assert_eq(td_tensor_numel(&t), 6);
	cr_assert_eq(td_tensor_nbytes(&t), 48);
	cr_assert_eq(td_tensor_data(&t), (void *)&data[2]);
	td_tensor_release(&t);
	td_cr_assert_ok(td_tensor_from_buffer(&t, b, TD_DTYPE_I64, 3, shape, transposed, 0));
	cr_assert_not(td_tensor_is_contiguous(&t));
	td_tensor_release(&t);
	td_cr_assert_ok(td_tensor_from_buffer(&t, b, TD_DTYPE_I64, 2, empty_shape, empty_strides, 0));
	cr_assert(td_tensor_is_contiguous(&t));
	cr_assert_eq(td_tensor_numel(&t), 0);
	cr_assert_eq(td_tensor_nbytes(&t), 0);
	td_tensor_release(&t);
	td_cr_assert_ok(td_tensor_from_buffer(&t, b, TD_DTYPE_I64, 0, NULL, NULL, 5));
	cr_assert_eq(td_tensor_numel(&t), 1);
	cr_assert_eq(td_tensor_nbytes(&t), 8);
	cr_assert(td_tensor_is_contiguous(&t));

	/* NULL and malformed values give neutral answers instead of crashing. */
	cr_assert_eq(td_tensor_numel(NULL), 0);
	cr_assert_eq(td_tensor_nbytes(NULL), 0);
	cr_assert_not(td_tensor_is_contiguous(NULL));
	cr_assert_null(td_tensor_data(NULL));
	bad = t;
	bad.ndim = TD_MAX_DIMS + 3;
	cr_assert_eq(td_tensor_numel(&bad), 0);
	cr_assert_not(td_tensor_is_contiguous(&bad));
	bad = t;
	bad.dtype = (td_dtype)99;
	cr_assert_eq(td_tensor_nbytes(&bad), 0);
	cr_assert_null(td_tensor_data(&bad));
	td_tensor_release(&t);
	td_buffer_unref(b);
}

/* ------------------------------------------------------------------------ */
/* Element access                                                            */
/* ------------------------------------------------------------------------ */

Test(tensor, get_and_set_address_the_right_element)
{
	static const int64_t shape[3] = { 2, 3, 2 }, strides[3] = { 1, 8, 3 };
	int64_t data[32];
	td_buffer *b;
	td_tensor t;
	int64_t idx[3];
	int i;

	for (i = 0; i < 32; i++)
		data[i] = i;
	b = counted_buffer(data, sizeof(data));
	td_cr_assert_ok(td_tensor_from_buffer(&t, b, TD_DTYPE_I64, 3, shape, strides, 5));
	for (idx[0] = -2; idx[0] < 2; idx[0]++) {
		for (idx[1] = -3; idx[1] < 3; idx[1]++) {
			for (idx[2] = -2; idx[2] < 2; idx[2]++) {
				int64_t k0 = idx[0] < 0 ? idx[0] + 2 : idx[0];
				int64_t k1 = idx[1] < 0 ? idx[1] + 3 : idx[1];
				int64_t k2 = idx[2] < 0 ? idx[2] + 2 : idx[2];
				int64_t pos = 5 + k0 * 1 + k1 * 8 + k2 * 3;
				td_scalar s;

				td_cr_assert_ok(td_tensor_get(&s, &t, idx));
				cr_assert_eq(s.kind, TD_SCALAR_INT);
				cr_assert_eq(s.v.i, pos, "index (%lld, %lld, %lld)", (long long)idx[0],
					(long long)idx[1], (long long)idx[2]);
				td_cr_assert_ok(td_tensor_set(&t, idx, td_scalar_int(-pos)));
				cr_assert_eq(data[pos], -pos);
				data[pos] = pos;
			}
		}
	}
	/* Elements outside the view were never written. */
	for (i = 0; i < 32; i++)
		cr_assert_eq(data[i], i);
	td_tensor_release(&t);
	td_buffer_unref(b);
}

Test(tensor, get_returns_the_scalar_kind_of_the_dtype_category)
{
	size_t k;

	for (k = 0; k < TD_DTYPE_COUNT; k++) {
		td_dtype d = td_test_all_dtypes[k];
		td_tensor t;
		td_scalar s;

		td_cr_assert_ok(td_tensor_zeros(&t, d, 0, NULL));
		td_cr_assert_ok(td_tensor_set(&t, NULL, td_scalar_uint(5)));
		td_cr_assert_ok(td_tensor_get(&s, &t, NULL));
		switch (td_dtype_category(d)) {
		case TD_CATEGORY_BOOL:
			cr_assert_eq(s.kind, TD_SCALAR_BOOL);
			cr_assert(s.v.b);
			break;
		case TD_CATEGORY_INT:
			cr_assert_eq(s.kind, TD_SCALAR_INT, "%s", td_dtype_name(d));
			cr_assert_eq(s.v.i, 5);
			break;
		case TD_CATEGORY_UINT:
			cr_assert_eq(s.kind, TD_SCALAR_UINT, "%s", td_dtype_name(d));
			cr_assert_eq(s.v.u, 5);
			break;
		case TD_CATEGORY_FLOAT:
			cr_assert_eq(s.kind, TD_SCALAR_FLOAT, "%s", td_dtype_name(d));
			cr_assert_eq(s.v.f, 5.0);
			break;
		case TD_CATEGORY_COMPLEX:
			cr_assert_eq(s.kind, TD_SCALAR_COMPLEX, "%s", td_dtype_name(d));
			cr_assert_eq(s.v.c[0], 5.0);
			cr_assert_eq(s.v.c[1], 0.0);
			break;
		}
		td_tensor_release(&t);
	}
}

Test(tensor, element_access_refuses_bad_arguments)
{
	static const int64_t shape[2] = { 3, 2 };
	const int64_t in[2] = { 2, 1 }, past[2] = { 3, 0 }, before[2] = { 0, -3 };
	td_tensor t, released = TD_TENSOR_INIT;
	td_scalar s, bad = td_scalar_int(0);

	bad.kind = (td_scalar_kind)-1;
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 2, shape));
	td_cr_assert_err(td_tensor_get(&s, NULL, in), TD_EINVAL);
	td_cr_assert_err(td_tensor_set(NULL, in, td_scalar_int(1)), TD_EINVAL);
	td_cr_assert_err(td_tensor_get(&s, &released, in), TD_EINVAL);
	td_cr_assert_err(td_tensor_set(&released, in, td_scalar_int(1)), TD_EINVAL);
	td_cr_assert_err(td_tensor_get(NULL, &t, in), TD_EINVAL);
	td_cr_assert_err(td_tensor_get(&s, &t, NULL), TD_EINVAL);
	td_cr_assert_err(td_tensor_set(&t, NULL, td_scalar_int(1)), TD_EINVAL);
	td_cr_assert_err(td_tensor_get(&s, &t, past), TD_EINDEX);
	td_cr_assert_err(td_tensor_set(&t, past, td_scalar_int(1)), TD_EINDEX);
	td_cr_assert_err(td_tensor_get(&s, &t, before), TD_EINDEX);
	td_cr_assert_err(td_tensor_set(&t, before, td_scalar_int(1)), TD_EINDEX);
	td_cr_assert_err(td_tensor_set(&t, in, bad), TD_EINVAL);
	cr_assert_eq(((float *)td_tensor_data(&t))[5], 0.0f);
	td_tensor_release(&t);
}

Test(tensor, malformed_tensor_values_are_refused)
{
	static const int64_t shape[2] = { 3, 2 };
	const int64_t idx[2] = { 0, 0 };
	td_tensor t, bad;
	td_scalar s;

	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_I32, 2, shape));
	bad = t;
	bad.dtype = (td_dtype)TD_DTYPE_COUNT;
	td_cr_assert_err(td_tensor_get(&s, &bad, idx), TD_EINVAL);
	bad = t;
	bad.ndim = -1;
	td_cr_assert_err(td_tensor_get(&s, &bad, idx), TD_EINVAL);
	bad.ndim = TD_MAX_DIMS + 1;
	td_cr_assert_err(td_tensor_get(&s, &bad, idx), TD_EINVAL);
	bad = t;
	bad.offset = -1;
	td_cr_assert_err(td_tensor_get(&s, &bad, idx), TD_EINVAL);
	bad = t;
	td_test_shape_w(&bad)[1] = -2;
	td_cr_assert_err(td_tensor_get(&s, &bad, idx), TD_EINVAL);
	bad = t;
	td_test_strides_w(&bad)[0] = -2;
	td_cr_assert_err(td_tensor_get(&s, &bad, idx), TD_EINVAL);
	bad = t;
	bad.offset = 1; /* the last element now lies past the 24-byte buffer */
	td_cr_assert_err(td_tensor_get(&s, &bad, idx), TD_EINDEX);
	td_cr_assert_err(td_tensor_set(&bad, idx, td_scalar_int(1)), TD_EINDEX);
	bad = t;
	td_test_shape_w(&bad)[0] = 4;
	td_cr_assert_err(td_tensor_get(&s, &bad, idx), TD_EINDEX);
	bad = t;
	td_test_strides_w(&bad)[0] = INT64_MAX;
	td_cr_assert_err(td_tensor_get(&s, &bad, idx), TD_EOVERFLOW);
	td_tensor_release(&t);
}

Test(tensor, read_only_buffer_refuses_writes)
{
	static const int64_t shape[1] = { 4 };
	uint16_t data[4] = { 1, 2, 3, 4 };
	td_buffer *b = readonly_buffer(data, sizeof(data));
	const int64_t idx[1] = { 2 };
	td_tensor t;
	td_scalar s;

	td_cr_assert_ok(td_tensor_from_buffer(&t, b, TD_DTYPE_U16, 1, shape, NULL, 0));
	td_cr_assert_ok(td_tensor_get(&s, &t, idx));
	cr_assert_eq(s.v.u, 3);
	td_cr_assert_err(td_tensor_set(&t, idx, td_scalar_int(9)), TD_EREADONLY);
	cr_assert_eq(data[2], 3);
	td_tensor_release(&t);
	td_buffer_unref(b);
}

Test(tensor, device_buffer_refuses_element_access)
{
	static const int64_t shape[2] = { 4, 4 };
	td_buffer *b = device_buffer(64 * sizeof(float));
	const int64_t idx[2] = { 1, 1 };
	td_tensor t;
	td_scalar s;

	td_cr_assert_ok(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, 2, shape, NULL, 8));
	cr_assert_eq(td_tensor_numel(&t), 16);
	cr_assert(td_tensor_is_contiguous(&t));
	cr_assert_eq((uintptr_t)td_tensor_data(&t), (uintptr_t)0xdead0000u + 8 * sizeof(float));
	td_cr_assert_err(td_tensor_get(&s, &t, idx), TD_ENOTSUP);
	td_cr_assert_err(td_tensor_set(&t, idx, td_scalar_float(1.0)), TD_ENOTSUP);
	td_tensor_release(&t);
	td_buffer_unref(b);
}

/* ------------------------------------------------------------------------ */
/* Allocation failures                                                       */
/* ------------------------------------------------------------------------ */

typedef struct create_ctx {
	int which;
	td_tensor in;
	td_tensor out;
} create_ctx;

static int create_body(void *p)
{
	static const int64_t shape[3] = { 4, 5, 6 };
	create_ctx *c = p;
	int rc;

	td_test_poison(&c->out);
	switch (c->which) {
	case 4:
		rc = td_tensor_empty_like(&c->out, &c->in);
		break;
	case 5:
		rc = td_tensor_zeros_like(&c->out, &c->in);
		break;
	default:
		rc = create(c->which, &c->out, TD_DTYPE_F64, 3, shape);
		break;
	}
	if (rc < 0)
		td_test_assert_poisoned(&c->out);
	return rc;
}

static void create_cleanup(void *p)
{
	create_ctx *c = p;

	cr_assert_eq(td_tensor_numel(&c->out), 120);
	td_tensor_release(&c->out);
}

Test(tensor, creation_reports_enomem_and_leaks_nothing)
{
	static const int64_t shape[3] = { 4, 5, 6 };
	create_ctx c;

	td_cr_assert_ok(td_tensor_zeros(&c.in, TD_DTYPE_I8, 3, shape));
	for (c.which = 0; c.which < 6; c.which++)
		td_test_enomem_sweep(create_body, create_cleanup, &c);
	td_tensor_release(&c.in);
}

/* Creation of a tensor of more than TD_TENSOR_INLINE_DIMS dims: two allocations. */
static int create_many_body(void *p)
{
	static const int64_t shape[6] = { 1, 2, 1, 3, 1, 2 };
	create_ctx *c = p;
	int rc;

	td_test_poison(&c->out);
	switch (c->which) {
	case 4:
		rc = td_tensor_empty_like(&c->out, &c->in);
		break;
	case 5:
		rc = td_tensor_zeros_like(&c->out, &c->in);
		break;
	case 6:
		rc = td_tensor_clone(&c->out, &c->in);
		break;
	case 7:
		rc = td_tensor_to_dtype(&c->out, &c->in, TD_DTYPE_F32);
		break;
	case 8:
		rc = td_tensor_from_buffer(&c->out, c->in.buffer, TD_DTYPE_I8, 6, shape, NULL, 0);
		break;
	default:
		rc = create(c->which, &c->out, TD_DTYPE_F64, 6, shape);
		break;
	}
	if (rc < 0)
		td_test_assert_poisoned(&c->out);
	return rc;
}

static void create_many_cleanup(void *p)
{
	create_ctx *c = p;

	cr_assert_eq(c->out.ndim, 6);
	cr_assert_eq(td_tensor_numel(&c->out), 12);
	cr_assert_eq(td_tensor_strides(&c->out)[3], 2);
	td_tensor_release(&c->out);
}

Test(tensor, creation_of_many_dims_reports_enomem_and_leaks_nothing)
{
	static const int64_t shape[6] = { 1, 2, 1, 3, 1, 2 };
	create_ctx c;

	td_cr_assert_ok(td_tensor_zeros(&c.in, TD_DTYPE_I8, 6, shape));
	for (c.which = 0; c.which < 9; c.which++)
		td_test_enomem_sweep(create_many_body, create_many_cleanup, &c);
	cr_assert_eq(td_buffer_refcount(c.in.buffer), 1);
	td_tensor_release(&c.in);
}
