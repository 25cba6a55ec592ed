#!/usr/bin/env bash
# verify-docs.sh fails when docs/reference.md's generated section (every command's synopsis, docs
# page and flags) no longer matches the cobra commands (fix: make docs), or when a relative link
# or #anchor in the repository's Markdown (README.md, docs/*.md, …) does not resolve.
# It also fails when an error:/warning: line quoted in the Markdown's code blocks is no longer
# printed by the code (hack/docmsgs: the line must be made of pkg/'s string literals).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
go run ./hack/gendocs -check docs/reference.md
echo "verify-docs: docs/reference.md is current"
mapfile -t pages < <(git ls-files --cached --others --exclude-standard -- '*.md' | sort -u)
go run ./hack/mdlinks "${pages[@]}"
# Every error:/warning: line quoted in a code block is one the code prints (hack/docmsgs). Its own
# tests first: a stale sample (a word changed, a clause added) must still fail, a true one pass.
go test -count=1 ./hack/docmsgs
go run ./hack/docmsgs -src pkg "${pages[@]}"
