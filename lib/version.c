/* SPDX-License-Identifier: MIT */
/* version.c - the version of the loaded library. */
#include "td_internal.h"

const char *td_version(int *major, int *minor, int *patch)
{
	if (major)
		*major = TD_VERSION_MAJOR;
	if (minor)
		*minor = TD_VERSION_MINOR;
	if (patch)
		*patch = TD_VERSION_PATCH;
	return TD_VERSION_STRING;
}
