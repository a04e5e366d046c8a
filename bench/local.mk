# SPDX-License-Identifier: MIT
# Benchmarks, built and run by `make bench`, never by `make check`.
