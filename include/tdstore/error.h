/* SPDX-License-Identifier: MIT */
/*
 * tdstore/error.h - status codes and the thread-local last error.
 *
 * Every fallible tdstore call returns an int: TD_OK (0) on success or one of
 * the negative codes below. A function that documents a positive return uses
 * it for "success with information" (a count, a boolean answer). When a call
 * fails it also records, for the calling thread, a message saying what
 * failed and where; td_error_last() returns it.
 *
 * The library never prints, exits or aborts because of bad input.
 */
#ifndef TDSTORE_ERROR_H
#define TDSTORE_ERROR_H

#include "common.h"

TD_BEGIN_DECLS

/**
 * The single list of status codes: X(name, value, description).
 * The enum, td_strerror() and the tests are all generated from it, so they
 * cannot drift apart. Codes are stable: a value is never reused.
 */
#define TD_ERROR_LIST(X) \
	X(TD_OK, 0, "success") \
	X(TD_ERROR, -1, "unspecified error") \
	X(TD_ENOTFOUND, -2, "not found") \
	X(TD_EEXISTS, -3, "already exists") \
	X(TD_EINVAL, -4, "invalid argument") \
	X(TD_ENOMEM, -5, "out of memory") \
	X(TD_EIO, -6, "input/output error") \
	X(TD_ECORRUPT, -7, "corrupt data") \
	X(TD_EVERSION, -8, "unsupported format version") \
	X(TD_ETYPE, -9, "dtype or shape mismatch") \
	X(TD_EBUSY, -10, "resource busy") \
	X(TD_EREADONLY, -11, "read-only") \
	X(TD_ENOTSUP, -12, "operation not supported") \
	X(TD_EPANIC, -13, "handle poisoned by an earlier failure") \
	X(TD_ELOCKED, -14, "dict is locked") \
	X(TD_EINDEX, -15, "index out of range") \
	X(TD_EOVERFLOW, -16, "size overflow") \
	X(TD_ENOSPC, -17, "no space left on device")

/** Status codes returned by every fallible call. */
typedef enum td_status {
#define TD__ERROR_ENUM(name, value, text) name = value,
	TD_ERROR_LIST(TD__ERROR_ENUM)
#undef TD__ERROR_ENUM
		TD__ERROR_LAST = -17
} td_status;

/** The last error recorded on the calling thread. */
typedef struct td_error {
	/** The status code of the failure, TD_OK when nothing failed yet. */
	int code;
	/** The operating-system errno behind the failure, or 0. */
	int sys_errno;
	/** What failed and where, e.g. "key 'obs' not found". Never NULL. */
	const char *message;
} td_error;

/**
 * A short static description of a status code.
 *
 * @param code  a td_status value (any int is accepted)
 * @return a static string, "unknown error" for codes tdstore does not
 *         define; never NULL
 */
TD_API const char *td_strerror(int code);

/**
 * The last error recorded on the calling thread.
 *
 * A failing call sets it; a successful call leaves it unchanged, so check
 * the return code first and look here only after a failure.
 *
 * @return a pointer to thread-local storage; never NULL. Borrowed: the
 *         message is valid until the thread's next tdstore call.
 */
TD_API const td_error *td_error_last(void);

/** Reset the calling thread's last error to TD_OK / "no error". */
TD_API void td_error_clear(void);

TD_END_DECLS

#endif /* TDSTORE_ERROR_H */
