# SPDX-License-Identifier: MIT
# Public headers.
include_HEADERS += \
	%D%/tdstore.h

pkginclude_HEADERS += \
	%D%/tdstore/common.h \
	%D%/tdstore/error.h \
	%D%/tdstore/alloc.h \
	%D%/tdstore/dtype.h \
	%D%/tdstore/buffer.h \
	%D%/tdstore/tensor.h \
	%D%/tdstore/dict.h \
	%D%/tdstore/lazy.h \
	%D%/tdstore/store.h \
	%D%/tdstore/mmap.h \
	%D%/tdstore/ring.h

nodist_pkginclude_HEADERS += \
	%D%/tdstore/version.h

EXTRA_DIST += \
	%D%/tdstore/version.h.in
