# SPDX-License-Identifier: MIT
# Documentation: man pages and the format specification.
