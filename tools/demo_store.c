/* SPDX-License-Identifier: MIT */
/*
 * demo_store.c - the storage step of `tdstore demo`: the transitions are
 * saved into a directory store (tensordict's memmap layout), reopened from
 * the files and compared, then a second handle adds and removes a leaf and
 * the first one catches up with td_store_refresh().
 */
#define _GNU_SOURCE
#include "demo.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

int demo_step_store(demo *d)
{
	static const int64_t rows[1] = { DEMO_ROWS };
	char dir[256];
	td_store_open_opts rw = TD_STORE_OPEN_OPTS_INIT;
	td_store *saved = NULL, *reader = NULL, *writer = NULL;
	td_dict *rb = NULL;
	const td_strings *tasks;
	const td_value *v;
	demo_stats s;
	bool changed = false;
	int rc;

	snprintf(dir, sizeof(dir), "%s/tdstore-demo.XXXXXX",
		getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		return demo_fail(d, "mkdtemp %s failed", dir);
	/* The transitions with a task name per row (saved as a NonTensorStack). */
	DEMO_CALL(d, td_dict_copy(&rb, d->rb));
	DEMO_TRY(demo_set_tasks(d, rb));
	DEMO_CALL(d, td_store_memmap(&saved, rb, dir, NULL));
	td_store_close(saved); /* td_store_memmap() synced what it wrote */
	saved = NULL;
	DEMO_CALL(d, td_store_open(&reader, dir, NULL));
	DEMO_TRY(demo_check_equal(d, td_store_dict(reader), rb, 1,
		"the reopened store and the transitions"));
	DEMO_CALL(d, td_dict_get_strings(&tasks, td_store_dict(reader), "info.task"));
	DEMO_CHECK(d,
		tasks->numel == DEMO_ROWS &&
			strcmp(td_strings_at(NULL, tasks, DEMO_ROWS - 1), "task-7") == 0,
		"the reopened array of strings");
	DEMO_CALL(d, td_dict_get(&v, td_store_dict(reader), "obs"));
	DEMO_CHECK(d, td_buffer_memory(v->tensor.buffer) == TD_MEMORY_FILE,
		"obs is a view of its file");
	DEMO_CALL(d, demo_dict_stats(td_store_dict(reader), &s));

	rw.writable = true;
	DEMO_CALL(d, td_store_open(&writer, dir, &rw));
	DEMO_CALL(d, td_store_add_empty(writer, "priority", TD_DTYPE_F32, 1, rows));
	DEMO_CALL(d, td_store_refresh(&changed, reader));
	DEMO_CHECK(d, changed, "the reader sees the writer's new leaf");
	DEMO_CALL(d, td_dict_get(&v, td_store_dict(reader), "priority"));
	DEMO_CALL(d, td_store_remove(writer, "priority"));
	DEMO_CALL(d, td_store_refresh(&changed, reader));
	DEMO_CHECK(d, changed && td_dict_get(&v, td_store_dict(reader), "priority") == TD_ENOTFOUND,
		"the reader sees the removal");
	demo_say(d,
		"saved %zu leaves (%zu bytes; %d task names as a NonTensorStack) in "
		"tensordict's layout, reopened equal; a second process-style handle added and "
		"removed a leaf (generation %llu)",
		s.leaves + s.blobs, s.nbytes, DEMO_ROWS, (unsigned long long)td_store_generation(reader));
out:
	td_dict_free(rb);
	td_store_close(saved);
	td_store_close(reader);
	td_store_close(writer);
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return rc;
}
