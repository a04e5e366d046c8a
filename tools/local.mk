# SPDX-License-Identifier: MIT
# The tdstore command.
