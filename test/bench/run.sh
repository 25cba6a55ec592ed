#!/usr/bin/env bash
# run.sh is `make bench`: the benchmarks of test/bench against the local cluster, which it brings
# up when it is not running (and leaves up). With KUBECONFIG and LIVESYNC_BENCH_REGISTRY set it
# uses that cluster and registry instead; there the probe-timed figures (save→visible, tar -x
# baselines, bursts) compare the node's clock with this machine's, so they hold only on the local
# single-node cluster. Arguments go to the benchmark program (e.g. -only
# latency,fanout -edits 100); the table goes to stdout, progress to stderr, the rows as JSON to
# _output/bench.json and as Markdown to _output/bench.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
lc=hack/localcluster
bin="$($lc/build.sh)"
if [[ -n "${KUBECONFIG:-}" && -n "${LIVESYNC_BENCH_REGISTRY:-}" ]]; then
  registry="$LIVESYNC_BENCH_REGISTRY"
  echo "bench: on another cluster, save→visible and the other probe-timed figures include the skew between the node's clock and this machine's" >&2
else
  # shellcheck source=hack/localcluster/lib.sh
  source $lc/lib.sh
  KUBECONFIG="$($lc/up.sh | tail -n 1)"
  registry="$LC_REGISTRY"
fi
export KUBECONFIG
exec go run -tags bench ./test/bench -kubeconfig "$KUBECONFIG" -registry "$registry" \
  -kubectl "$bin/kubectl" -lcimage "$bin/lcimage" -binary bin/kubectl-livesync "$@"
