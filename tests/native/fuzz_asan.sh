#!/usr/bin/env bash
# Differential fuzz of the compiled kernel built with AddressSanitizer + UBSan.
#
#   tests/native/fuzz_asan.sh [SECONDS]        (default 120)
#
# Builds lazyconv.records._ckernel with -fsanitize=address,undefined into a temporary copy of
# the package (the worktree's own build is untouched), then runs bench/fuzz_kernel.py (copied
# beside it) for SECONDS with libasan preloaded into the Python process. Any sanitizer report aborts the
# process (non-zero exit); any difference from the pure-Python path exits 1.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-120}
python=${PYTHON:-.venv/bin/python}
python="$(cd "$(dirname "$python")" && pwd)/$(basename "$python")"  # absolute, symlink kept (venv)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/lib"
# the fuzzer beside the copy: the script puts its parent's parent ($work/lib) first on sys.path
tar --exclude='*.so' --exclude='__pycache__' -cf - lazyconv bench/fuzz_kernel.py | tar -xf - -C "$work/lib"
LAZYCONV_SANITIZE=1 "$python" setup.py -q build_ext --build-lib "$work/lib" --build-temp "$work/build" \
  > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 2; }
so=$(ls "$work"/lib/lazyconv/records/_ckernel*.so) || { echo "sanitized build failed"; cat "$work/build.log"; exit 2; }
# the symbol list is read whole first: `nm | grep -q` fails under pipefail when grep's early exit
# kills nm with SIGPIPE (a large symbol table)
symbols=$(nm -D "$so")
grep -q __asan_report_load <<<"$symbols" || { echo "the build is not instrumented by ASan"; exit 2; }
grep -q __ubsan_handle <<<"$symbols" || { echo "the build is not instrumented by UBSan"; exit 2; }

export LD_PRELOAD="$(gcc -print-file-name=libasan.so)"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:halt_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# -S: no site processing, so the editable install's import hook cannot pick the worktree's
# own (unsanitized) build; the environment's packages come through PYTHONPATH instead.
site_packages=$("$python" -c 'import site; print(":".join(site.getsitepackages()))')
export PYTHONPATH="$work/lib:$site_packages"
cd "$work"  # not the worktree: '' on sys.path must not find its lazyconv
"$python" -S - "$work/lib" <<'PY'
import sys
import lazyconv.records._ckernel as k
assert k.__file__.startswith(sys.argv[1]), k.__file__
print("sanitized kernel:", k.__file__, file=sys.stderr)
PY
"$python" -S "$work/lib/bench/fuzz_kernel.py" --seconds "$seconds"
