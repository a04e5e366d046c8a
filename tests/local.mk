# SPDX-License-Identifier: MIT
# Criterion test programs, one per module.
