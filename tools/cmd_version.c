/* SPDX-License-Identifier: MIT */
/*
 * cmd_version.c - `tdstore version`: the version of the libtdstore actually
 * loaded, and the headers' version when the two differ.
 */
#include <stdio.h>
#include <string.h>

#include <tdstore.h>

#include "cmd.h"

int cmd_version(int argc, char **argv)
{
	const char *lib;

	if (argc != 1)
		return tool_usage_error(tool_find_cmd("version"));
	lib = td_version(NULL, NULL, NULL);
	printf("tdstore %s\n", lib);
	if (strcmp(lib, TD_VERSION_STRING) != 0)
		printf("(built with the headers of tdstore %s)\n", TD_VERSION_STRING);
	return TOOL_EXIT_OK;
}
