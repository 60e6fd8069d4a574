#!/usr/bin/env bash
# The switch of the optional C kernels (MSPROBE_NATIVE_STATS, msprobe/core/native_switch.py) on the tests that go
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
# the tests of the C modules themselves (they call the kernels directly, or check that they are built): with the
# switch at 0 the kernels are off by design, so these run at 1 only
kernels=(tests/core/test_native_load.py tests/core/test_fast_stats.py)
c_only=(tests/core/dump/test_fingerprint.py::test_the_fingerprint_kernel_is_built
        tests/core/dump/test_fingerprint.py::test_fingerprint_refuses_bad_arguments
        tests/pytorch/online_dispatch/test_online_dispatch_fast_path.py::test_the_kernel_is_built)
# where the Python path does not yet do what the C path does (issue 42: the full suite must pass at 0); each one
# is named on every run until it is fixed and taken off this list
open_at_0=(tests/pytorch/dump/test_pt_dump_xor.py::test_a_view_met_by_several_calls_is_fingerprinted_once_per_step
           tests/pytorch/dump/test_pt_fingerprint_in_place.py::test_strided_views_have_the_statistics_of_their_copies
           tests/pytorch/dump/test_pt_stats_layout.py::test_a_sliced_view_and_its_dense_copy_have_the_same_statistics
           tests/pytorch/dump/test_pt_stats_layout.py::test_a_broadcast_view_has_the_statistics_of_its_copy)

for flag in $flags; do
    start=$SECONDS
    case "$flag" in
        1) args=("${kernels[@]}" "${paths[@]}") ;;
        0) args=("${paths[@]}")
           for test in "${c_only[@]}" "${open_at_0[@]}"; do args+=(--deselect "$test"); done
           echo "native switch 0: ${#open_at_0[@]} tests left out where the Python path still differs:"
           printf '  %s\n' "${open_at_0[@]}" ;;
        *) echo "usage: $0 [0|1]..." >&2; exit 2 ;;
    esac
    echo "+ MSPROBE_NATIVE_STATS=$flag python -m pytest -q -p no:cacheprovider ${args[*]}"
    MSPROBE_NATIVE_STATS=$flag python -m pytest -q -p no:cacheprovider "${args[@]}"
    echo "native switch $flag ($(python -c 'import platform; print(platform.python_version())')): passed in $((SECONDS - start)) s"
done
