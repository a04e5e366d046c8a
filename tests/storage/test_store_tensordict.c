/* SPDX-License-Identifier: MIT */
/*
 * test_store_tensordict.c - interop with Python tensordict: every directory
 * under tests/data/tensordict was written by the real library
 * (make_fixtures.py there); expected.json lists every leaf with its dtype,
 * shape and bytes. Each fixture is opened and checked value by value, then
 * written back with td_store_memmap and compared file by file.
 */
#include "td_test.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

TestSuite(store_tensordict, .init = td_test_tmpdir_init, .fini = td_test_tmpdir_fini);

static char fixture_root[4096];

static json_t *load_expected(void)
{
	const char *data = getenv("TD_TEST_DATA");
	char path[4200];
	json_error_t jerr;
	json_t *e;

	cr_assert_not_null(data, "TD_TEST_DATA is not set");
	snprintf(fixture_root, sizeof(fixture_root), "%s/tensordict", data);
	snprintf(path, sizeof(path), "%s/expected.json", fixture_root);
	e = json_load_file(path, 0, &jerr);
	cr_assert_not_null(e, "%s: %s", path, jerr.text);
	cr_assert_eq(json_integer_value(json_object_get(e, "format")), 1);
	return e;
}

static const json_t *fixture(const json_t *e, const char *name)
{
	const json_t *f = json_object_get(json_object_get(e, "fixtures"), name);

	cr_assert_not_null(f, "no fixture %s in expected.json", name);
	return f;
}

static const char *fixture_dir(const char *name)
{
	static char buf[4400];

	snprintf(buf, sizeof(buf), "%s/%s", fixture_root, name);
	return buf;
}

/* A JSON list of strings as a path array (static storage). */
static size_t json_path(const json_t *list, const char **parts)
{
	size_t i, n = json_array_size(list);

	cr_assert(n >= 1 && n <= 8);
	for (i = 0; i < n; i++)
		parts[i] = json_string_value(json_array_get(list, i));
	return n;
}

static void assert_shape(int ndim, const int64_t *shape, const json_t *expected)
{
	size_t i;

	cr_assert_eq((size_t)ndim, json_array_size(expected));
	for (i = 0; i < json_array_size(expected); i++)
		cr_assert_eq(shape[i], json_integer_value(json_array_get(expected, i)), "dim %zu", i);
}

static void assert_bytes(const td_tensor *t, const char *hex)
{
	td_tensor c;
	const unsigned char *p;
	size_t i, n = td_tensor_nbytes(t);

	cr_assert_eq(strlen(hex), 2 * n, "byte count");
	if (n == 0)
		return;
	td_cr_assert_ok(td_tensor_contiguous(&c, t));
	p = td_tensor_data(&c);
	for (i = 0; i < n; i++) {
		unsigned v;

		cr_assert_eq(sscanf(hex + 2 * i, "%2x", &v), 1);
		cr_assert_eq(p[i], v, "byte %zu: %02x, expected %02x", i, p[i], v);
	}
	td_tensor_release(&c);
}

/* Check array `s` from dim `dim` on against nested JSON lists, in C order from element *at. */
static void check_lists(const td_strings *s, int dim, const json_t *want, int64_t *at)
{
	const json_t *w;
	size_t j;

	cr_assert(dim < s->ndim && json_is_array(want), "dim %d", dim);
	cr_assert_eq(s->shape[dim], (int64_t)json_array_size(want), "dim %d", dim);
	json_array_foreach(want, j, w)
	{
		if (dim + 1 < s->ndim)
			check_lists(s, dim + 1, w, at);
		else
			cr_assert_str_eq(td_strings_at(NULL, s, (*at)++), json_string_value(w));
	}
}

static void check_lazy(const td_dict *d, const json_t *node);

/* Whether the item's path goes into one of the lazy stacks listed in `lazy`. */
static bool inside_lazy(const td_item *item, const json_t *lazy)
{
	const json_t *l;
	size_t i, j;

	json_array_foreach(lazy, i, l)
	{
		const char *parts[8];
		size_t n = json_path(json_object_get(l, "path"), parts);

		if (n >= item->depth)
			continue;
		for (j = 0; j < n && !strcmp(parts[j], item->path[j]); j++)
			;
		if (j == n)
			return true;
	}
	return false;
}

/*
 * Check a dict against a "tensordict" node of expected.json: every leaf, no
 * extra; the lazy stacks it holds against their own nodes.
 */
static void check_dict(const td_dict *d, const json_t *node)
{
	const json_t *leaves = json_object_get(node, "leaves"), *l;
	const json_t *dicts = json_object_get(node, "dicts");
	const json_t *lazy = json_object_get(node, "lazy"); /* NULL: none */
	td_dict_iter *it;
	td_item item;
	size_t i, nleaves = 0;

	cr_assert_str_eq(json_string_value(json_object_get(node, "kind")), "tensordict");
	assert_shape(td_dict_batch_ndim(d), td_dict_batch_shape(d),
		json_object_get(node, "batch_size"));
	json_array_foreach(leaves, i, l)
	{
		const char *parts[8], *kind = json_string_value(json_object_get(l, "kind"));
		size_t n = json_path(json_object_get(l, "path"), parts);
		td_key *k = td_test_key(parts, n);
		const td_value *v;

		td_cr_assert_ok(td_dict_get_key(&v, d, k));
		td_key_free(k);
		if (!strcmp(kind, "tensor")) {
			cr_assert_eq(v->kind, TD_VALUE_TENSOR, "%s", parts[n - 1]);
			cr_assert_str_eq(td_dtype_torch_name(v->tensor.dtype),
				json_string_value(json_object_get(l, "dtype")));
			assert_shape(v->tensor.ndim, td_tensor_shape(&v->tensor), json_object_get(l, "shape"));
			assert_bytes(&v->tensor, json_string_value(json_object_get(l, "hex")));
		} else if (!strcmp(kind, "string_list")) {
			/* A list of strings: tensordict stores it as a NonTensorStack. */
			int64_t at = 0;

			cr_assert_eq(v->kind, TD_VALUE_STRINGS, "%s", parts[n - 1]);
			check_lists(v->strings, 0, json_object_get(l, "value"), &at);
			cr_assert_eq(at, v->strings->numel);
		} else {
			cr_assert_str_eq(kind, "string");
			cr_assert_eq(v->kind, TD_VALUE_STRING);
			cr_assert_str_eq(v->blob.data, json_string_value(json_object_get(l, "value")));
		}
		nleaves++;
	}
	json_array_foreach(dicts, i, l)
	{
		const char *parts[8];
		size_t n = json_path(json_object_get(l, "path"), parts);
		td_key *k = td_test_key(parts, n);
		const td_value *v;

		td_cr_assert_ok(td_dict_get_key(&v, d, k));
		td_key_free(k);
		cr_assert_eq(v->kind, TD_VALUE_DICT);
		assert_shape(td_dict_batch_ndim(v->dict), td_dict_batch_shape(v->dict),
			json_object_get(l, "batch_size"));
	}
	json_array_foreach(lazy, i, l)
	{
		const char *parts[8];
		size_t n = json_path(json_object_get(l, "path"), parts);
		td_key *k = td_test_key(parts, n);
		const td_value *v;

		td_cr_assert_ok(td_dict_get_key(&v, d, k));
		td_key_free(k);
		cr_assert_eq(v->kind, TD_VALUE_DICT);
		cr_assert(td_dict_is_lazy(v->dict), "%s", parts[n - 1]);
		check_lazy(v->dict, json_object_get(l, "stack"));
	}
	/* Nothing more than expected (the stacks' leaves were counted there). */
	td_cr_assert_ok(
		td_dict_iter_new(&it, d, TD_ITER_NESTED | TD_ITER_LEAVES_ONLY | TD_ITER_KEYS_ONLY));
	i = 0;
	while (td_dict_iter_next(&item, it) == 1)
		i += !inside_lazy(&item, lazy);
	td_dict_iter_free(it);
	cr_assert_eq(i, nleaves, "%zu leaves, expected %zu", i, nleaves);
}

static void check_fixture(const char *name, const td_store_open_opts *opts)
{
	json_t *e = load_expected();
	td_store *st;

	td_cr_assert_ok(td_store_open(&st, fixture_dir(name), opts));
	check_dict(td_store_dict(st), fixture(e, name));
	td_store_close(st);
	json_decref(e);
}

Test(store_tensordict, flat_every_dtype)
{
	check_fixture("flat", NULL);
}

Test(store_tensordict, nested_dicts_and_strings)
{
	check_fixture("nested", NULL);
}

Test(store_tensordict, encoded_keys)
{
	check_fixture("encoded_keys", NULL);
}

Test(store_tensordict, zero_element_leaves)
{
	check_fixture("zero_elem", NULL);
	check_fixture("zero_elem_inner", NULL);
}

Test(store_tensordict, legacy_raw_key_names)
{
	check_fixture("legacy_raw", NULL);
}

static char *slurp(const char *dir, const char *name, size_t *len);

/*
 * Each of files[0..n) (paths below the fixtures' root) as written under the
 * test's directory is byte for byte what tensordict wrote.
 */
static void assert_written_as_tensordict(const char *const *files, size_t n)
{
	size_t k;

	for (k = 0; k < n; k++) {
		size_t la, lb;
		char *a = slurp(fixture_root, files[k], &la), *b = slurp(td_test_tmpdir(), files[k], &lb);

		cr_assert_eq(la, lb, "%s: %zu bytes, tensordict wrote %zu:\n%.*s\n%.*s", files[k], lb, la,
			(int)lb, b, (int)la, a);
		cr_assert_eq(memcmp(a, b, la), 0, "%s differs:\n%.*s\n%.*s", files[k], (int)lb, b, (int)la,
			a);
		free(a);
		free(b);
	}
}

/* Check an opened lazy stack against a "lazy_stack" node of expected.json. */
static void check_lazy(const td_dict *d, const json_t *node)
{
	const json_t *children = json_object_get(node, "children"), *c;
	size_t i;

	cr_assert_str_eq(json_string_value(json_object_get(node, "kind")), "lazy_stack");
	cr_assert(td_dict_is_lazy(d));
	cr_assert_eq(td_lazy_stack_dim(d), json_integer_value(json_object_get(node, "stack_dim")));
	assert_shape(td_dict_batch_ndim(d), td_dict_batch_shape(d),
		json_object_get(node, "batch_size"));
	cr_assert_eq(td_lazy_count(d), json_array_size(children));
	json_array_foreach(children, i, c) check_dict(td_lazy_child(d, i), c);
}

Test(store_tensordict, lazy_stacks_open_with_every_child)
{
	static const char *names[] = { "lazy_stack", "lazy_stack_dense" };
	json_t *e = load_expected();
	size_t k;

	for (k = 0; k < TD_TEST_ARRAY_LEN(names); k++) {
		td_store *st;

		td_cr_assert_ok(td_store_open(&st, fixture_dir(names[k]), NULL));
		check_lazy(td_store_dict(st), fixture(e, names[k]));
		td_store_close(st);
	}
	/* lazy_stack: x is ragged ([2] and [3]), k stacks to [10, -20]. */
	{
		td_store *st, *st2;
		td_tensor t;

		td_cr_assert_ok(td_store_open(&st, fixture_dir("lazy_stack"), NULL));
		td_cr_assert_err(td_lazy_get_tensor(&t, td_store_dict(st), "x"), TD_ETYPE);
		td_cr_assert_ok(td_lazy_get_tensor(&t, td_store_dict(st), "k"));
		cr_assert_eq(td_tensor_shape(&t)[0], 2);
		cr_assert_eq(((const int64_t *)td_tensor_data(&t))[0], 10);
		cr_assert_eq(((const int64_t *)td_tensor_data(&t))[1], -20);
		td_tensor_release(&t);
		td_store_close(st);
		/* tensordict's make_memmap does not apply to lazy stacks; neither do ours. */
		td_cr_assert_ok(td_store_open(&st, fixture_dir("lazy_stack"), NULL));
		td_cr_assert_ok(td_store_memmap(&st2, td_store_dict(st), td_test_path("rw"),
			td_test_memmap(TD_PLACEMENT_DIRECTORY, TD_TEST_NOSYNC)));
		td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_I64, 1, (const int64_t[]){ 2 }));
		td_cr_assert_err(td_store_add_tensor(st2, "k", &t), TD_ENOTSUP);
		td_tensor_release(&t);
		td_cr_assert_err(td_store_remove(st2, "k"), TD_ENOTSUP);
		td_store_close(st2);
		td_store_close(st);
	}
	json_decref(e);
}

Test(store_tensordict, lazy_stacks_are_written_back_as_tensordict_writes_them)
{
	static const char *files[] = {
		"lazy_stack/meta.json",
		"lazy_stack/0/meta.json",
		"lazy_stack/1/meta.json",
		"lazy_stack/0/x.memmap",
		"lazy_stack/1/x.memmap",
		"lazy_stack/1/k.memmap",
		"lazy_stack_dense/meta.json",
		"lazy_stack_dense/0/meta.json",
		"lazy_stack_dense/1/meta.json",
		"lazy_stack_dense/0/only0.memmap",
	};
	static const char *names[] = { "lazy_stack", "lazy_stack_dense" };
	json_t *e = load_expected();
	size_t k;

	for (k = 0; k < TD_TEST_ARRAY_LEN(names); k++) {
		td_store *st, *copy;
		char out[4400];

		td_cr_assert_ok(td_store_open(&st, fixture_dir(names[k]), NULL));
		snprintf(out, sizeof(out), "%s", td_test_path(names[k]));
		td_cr_assert_ok(td_store_memmap(&copy, td_store_dict(st), out, NULL));
		check_lazy(td_store_dict(copy), fixture(e, names[k]));
		td_store_close(copy);
		td_cr_assert_ok(td_store_open(&copy, out, NULL));
		check_lazy(td_store_dict(copy), fixture(e, names[k]));
		td_store_close(copy);
		/* A packed store holds it too. */
		td_cr_assert_ok(td_store_memmap(&copy, td_store_dict(st), td_test_path("p.tds"),
			td_test_memmap(TD_PLACEMENT_PACKED, TD_TEST_EXISTSOK)));
		check_lazy(td_store_dict(copy), fixture(e, names[k]));
		td_store_close(copy);
		td_cr_assert_ok(td_store_open(&copy, td_test_path("p.tds"), NULL));
		check_lazy(td_store_dict(copy), fixture(e, names[k]));
		td_store_close(copy);
		/* Writing a smaller stack where a larger one was would leave a child behind. */
		if (k == 0) {
			td_dict *one;
			td_dict *kid = td_lazy_child(td_store_dict(st), 0);

			td_cr_assert_ok(td_lazy_stack(&one, &kid, 1, 0, 0));
			td_cr_assert_err(td_store_memmap(&copy, one, out,
								 td_test_memmap(TD_PLACEMENT_DIRECTORY, TD_TEST_EXISTSOK)),
				TD_EEXISTS);
			td_dict_free(one);
		}
		td_store_close(st);
	}
	assert_written_as_tensordict(files, TD_TEST_ARRAY_LEN(files));
	json_decref(e);
}

Test(store_tensordict, lazy_stacks_nested_in_dicts_open_with_every_value)
{
	json_t *e = load_expected();
	const json_t *node = fixture(e, "lazy_nested");
	td_tensor t, *list;
	size_t count;
	td_store *st;
	td_dict *d, *z;

	cr_assert_eq(json_array_size(json_object_get(node, "lazy")), 2, "z and sub.w");
	check_fixture("lazy_nested", NULL);
	td_cr_assert_ok(td_store_open(&st, fixture_dir("lazy_nested"), NULL));
	d = td_store_dict(st);
	td_cr_assert_ok(td_dict_get_dict(&z, d, "z"));
	cr_assert(td_dict_is_lazy(z));
	cr_assert_eq(td_dict_parent(z), d);
	/* "z.x" stacks [1, 2, 3] and [0, -2, -4]; "z.n.y" [0, 1] and [7, 8]. */
	td_cr_assert_ok(td_lazy_get_tensor(&t, d, "z.x"));
	cr_assert(t.ndim == 2 && td_tensor_shape(&t)[0] == 2 && td_tensor_shape(&t)[1] == 3);
	cr_assert_eq(((const float *)td_tensor_data(&t))[2], 3.0f);
	cr_assert_eq(((const float *)td_tensor_data(&t))[5], -4.0f);
	td_tensor_release(&t);
	td_cr_assert_ok(td_lazy_get_tensor(&t, d, "z.n.y"));
	cr_assert_eq(((const int64_t *)td_tensor_data(&t))[3], 8);
	td_tensor_release(&t);
	/* "sub.w.r" is ragged ([2] and [4]): a list, not a stacked tensor. */
	td_cr_assert_err(td_lazy_get_tensor(&t, d, "sub.w.r"), TD_ETYPE);
	td_cr_assert_ok(td_lazy_get_list(&list, &count, d, "sub.w.r"));
	cr_assert_eq(count, 2);
	cr_assert_eq(td_tensor_shape(&list[1])[0], 4);
	cr_assert_eq(((const int16_t *)td_tensor_data(&list[1]))[0], -9);
	td_tensor_array_free(list, count);
	td_store_close(st);
	json_decref(e);
}

Test(store_tensordict, lazy_stacks_nested_in_dicts_are_written_as_tensordict_writes_them)
{
	static const char *files[] = {
		"lazy_nested/meta.json",
		"lazy_nested/a.memmap",
		"lazy_nested/z/meta.json",
		"lazy_nested/z/0/meta.json",
		"lazy_nested/z/1/meta.json",
		"lazy_nested/z/0/x.memmap",
		"lazy_nested/z/1/x.memmap",
		"lazy_nested/z/0/n/meta.json",
		"lazy_nested/z/1/n/meta.json",
		"lazy_nested/z/1/n/y.memmap",
		"lazy_nested/sub/meta.json",
		"lazy_nested/sub/v.memmap",
		"lazy_nested/sub/w/meta.json",
		"lazy_nested/sub/w/0/meta.json",
		"lazy_nested/sub/w/1/meta.json",
		"lazy_nested/sub/w/0/r.memmap",
		"lazy_nested/sub/w/1/r.memmap",
	};
	json_t *e = load_expected();
	td_store *st, *copy;
	char out[4400];

	td_cr_assert_ok(td_store_open(&st, fixture_dir("lazy_nested"), NULL));
	snprintf(out, sizeof(out), "%s", td_test_path("lazy_nested"));
	td_cr_assert_ok(td_store_memmap(&copy, td_store_dict(st), out, NULL));
	check_dict(td_store_dict(copy), fixture(e, "lazy_nested"));
	td_store_close(copy);
	td_cr_assert_ok(td_store_open(&copy, out, td_test_rw()));
	check_dict(td_store_dict(copy), fixture(e, "lazy_nested"));
	/* Schema changes do not apply to stores holding lazy stacks. */
	td_cr_assert_err(td_store_remove(copy, "a"), TD_ENOTSUP);
	td_cr_assert_err(td_store_grow(copy, 4), TD_ENOTSUP);
	td_store_close(copy);
	/* A packed store holds them too, with the same schema changes refused. */
	td_cr_assert_ok(td_store_memmap(&copy, td_store_dict(st), td_test_path("p.tds"),
		td_test_memmap(TD_PLACEMENT_PACKED, 0)));
	td_store_close(copy);
	td_cr_assert_ok(td_store_open(&copy, td_test_path("p.tds"), td_test_rw()));
	check_dict(td_store_dict(copy), fixture(e, "lazy_nested"));
	td_cr_assert_err(td_store_remove(copy, "a"), TD_ENOTSUP);
	td_cr_assert_err(td_store_grow(copy, 4), TD_ENOTSUP);
	td_store_close(copy);
	td_store_close(st);
	assert_written_as_tensordict(files, TD_TEST_ARRAY_LEN(files));
	json_decref(e);
}

Test(store_tensordict, strings_and_non_tensor_stacks)
{
	check_fixture("strings", NULL);
	check_fixture("strings_nd", NULL);
}

/* The whole file `name` under `dir` (heap; *len receives its size). */
static char *slurp(const char *dir, const char *name, size_t *len)
{
	char path[8400];
	FILE *f;
	char *buf;
	long n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "rb");
	cr_assert_not_null(f, "cannot open %s", path);
	cr_assert_eq(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	cr_assert_not_null(buf);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

Test(store_tensordict, written_back_files_match_tensordicts_byte_for_byte)
{
	static const char *names[] = { "flat", "nested", "encoded_keys", "zero_elem_inner", "strings",
		"strings_nd" };
	json_t *e = load_expected();
	size_t k;

	for (k = 0; k < TD_TEST_ARRAY_LEN(names); k++) {
		const json_t *leaves = json_object_get(fixture(e, names[k]), "leaves"), *l;
		char out[4400], src[4400];
		td_store *st, *copy;
		size_t i;

		snprintf(src, sizeof(src), "%s", fixture_dir(names[k]));
		snprintf(out, sizeof(out), "%s", td_test_path(names[k]));
		td_cr_assert_ok(td_store_open(&st, src, NULL));
		td_cr_assert_ok(td_store_memmap(&copy, td_store_dict(st), out,
			td_test_memmap(TD_PLACEMENT_DIRECTORY, TD_TEST_NOSYNC)));
		td_store_close(copy);
		td_cr_assert_ok(td_store_open(&copy, out, NULL));
		cr_assert_eq(td_dict_equal(td_store_dict(copy), td_store_dict(st)), 1);
		check_dict(td_store_dict(copy), fixture(e, names[k]));
		json_array_foreach(leaves, i, l)
		{
			const char *disk = json_string_value(json_object_get(l, "disk_path"));
			const json_t *nb = json_object_get(l, "nbytes");
			struct stat sb;
			char path[8400];

			snprintf(path, sizeof(path), "%s/%s", out, disk);
			if (strcmp(json_string_value(json_object_get(l, "kind")), "tensor") != 0)
				continue;
			if (json_integer_value(nb) == 0) {
				/* No file for a leaf without elements, as tensordict writes. */
				cr_assert_neq(stat(path, &sb), 0, "%s exists", path);
				continue;
			} else {
				size_t la, lb;
				char *a = slurp(src, disk, &la), *b = slurp(out, disk, &lb);

				cr_assert_eq(la, lb, "%s: size", disk);
				cr_assert_eq(memcmp(a, b, la), 0, "%s: bytes differ", disk);
				free(a);
				free(b);
			}
		}
		td_store_close(copy);
		td_store_close(st);
	}
	json_decref(e);
}

Test(store_tensordict, written_back_meta_json_matches_tensordicts_byte_for_byte)
{
	static const char *files[] = {
		"flat/meta.json",
		"nested/meta.json",
		"nested/sub/meta.json",
		"nested/sub/deeper/meta.json",
		"nested/name/meta.json",
		"encoded_keys/meta.json",
		"encoded_keys/sub%2Fdir/meta.json",
		"zero_elem/meta.json",
		"strings/meta.json",
		"strings/s/meta.json",
		"strings/lst/meta.json",
		"strings/utf8/meta.json",
		"strings_nd/meta.json",
		"strings_nd/pairs/meta.json",
		"strings_nd/sub/meta.json",
		"strings_nd/sub/grid/meta.json",
	};
	static const char *names[] = { "flat", "nested", "encoded_keys", "zero_elem", "strings",
		"strings_nd" };
	char out[4400];
	size_t k;

	json_decref(load_expected());
	for (k = 0; k < TD_TEST_ARRAY_LEN(names); k++) {
		td_store *st, *copy;

		td_cr_assert_ok(td_store_open(&st, fixture_dir(names[k]), NULL));
		snprintf(out, sizeof(out), "%s", td_test_path(names[k]));
		td_cr_assert_ok(td_store_memmap(&copy, td_store_dict(st), out,
			td_test_memmap(TD_PLACEMENT_DIRECTORY, TD_TEST_NOSYNC)));
		td_store_close(copy);
		td_store_close(st);
	}
	assert_written_as_tensordict(files, TD_TEST_ARRAY_LEN(files));
}
