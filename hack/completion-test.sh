#!/usr/bin/env bash
# completion-test.sh drives bash completion as an interactive shell does: it sources
# bash-completion and the scripts of `kubectl completion bash` and `kubectl-livesync completion
# bash`, sets COMP_WORDS/COMP_CWORD/COMP_LINE/COMP_POINT and calls the function each script
# registered with `complete -F`. So "kubectl livesync <TAB>" goes kubectl -> plugin discovery ->
# kubectl_complete-livesync -> kubectl-livesync __complete, exactly as for a user.
#
# Needs on PATH: kubectl, kubectl-livesync and kubectl_complete-livesync; and Debian's
# bash-completion. The cluster is not needed: the kubeconfig points at a closed port, so the
# cases are those that come from the command tree and the kubeconfig (cluster-backed ones are
# covered by pkg/cmd's tests against a fake API).
set -euo pipefail
export LC_ALL=C
bc=/usr/share/bash-completion/bash_completion
if [[ ! -f $bc ]]; then
  echo "completion-test: $bc missing: apt-get install bash-completion (hack/deps.sh does)" >&2
  exit 1
fi
for exe in kubectl kubectl-livesync kubectl_complete-livesync; do
  command -v "$exe" >/dev/null || { echo "completion-test: $exe is not on PATH" >&2; exit 1; }
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/kubeconfig" <<'YAML'
apiVersion: v1
kind: Config
clusters:
- {name: dev, cluster: {server: "https://127.0.0.1:1"}}
- {name: prod, cluster: {server: "https://127.0.0.1:1"}}
users:
- {name: alice, user: {token: x}}
contexts:
- {name: dev, context: {cluster: dev, user: alice}}
- {name: prod, context: {cluster: prod, user: alice}}
current-context: dev
YAML
export KUBECONFIG="$tmp/kubeconfig"
kubectl completion bash >"$tmp/kubectl.bash"
kubectl-livesync completion bash >"$tmp/livesync.bash"

# Each case: "want<TAB>words..." where want is the exact space-separated COMPREPLY (sorted), or
# "~word" for "contains word". The last word is the one being completed ('' = empty).
cases=(
  "~completion ~inspect ~pull-policy ~refresh ~restore ~version ~deployment/ ~statefulset/	kubectl livesync ''"
  "inspect	kubectl livesync ins"
  "deployment/	kubectl livesync inspect dep"
  "Always IfNotPresent Never	kubectl livesync pull-policy deploy/web ''"
  "IfNotPresent	kubectl livesync pull-policy deploy/web If"
  "dev prod	kubectl livesync --context ''"
  "prod	kubectl livesync inspect --cluster p"
  "bash fish powershell zsh	kubectl livesync completion ''"
  "json table yaml	kubectl livesync inspect -o ''"
  "--selector	kubectl livesync inspect --sel"
  "--watch	kubectl livesync refresh deploy/web --wat"
  "version	kubectl-livesync vers"
  "~--dry-run ~--no-wait	kubectl-livesync restore deploy/web --"
  "dev prod	kubectl-livesync inspect --context ''"
)

fail=0
for c in "${cases[@]}"; do
  want="${c%%	*}" words="${c#*	}"
  cmd="${words%% *}"
  script="$tmp/livesync.bash"
  [[ "$cmd" == kubectl ]] && script="$tmp/kubectl.bash"
  got="$(bash --norc --noprofile -c '
    source "$1" && source "$2" || exit 1
    eval "COMP_WORDS=($3)"
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMP_LINE="${COMP_WORDS[*]}" COMP_POINT=${#COMP_LINE} COMP_TYPE=9
    fn="$(complete -p "${COMP_WORDS[0]}" | sed -E "s/.* -F ([^ ]+) .*/\1/")"
    COMPREPLY=()
    # compopt only works inside a real completion; the options it would set are not checked here.
    compopt() { :; }
    "$fn" "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" 2>/dev/null
    # With several candidates cobra appends "  (description)": keep the word.
    printf "%s\n" "${COMPREPLY[@]}" | sed -E "s/[[:space:]]+\(.*$//; s/[[:space:]]*$//" | sort | tr "\n" " "
  ' _ "$bc" "$script" "$words")"
  got="${got% }"
  ok=1
  if [[ "$want" == "~"* ]]; then
    for w in $want; do
      [[ " $got " == *" ${w#\~} "* ]] || ok=0
    done
  else
    [[ "$got" == "$want" ]] || ok=0
  fi
  if ((ok)); then
    echo "completion-test: ok   $words -> $got"
  else
    echo "completion-test: FAIL $words -> '$got', want '$want'" >&2
    fail=1
  fi
done
exit $fail
