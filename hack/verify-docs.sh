#!/usr/bin/env bash
# verify-docs.sh fails when README.md's generated flags tables no longer match the cobra
# commands (fix: make docs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
go run ./hack/gendocs -check README.md
echo "verify-docs: README.md flags tables are current"
