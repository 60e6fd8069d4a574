#!/usr/bin/env bash
# The switch of the optional C kernels (MSPROBE_NATIVE_STATS, msprobe._native.enabled()) on the tests that go
# through them: the kernels' own tests, and the dump, compare and gradient-summary tests whose outputs must not depend
# on which path (C or Python) computed them. Runs the active environment's python in this checkout, whose extensions
# must be built (`pip install -e .` or `python setup.py build_ext --inplace` with that python).
#   .ci/native_switch.sh [FLAG...]   one pytest run per FLAG, in order (default: 0 1)
# MSPROBE_SWITCH_PYTORCH_ONLY=1 leaves the MindSpore tests out, for a Python that MindSpore has no build for (3.13).
# .ci/run runs it with 0 after the main suite, which is the run with 1 (the default) on the same interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
flags=${*:-0 1}

# the tests that run the C paths when the switch is 1 and the Python paths when it is 0
paths=(tests/core/dump tests/core/compare tests/core/test_dump_writer.py tests/pytorch/dump
       tests/pytorch/online_dispatch/test_online_dispatch_fast_path.py tests/pytorch/monitor/test_grad_probe.py
       tests/mindspore/test_ms_dump_xor.py tests/mindspore/test_ms_bit_identity.py)
if [ "${MSPROBE_SWITCH_PYTORCH_ONLY:-0}" = 1 ]; then
    echo "native switch: MSPROBE_SWITCH_PYTORCH_ONLY=1, the MindSpore tests are left out"
    kept=()
    for path in "${paths[@]}"; do [[ "$path" == tests/mindspore/* ]] || kept+=("$path"); done
    paths=("${kept[@]}")
fi
# the tests of the C modules themselves: they import the built kernels directly (the switch says whether msprobe uses
# them, not whether they exist), so they run at 0 as at 1, beside the paths that use them or not
kernels=(tests/core/test_native_load.py tests/core/test_fast_stats.py)

for flag in $flags; do
    start=$SECONDS
    case "$flag" in
        0|1) args=("${kernels[@]}" "${paths[@]}") ;;
        *) echo "usage: $0 [0|1]..." >&2; exit 2 ;;
    esac
    echo "+ MSPROBE_NATIVE_STATS=$flag python -m pytest -q -p no:cacheprovider ${args[*]}"
    MSPROBE_NATIVE_STATS=$flag python -m pytest -q -p no:cacheprovider "${args[@]}"
    echo "native switch $flag ($(python -c 'import platform; print(platform.python_version())')): passed in $((SECONDS - start)) s"
done
