#!/usr/bin/env bash
# verify-docs.sh fails when docs/reference.md's generated section (every command's synopsis, docs
# page and flags) no longer matches the cobra commands (fix: make docs), or when a relative link
# or #anchor in the repository's Markdown (README.md, docs/*.md, …) does not resolve.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
go run ./hack/gendocs -check docs/reference.md
echo "verify-docs: docs/reference.md is current"
mapfile -t pages < <(git ls-files --cached --others --exclude-standard -- '*.md' | sort -u)
go run ./hack/mdlinks "${pages[@]}"
