/* SPDX-License-Identifier: MIT */
/*
 * tdstore.h - the umbrella header of libtdstore: tensordicts (nested dicts
 * of named n-d arrays sharing leading batch dims) in memory and in
 * memory-mapped stores. Programs include only this file.
 */
#ifndef TDSTORE_H
#define TDSTORE_H

#include "tdstore/common.h"
#include "tdstore/version.h"
#include "tdstore/error.h"
#include "tdstore/alloc.h"
#include "tdstore/dtype.h"
#include "tdstore/buffer.h"
#include "tdstore/tensor.h"
#include "tdstore/dict.h"
#include "tdstore/lazy.h"
#include "tdstore/store.h"
#include "tdstore/mmap.h"
#include "tdstore/ring.h"

#endif /* TDSTORE_H */
