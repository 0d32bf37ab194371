#!/usr/bin/env bash
# Checks the Kubernetes manifests as CI does: renders the base and every overlay with `kubectl kustomize` and
# validates each rendered resource against the Kubernetes API's schemas (`kubernetes-validate --strict`: unknown
# fields are errors too).
#
#   deploy/kubernetes/check.sh
#
# Finds kubectl and kubernetes-validate in target/deploy-venv (scripts/test installs them there from
# deploy/requirements.txt), else on PATH. Renders a copy of deploy/kubernetes holding a throwaway
# session key and ledger URL, so the real files (which git ignores) are neither needed nor touched.
set -euo pipefail

# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# The version of the API the manifests must be valid for.
KUBERNETES_VERSION=1.30

KUBECTL="$(tool kubectl)"
VALIDATE="$(tool kubernetes-validate)"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/switchyard-kubernetes.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
cp -r "$ROOT/deploy/kubernetes" "$WORK/"
head -c 32 /dev/urandom >"$WORK/kubernetes/base/session.key"
printf 'url=postgres://switchyard:secret@postgres:5432/switchyard\n' >"$WORK/kubernetes/overlays/postgres/ledger.env"

cd "$WORK/kubernetes"
for dir in base overlays/*; do
    [[ -f "$dir/kustomization.yaml" ]] || fail "deploy/kubernetes/$dir has no kustomization.yaml"
    rendered="$WORK/$(tr / - <<<"$dir").yaml"
    "$KUBECTL" kustomize "$WORK/kubernetes/$dir" >"$rendered" || fail "kubectl kustomize deploy/kubernetes/$dir"
    for kind in ConfigMap Secret Service Deployment PodDisruptionBudget; do
        grep -q "^kind: $kind\$" "$rendered" || fail "deploy/kubernetes/$dir renders no $kind"
    done
    "$VALIDATE" --strict --quiet --kubernetes-version "$KUBERNETES_VERSION" "$rendered" ||
        fail "deploy/kubernetes/$dir does not validate against the Kubernetes $KUBERNETES_VERSION schemas"
    printf 'deploy/kubernetes/%s: %s resources rendered and valid (Kubernetes %s)\n' \
        "$dir" "$(grep -c '^kind: ' "$rendered")" "$KUBERNETES_VERSION"
done
