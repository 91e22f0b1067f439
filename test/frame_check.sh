#!/usr/bin/env bash
#
# test/frame_check.sh: the C code runs its SQL only through the frame
# (src/frame/sqlcall.c): no other file connects SPI, prepares, executes or keeps a
# plan of its own.  Reading the result the frame produced (SPI_tuptable,
# SPI_getbinval) is allowed.  Exit 1, naming the lines, otherwise.
#
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

if found=$(grep -nE '\bSPI_(connect|finish|execute[a-z_]*|prepare[a-z_]*|keepplan|saveplan|freeplan|cursor_[a-z_]+|plan_[a-z_]+)\b' \
	$(find "$top/src" -name '*.c' | LC_ALL=C sort) | grep -v "^$top/src/frame/sqlcall.c:"); then
	echo "SQL run outside the frame (src/frame/sqlcall.c):"
	sed "s|^$top/||" <<<"$found"
	exit 1
fi
echo "every statement of the C code runs through src/frame/sqlcall.c"
