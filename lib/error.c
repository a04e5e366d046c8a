/* SPDX-License-Identifier: MIT */
/*
 * error.c - status code names and the thread-local last error.
 * Messages are formatted into a per-thread buffer, so reporting an error
 * never allocates and never fails.
 */
#include "td_internal.h"

#include <errno.h>
#include <stdio.h>

#define TD_ERROR_MESSAGE_MAX 512

typedef struct td_error_state {
	td_error pub;
	char message[TD_ERROR_MESSAGE_MAX];
} td_error_state;

static _Thread_local td_error_state tls_error = { { TD_OK, 0, "no error" }, { 0 } };

const char *td_strerror(int code)
{
	switch (code) {
#define TD__ERROR_CASE(name, value, text) \
	case value: \
		return text;
		TD_ERROR_LIST(TD__ERROR_CASE)
#undef TD__ERROR_CASE
	default:
		return "unknown error";
	}
}

const td_error *td_error_last(void)
{
	return &tls_error.pub;
}

void td_error_clear(void)
{
	tls_error.pub.code = TD_OK;
	tls_error.pub.sys_errno = 0;
	tls_error.pub.message = "no error";
}

static int error_vset(int code, int sys_errno, const char *fmt, va_list ap) TD_PRINTF(3, 0);

/*
 * The message is formatted into a local buffer, then copied: the arguments
 * may include the previous message (td_error_last()->message), as a caller
 * that adds context to an error does.
 */
static int error_vset(int code, int sys_errno, const char *fmt, va_list ap)
{
	char buf[sizeof(tls_error.message)];
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);

	if (n < 0)
		snprintf(buf, sizeof(buf), "%s", td_strerror(code));
	else if (sys_errno != 0 && (size_t)n < sizeof(buf)) {
		char sysbuf[128];
		const char *s = strerror_r(sys_errno, sysbuf, sizeof(sysbuf));
		snprintf(buf + n, sizeof(buf) - (size_t)n, ": %s", s);
	}
	memcpy(tls_error.message, buf, sizeof(buf));
	tls_error.pub.code = code;
	tls_error.pub.sys_errno = sys_errno;
	tls_error.pub.message = tls_error.message;
	return code;
}

int td__error(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	error_vset(code, 0, fmt, ap);
	va_end(ap);
	return code;
}

int td__error_os(int code, int sys_errno, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	error_vset(code, sys_errno, fmt, ap);
	va_end(ap);
	return code;
}

int td__status_from_errno(int err)
{
	switch (err) {
	case ENOMEM:
		return TD_ENOMEM;
	case ENOENT:
		return TD_ENOTFOUND;
	case EEXIST:
		return TD_EEXISTS;
	case EINVAL:
		return TD_EINVAL;
	case ENOSPC:
	case EDQUOT:
		return TD_ENOSPC;
	case EROFS:
	case EACCES:
	case EPERM:
		return TD_EREADONLY;
	case EBUSY:
	case EAGAIN:
		return TD_EBUSY;
	case ENOSYS:
	case EOPNOTSUPP:
		return TD_ENOTSUP;
	case EOVERFLOW:
	case EFBIG:
		return TD_EOVERFLOW;
	default:
		return TD_EIO;
	}
}

char *td__format_shape(char *buf, size_t len, int ndim, const int64_t *shape)
{
	size_t pos = 0;
	int i;

	if (len == 0)
		return buf;
	buf[0] = '\0';
	pos += (size_t)snprintf(buf, len, "[");
	for (i = 0; i < ndim && pos < len; i++)
		pos += (size_t)snprintf(buf + pos, len - pos, "%s%lld", i ? ", " : "", (long long)shape[i]);
	if (pos < len)
		snprintf(buf + pos, len - pos, "]");
	return buf;
}
