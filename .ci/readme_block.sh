#!/usr/bin/env bash
# readme_block.sh README FILE...: each FILE must be, verbatim, the fenced block that follows the
# line `<!-- file: FILE -->` in README (FILE relative to the repository's root). Used by the CI
# jobs that then build or run FILE, so the README shows exactly what CI ran.
set -euo pipefail
readme=$1
shift
status=0
for file in "$@"; do
    if ! grep -Fxq -- "<!-- file: $file -->" "$readme"; then
        echo "FAIL: $readme has no '<!-- file: $file -->' block" >&2
        status=1
        continue
    fi
    if ! diff <(awk -v m="<!-- file: $file -->" '$0 == m { f = 1; next } f == 1 && /^```/ { f = 2; next }
                f == 2 && /^```/ { exit } f == 2' "$readme") "$file"; then
        echo "FAIL: the block after '<!-- file: $file -->' in $readme is not $file (diff above)" >&2
        status=1
        continue
    fi
    echo "$readme shows $file verbatim"
done
exit "$status"
