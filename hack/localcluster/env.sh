#!/usr/bin/env bash
# env.sh prints the shell settings for using the local cluster: eval "$(hack/localcluster/env.sh)"
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
printf 'export KUBECONFIG=%q\n' "$LC_DIR/kubeconfig"
# shellcheck disable=SC2016 # $PATH is for the shell that evaluates this
printf 'export PATH=%q:"$PATH"\n' "$(lc_bin_dir)"
