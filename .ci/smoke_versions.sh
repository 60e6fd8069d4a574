#!/usr/bin/env bash
# The smoke job of the torch versions README claims (section "Versions"): for the oldest and the newest torch, a fresh
# virtual environment with that torch (PyPI's build, CUDA libraries included), the newest transformers and msprobe
# from this checkout, then .ci/smoke_versions.py in it (a transformers model dumped twice, compared, run_ut).
#   .ci/smoke_versions.sh prepare   build the environments (network, disk and about one core); .ci/run starts this
#                                   in the background before the main suite, which leaves a core idle
#   .ci/smoke_versions.sh run       wait for prepare, run the smoke test in each environment, remove them
#   .ci/smoke_versions.sh           both, one after the other
# MSPROBE_SMOKE_TORCH="2.6.0 2.15.0" chooses the versions; MSPROBE_SMOKE_DIR the folder (default under /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
versions=${MSPROBE_SMOKE_TORCH:-"2.6.0 2.15.0"}
work=${MSPROBE_SMOKE_DIR:-/tmp/msprobe_smoke_envs}
# a machine's pip configuration may cap torch with a constraints file: these environments install what they name
export PIP_CONSTRAINT=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1

prepare() {
    mkdir -p "$work/src"
    # a copy of the checkout: the main suite builds the C extensions in the checkout at the same time
    git ls-files -z | xargs -0 cp --parents -t "$work/src"
    for version in $versions; do
        local start=$SECONDS env="$work/torch-$version"
        python3 -m venv "$env"
        "$env/bin/python" -m pip install -q --no-compile "torch==$version" "transformers>=5" "$work/src"
        echo "torch $version: environment ready in $((SECONDS - start)) s ($(du -sh "$env" | cut -f1))"
    done
}

run() {
    local waited=0
    while [ ! -f "$work/prepare.status" ]; do  # prepare runs in the background (.ci/run)
        [ "$waited" -lt 3000 ] || { echo "smoke: the environments were not ready after ${waited} s" >&2; return 1; }
        sleep 5
        waited=$((waited + 5))
    done
    cat "$work/prepare.log"
    [ "$(cat "$work/prepare.status")" = 0 ] || { echo "smoke: preparing the environments failed" >&2; return 1; }
    [ "$waited" = 0 ] || echo "smoke: waited ${waited} s for the environments"
    for version in $versions; do
        local start=$SECONDS
        echo "+ smoke test, torch $version"
        (cd "$work" && "$work/torch-$version/bin/python" "$OLDPWD/.ci/smoke_versions.py")
        echo "torch $version: smoke test passed in $((SECONDS - start)) s"
    done
}

case "${1:-all}" in
    prepare)
        rm -rf "$work"
        mkdir -p "$work"
        status=0
        prepare > "$work/prepare.log.tmp" 2>&1 || status=$?
        mv "$work/prepare.log.tmp" "$work/prepare.log"
        echo "$status" > "$work/prepare.status"
        exit "$status" ;;
    run)
        trap 'rm -rf "$work"' EXIT
        run ;;
    all)
        "$0" prepare || { cat "$work/prepare.log"; exit 1; }
        "$0" run ;;
    *)
        echo "usage: $0 [prepare|run]" >&2
        exit 2 ;;
esac
