/* SPDX-License-Identifier: MIT */
/*
 * test_store_journal.c - the redo journal (doc/format.md section 6), forged
 * here from the specification as an independent writer would: a sealed
 * journal left by a crash is read by read-only opens and redone by
 * read-write ones; garbled (unsealed) journals mean the commit never
 * happened and their temporary files are removed; journals that break the
 * rules (paths out of the store, links, bad names, unknown versions) are
 * refused without touching anything.
 */
#include "td_test.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

TestSuite(store_journal, .init = td_test_tmpdir_init, .fini = td_test_tmpdir_fini);

static const int64_t B4[] = { 4 };

/* ---- a journal writer written from doc/format.md ---- */

typedef struct jent {
	const char *path;
	size_t path_len; /* 0: strlen(path) */
	const char *name;
} jent;

typedef struct jopts {
	uint32_t version; /* 0: 1 */
	uint32_t flags;
	int32_t count; /* -1: the number of entries */
	size_t extra;  /* zero bytes appended to the body */
} jopts;

static void put16(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v)
{
	put16(p, v & 0xffff);
	put16(p + 2, v >> 16);
}

static void put64(unsigned char *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

/* Encode a journal into buf; @return its length. */
static size_t encode_journal(unsigned char *buf, const jent *e, size_t n, const jopts *o)
{
	size_t off = 32, i;

	for (i = 0; i < n; i++) {
		size_t plen = e[i].path_len ? e[i].path_len : strlen(e[i].path);
		size_t nlen = strlen(e[i].name);

		put16(buf + off, (uint32_t)plen);
		put16(buf + off + 2, (uint32_t)nlen);
		memcpy(buf + off + 4, e[i].path, plen);
		memcpy(buf + off + 4 + plen, e[i].name, nlen);
		off += 4 + plen + nlen;
	}
	memset(buf + off, 0, o->extra);
	off += o->extra;
	memcpy(buf, "TDSJOURN", 8);
	put32(buf + 8, o->version ? o->version : 1);
	put32(buf + 12, 32);
	put32(buf + 16, o->count < 0 ? (uint32_t)n : (uint32_t)o->count);
	put32(buf + 20, o->flags);
	put64(buf + 24, off - 32);
	put64(buf + off, XXH64(buf, off, 0));
	return off + 8;
}

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	cr_assert(fd >= 0, "open %s", path);
	cr_assert_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static char *read_text(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = calloc(1, 1 << 16);
	size_t n;

	cr_assert_not_null(f, "open %s", path);
	cr_assert_not_null(buf);
	n = fread(buf, 1, (1 << 16) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* A path in a store of the test directory (static buffer, overwritten per call). */
static const char *store_path(const char *store, const char *rel)
{
	static char buf[8200];

	snprintf(buf, sizeof(buf), "%s/%s", td_test_path(store), rel);
	return buf;
}

/*
 * A store of batch [4]: x int32 [4] (0..3) and sub (batch [4]) with y
 * int64 [4, 2] (0..7), closed.
 */
static void make_store(const char *name)
{
	static const int64_t s42[] = { 4, 2 };
	td_dict *d, *sub;
	td_store *st;
	td_tensor t;

	td_cr_assert_ok(td_dict_new(&d, 1, B4));
	td_test_arange(&t, TD_DTYPE_I32, 1, B4);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "x", &t));
	td_cr_assert_ok(td_dict_new(&sub, 1, B4));
	td_test_arange(&t, TD_DTYPE_I64, 2, s42);
	td_cr_assert_ok(td_dict_set_tensor_take(sub, "y", &t));
	td_cr_assert_ok(td_dict_set_dict_take(d, "sub", sub));
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path(name), NULL));
	td_dict_free(d);
	td_store_close(st);
}

/* meta.json of `dir` with every "[4" made "[8": the store grown to 8 rows. */
static void write_grown_meta(const char *store, const char *dir, const char *tmp)
{
	char rel[256], *text, *p;

	snprintf(rel, sizeof(rel), "%s%smeta.json", dir, dir[0] ? "/" : "");
	text = read_text(store_path(store, rel));
	for (p = text; (p = strstr(p, "[4")) != NULL; p++)
		p[1] = '8';
	snprintf(rel, sizeof(rel), "%s%s%s", dir, dir[0] ? "/" : "", tmp);
	write_file(store_path(store, rel), text, strlen(text));
	free(text);
}

/*
 * What a writer killed in the middle of growing the store to 8 rows
 * leaves: leaf files extended, the new meta.json files under temporary
 * names, and the journal listing them: sealed, or torn (checksum broken).
 */
static void forge_growth(const char *store, bool sealed)
{
	static const jent e[] = {
		{ "sub", 0, ".tdstore-tmp.999.1" },
		{ "", 0, ".tdstore-tmp.999.2" },
	};
	static const jopts o = { 0, 0, -1, 0 };
	unsigned char buf[512];
	size_t len;

	cr_assert_eq(truncate(store_path(store, "x.memmap"), 8 * 4), 0);
	cr_assert_eq(truncate(store_path(store, "sub/y.memmap"), 8 * 2 * 8), 0);
	write_grown_meta(store, "sub", ".tdstore-tmp.999.1");
	write_grown_meta(store, "", ".tdstore-tmp.999.2");
	len = encode_journal(buf, e, 2, &o);
	if (!sealed)
		buf[len - 1] ^= 1; /* torn: the checksum does not hold */
	write_file(store_path(store, ".tdstore-journal"), buf, len);
}

/* The store at its old (4 rows) or new (8 rows) state, values checked. */
static void assert_rows(td_store *st, int64_t rows)
{
	const td_dict *d = td_store_dict(st);
	const td_tensor *x, *y;
	const td_value *v;
	int64_t i;

	cr_assert_eq(td_dict_batch_shape(d)[0], rows);
	td_cr_assert_ok(td_dict_get_tensor(&x, d, "x"));
	cr_assert_eq(td_tensor_shape(x)[0], rows);
	for (i = 0; i < rows; i++)
		cr_assert_eq(((const int32_t *)td_tensor_data(x))[i], i < 4 ? i : 0);
	td_cr_assert_ok(td_dict_get(&v, d, "sub"));
	cr_assert_eq(td_dict_batch_shape(v->dict)[0], rows);
	td_cr_assert_ok(td_dict_get_tensor(&y, d, "sub.y"));
	cr_assert_eq(td_tensor_shape(y)[0], rows);
	for (i = 0; i < rows * 2; i++)
		cr_assert_eq(((const int64_t *)td_tensor_data(y))[i], i < 8 ? i : 0);
}

static uint64_t open_generation(const char *store)
{
	td_store *st;
	uint64_t g;

	td_cr_assert_ok(td_store_open(&st, td_test_path(store), NULL));
	g = td_store_generation(st);
	td_store_close(st);
	return g;
}

Test(store_journal, a_sealed_journal_is_read_by_readers_and_redone_by_writers)
{
	td_store *ro = NULL, *rw = NULL, *old = NULL;
	uint64_t g0;
	bool changed;

	make_store("s");
	td_cr_assert_ok(td_store_open(&old, td_test_path("s"), NULL));
	g0 = td_store_generation(old);
	forge_growth("s", true);

	/* A reader that cannot write sees the new state and changes nothing. */
	td_cr_assert_ok(td_store_open(&ro, td_test_path("s"), NULL));
	assert_rows(ro, 8);
	td_store_close(ro);
	cr_assert(td_test_exists(store_path("s", ".tdstore-journal")));
	cr_assert(td_test_exists(store_path("s", ".tdstore-tmp.999.2")));
	cr_assert(td_test_exists(store_path("s", "sub/.tdstore-tmp.999.1")));

	/* A writer redoes the renames, removes the journal, and bumps the generation. */
	td_cr_assert_ok(td_store_open(&rw, td_test_path("s"), td_test_rw()));
	assert_rows(rw, 8);
	cr_assert_not(td_test_exists(store_path("s", ".tdstore-journal")));
	cr_assert_not(td_test_exists(store_path("s", ".tdstore-tmp.999.2")));
	cr_assert_not(td_test_exists(store_path("s", "sub/.tdstore-tmp.999.1")));
	cr_assert_eq(td_store_generation(rw), g0 + 1);
	td_store_close(rw);
	/* A handle loaded before sees it after a refresh. */
	td_cr_assert_ok(td_store_refresh(&changed, old));
	cr_assert(changed);
	assert_rows(old, 8);
	td_store_close(old);
	td_cr_assert_ok(td_store_open(&ro, td_test_path("s"), NULL));
	assert_rows(ro, 8);
	td_store_close(ro);
}

Test(store_journal, a_half_renamed_commit_is_whole_for_tdstore_and_half_without_the_journal)
{
	td_store *ro = NULL, *rw = NULL;
	char moved[8200];

	make_store("h");
	forge_growth("h", true);
	/* The writer died after the first rename. */
	snprintf(moved, sizeof(moved), "%s", store_path("h", "sub/meta.json"));
	cr_assert_eq(rename(store_path("h", "sub/.tdstore-tmp.999.1"), moved), 0);
	td_cr_assert_ok(td_store_open(&ro, td_test_path("h"), NULL));
	assert_rows(ro, 8);
	td_store_close(ro);
	/* Without the journal (as Python tensordict reads it) the parent and child disagree. */
	snprintf(moved, sizeof(moved), "%s", td_test_path("journal.aside"));
	cr_assert_eq(rename(store_path("h", ".tdstore-journal"), moved), 0);
	td_cr_assert_err(td_store_open(&ro, td_test_path("h"), NULL), TD_ECORRUPT);
	cr_assert_eq(rename(moved, store_path("h", ".tdstore-journal")), 0);
	/* A writer finishes the commit. */
	td_cr_assert_ok(td_store_open(&rw, td_test_path("h"), td_test_rw()));
	assert_rows(rw, 8);
	cr_assert_not(td_test_exists(store_path("h", ".tdstore-journal")));
	td_store_close(rw);
}

Test(store_journal, a_schema_change_recovers_the_journal_first)
{
	td_store *rw = NULL;
	td_tensor t;
	int64_t rows[1] = { 8 };

	make_store("c");
	/* Opened before the crash: the journal is found by the next change, not by the open. */
	td_cr_assert_ok(td_store_open(&rw, td_test_path("c"), td_test_rw()));
	forge_growth("c", true);
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_U8, 1, rows));
	td_cr_assert_ok(td_store_add_tensor(rw, "z", &t));
	td_tensor_release(&t);
	assert_rows(rw, 8);
	cr_assert_not(td_test_exists(store_path("c", ".tdstore-journal")));
	td_store_close(rw);
}

Test(store_journal, garbled_journals_mean_the_commit_never_happened)
{
	static const jent e[] = {
		{ "sub", 0, ".tdstore-tmp.999.1" },
		{ "", 0, ".tdstore-tmp.999.2" },
	};
	static const jopts o = { 0, 0, -1, 0 };
	unsigned char good[512], bad[512];
	size_t len = encode_journal(good, e, 2, &o), variant;

	for (variant = 0; variant < 8; variant++) {
		char name[16];
		size_t blen = len;
		td_store *st = NULL;
		uint64_t g0;

		snprintf(name, sizeof(name), "g%zu", variant);
		make_store(name);
		g0 = open_generation(name);
		forge_growth(name, true);
		memcpy(bad, good, len);
		switch (variant) {
		case 0:
			blen = len - 1;
			break; /* the checksum cut short */
		case 1:
			blen = len - 8;
			break; /* no checksum */
		case 2:
			blen = 20;
			break; /* a header cut short */
		case 3:
			blen = 0;
			break; /* created, nothing written */
		case 4:
			bad[40] ^= 0x20;
			break; /* a byte of an entry changed */
		case 5:
			bad[len - 3] ^= 0x01;
			break; /* the checksum changed */
		case 6:
			bad[0] = 'X';
			break; /* the magic */
		default:
			put64(bad + 24, 1000);
			break; /* body_size beyond the file */
		}
		write_file(store_path(name, ".tdstore-journal"), bad, blen);
		/* Readers see the old state; the temporary files are ignored. */
		td_cr_assert_ok(td_store_open(&st, td_test_path(name), NULL));
		assert_rows(st, 4);
		td_store_close(st);
		cr_assert(td_test_exists(store_path(name, ".tdstore-journal")));
		/* The next writer removes the journal and the temporary files, and keeps the old state. */
		td_cr_assert_ok(td_store_open(&st, td_test_path(name), td_test_rw()));
		assert_rows(st, 4);
		cr_assert_eq(td_store_generation(st), g0, "variant %zu", variant);
		cr_assert_not(td_test_exists(store_path(name, ".tdstore-journal")));
		cr_assert_not(td_test_exists(store_path(name, ".tdstore-tmp.999.2")));
		cr_assert_not(td_test_exists(store_path(name, "sub/.tdstore-tmp.999.1")));
		/* Its leaf files stay as long as they were (never truncated). */
		cr_assert_eq(td_test_file_size(store_path(name, "x.memmap")), 32);
		td_store_close(st);
	}
}

/* A sealed journal that breaks the rules: every open fails with `code`, nothing changes. */
static void assert_refused(const char *store, const jent *e, size_t n, const jopts *o, int code)
{
	unsigned char buf[1024];
	size_t len = encode_journal(buf, e, n, o);
	td_store *st = (td_store *)0x1;
	char *before, *after;

	write_file(store_path(store, ".tdstore-journal"), buf, len);
	before = read_text(store_path(store, "meta.json"));
	td_cr_assert_err(td_store_open(&st, td_test_path(store), NULL), code);
	cr_assert_null(st);
	td_cr_assert_err(td_store_open(&st, td_test_path(store), td_test_rw()), code);
	cr_assert_null(st);
	after = read_text(store_path(store, "meta.json"));
	cr_assert_str_eq(before, after);
	cr_assert(td_test_exists(store_path(store, ".tdstore-journal")));
	cr_assert(td_test_exists(store_path(store, ".tdstore-tmp.999.2")));
	free(before);
	free(after);
}

Test(store_journal, journals_that_break_the_rules_are_refused_and_change_nothing)
{
	static const char T[] = ".tdstore-tmp.999.2";
	const jopts plain = { 0, 0, -1, 0 };
	const jopts v2 = { 2, 0, -1, 0 }, flags = { 0, 1, -1, 0 }, zero = { 0, 0, 0, 0 };
	const jopts extra = { 0, 0, -1, 4 }, many = { 0, 0, 3, 0 };
	const jent root = { "", 0, T };

	make_store("b");
	forge_growth("b", true);
	cr_assert_eq(symlink("sub", store_path("b", "link")), 0);
	cr_assert_eq(symlink("meta.json", store_path("b", ".tdstore-tmp.5")), 0);
	cr_assert_eq(mkdir(store_path("b", ".tdstore-tmp.6"), 0755), 0);

	assert_refused("b", (const jent[]){ { "..", 0, T } }, 1, &plain, TD_ECORRUPT);
	assert_refused("b", (const jent[]){ { "sub/..", 0, T } }, 1, &plain, TD_ECORRUPT);
	assert_refused("b", (const jent[]){ { ".", 0, T } }, 1, &plain, TD_ECORRUPT);
	assert_refused("b", (const jent[]){ { "/tmp", 0, T } }, 1, &plain, TD_ECORRUPT);
	assert_refused("b", (const jent[]){ { "sub/", 0, T } }, 1, &plain, TD_ECORRUPT);
	assert_refused("b", (const jent[]){ { "sub//x", 0, T } }, 1, &plain, TD_ECORRUPT);
	assert_refused("b", (const jent[]){ { "s\0b", 3, T } }, 1, &plain, TD_ECORRUPT);
	assert_refused("b", (const jent[]){ { "nosuch", 0, T } }, 1, &plain, TD_ECORRUPT);
	assert_refused("b", (const jent[]){ { "link", 0, T } }, 1, &plain, TD_ECORRUPT);
	assert_refused("b", (const jent[]){ { "x.memmap", 0, T } }, 1, &plain, TD_ECORRUPT);
	assert_refused("b", (const jent[]){ { "", 0, "meta.json" } }, 1, &plain, TD_ECORRUPT);
	assert_refused("b", (const jent[]){ { "", 0, "../meta.json" } }, 1, &plain, TD_ECORRUPT);
	assert_refused("b", (const jent[]){ { "", 0, ".tdstore-tmp." } }, 1, &plain, TD_ECORRUPT);
	assert_refused("b", (const jent[]){ { "", 0, ".tdstore-tmp.1/2" } }, 1, &plain, TD_ECORRUPT);
	assert_refused("b", (const jent[]){ { "", 0, ".tdstore-tmp.5" } }, 1, &plain, TD_ECORRUPT);
	assert_refused("b", (const jent[]){ { "", 0, ".tdstore-tmp.6" } }, 1, &plain, TD_ECORRUPT);
	assert_refused("b", &root, 1, &v2, TD_EVERSION);
	assert_refused("b", &root, 1, &flags, TD_ECORRUPT);
	assert_refused("b", &root, 1, &zero, TD_ECORRUPT);
	assert_refused("b", &root, 1, &extra, TD_ECORRUPT);
	assert_refused("b", &root, 1, &many, TD_ECORRUPT);
	/* A link named like the journal is refused too. */
	cr_assert_eq(unlink(store_path("b", ".tdstore-journal")), 0);
	cr_assert_eq(symlink("meta.json", store_path("b", ".tdstore-journal")), 0);
	{
		td_store *st = (td_store *)0x1;

		td_cr_assert_err(td_store_open(&st, td_test_path("b"), NULL), TD_ECORRUPT);
		td_cr_assert_err(td_store_open(&st, td_test_path("b"), td_test_rw()), TD_ECORRUPT);
	}
}

Test(store_journal, commits_of_several_directories_leave_no_journal_or_temporary_files)
{
	td_store *st;
	td_tensor t;
	td_dict *d;

	/* A save (with and without syncs), an add that creates dicts, a growth. */
	make_store("n");
	td_cr_assert_ok(td_store_open(&st, td_test_path("n"), td_test_rw()));
	td_cr_assert_ok(td_tensor_full(&t, TD_DTYPE_I32, 1, B4, td_scalar_int(5)));
	td_cr_assert_ok(td_store_add_tensor(st, "a.b.c.leaf", &t));
	td_tensor_release(&t);
	td_cr_assert_ok(td_store_grow(st, 6));
	td_store_close(st);
	cr_assert_not(td_test_exists(store_path("n", ".tdstore-journal")));
	td_cr_assert_ok(td_store_open(&st, td_test_path("n"), NULL));
	td_cr_assert_ok(td_dict_copy(&d, td_store_dict(st)));
	td_store_close(st);
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("n2"),
		td_test_memmap(TD_PLACEMENT_DIRECTORY, TD_TEST_NOSYNC)));
	td_store_close(st);
	td_dict_free(d);
	cr_assert_not(td_test_exists(store_path("n2", ".tdstore-journal")));
	{
		const char *dirs[] = { "n", "n/a", "n/a/b", "n/a/b/c", "n/sub", "n2", "n2/a/b/c" };
		size_t i;

		for (i = 0; i < TD_TEST_ARRAY_LEN(dirs); i++) {
			DIR *dir = opendir(td_test_path(dirs[i]));
			struct dirent *de;

			cr_assert_not_null(dir, "%s", dirs[i]);
			while ((de = readdir(dir)) != NULL)
				cr_assert_null(strstr(de->d_name, "tdstore-tmp"), "%s/%s left behind", dirs[i],
					de->d_name);
			closedir(dir);
		}
	}
	td_cr_assert_ok(td_store_open(&st, td_test_path("n2"), NULL));
	{
		const td_tensor *lt;

		td_cr_assert_ok(td_dict_get_tensor(&lt, td_store_dict(st), "a.b.c.leaf"));
		cr_assert_eq(td_tensor_shape(lt)[0], 6);
		cr_assert_eq(((const int32_t *)td_tensor_data(lt))[3], 5);
		cr_assert_eq(((const int32_t *)td_tensor_data(lt))[5], 0);
	}
	td_store_close(st);
}

Test(store_journal, the_example_of_the_spec_is_what_the_spec_encodes)
{
	static const jent root = { "", 0, ".tdstore-tmp.1.2" };
	static const jopts o = { 0, 0, -1, 0 };
	const char *src = getenv("TD_SRCDIR");
	unsigned char mine[128], theirs[128];
	char path[4200];
	size_t len = encode_journal(mine, &root, 1, &o), n;
	FILE *f;

	if (!src || !*src)
		cr_skip_test("TD_SRCDIR is not set (run through make check)");
	/* doc/format.md 6.7 shows these bytes, and the fuzz corpus holds them. */
	snprintf(path, sizeof(path), "%s/tests/fuzz/corpus/store_journal/sealed_root_only", src);
	f = fopen(path, "rb");
	cr_assert_not_null(f, "%s", path);
	n = fread(theirs, 1, sizeof(theirs), f);
	fclose(f);
	cr_assert_eq(n, 60);
	cr_assert_eq(len, 60);
	cr_assert_arr_eq(mine, theirs, 60);
	cr_assert_eq(XXH64(mine, 52, 0), 0xe73ac22406dd0660ull);
}
