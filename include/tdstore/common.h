/* SPDX-License-Identifier: MIT */
/*
 * tdstore/common.h - export macro, limits and basic types shared by every
 * public header. Included by <tdstore.h>; never include it on its own.
 */
#ifndef TDSTORE_COMMON_H
#define TDSTORE_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Marks a symbol exported from libtdstore (built with -fvisibility=hidden). */
#if defined(__GNUC__) && __GNUC__ >= 4
#define TD_API __attribute__((visibility("default")))
#else
#define TD_API
#endif

#ifdef __cplusplus
#define TD_BEGIN_DECLS extern "C" {
#define TD_END_DECLS }
#else
#define TD_BEGIN_DECLS
#define TD_END_DECLS
#endif

/**
 * Most dimensions a tensor (and therefore a batch shape) may have.
 * Shapes with more dimensions are refused with TD_EINVAL.
 */
#define TD_MAX_DIMS 16

#endif /* TDSTORE_COMMON_H */
