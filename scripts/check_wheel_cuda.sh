#!/usr/bin/env bash
# The CUDA wheel (ortmlx-cu13), checked as a user installs it; no GPU needed. CI runs it after
# `make build-cuda` (.ci/run).
#   1. builds the wheel from the existing CUDA tree (setup.py packs it, nothing is recompiled);
#   2. makes a fresh venv holding what `pip install ortmlx-cu13` brings: mlx-cuda-13 and the NVIDIA
#      wheels it pulls, hard-linked from .venv-cuda's site-packages (the same files pip put there
#      from the same pins: gigabytes that CI need not download and unpack twice), without the
#      checkout's .pth, then installs the wheel into it;
#   3. checks: `pip check` (the wheel's pins are what is installed), `import ortmlx` finds the
#      packaged library, its RUNPATH is $ORIGIN-relative only, and `ldd` resolves every library it
#      loads inside the fresh venv's site-packages or the system's library folders: none from the
#      build tree or .venv-cuda. libcuda.so.1 (the NVIDIA driver) is the one library allowed to be
#      missing: it exists only on machines with a GPU.
# Environment: ORTMLX_VENV_CUDA (default .venv-cuda), ORTMLX_BUILD_CUDA (default build-cuda).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
start=$SECONDS
venv_cuda="${ORTMLX_VENV_CUDA:-$root/.venv-cuda}"
build="${ORTMLX_BUILD_CUDA:-$root/build-cuda}"
dist="$root/dist"
check="$root/build-wheel/cuda-check"
fail() { echo "[wheel-cuda] FAIL: $*" >&2; exit 1; }
[ -f "$build/libortmlx.so" ] || fail "no CUDA build at $build (make build-cuda first)"
[ -x "$venv_cuda/bin/python" ] || fail "no CUDA venv at $venv_cuda (make setup-cuda first)"

echo "[wheel-cuda] building the cu13 wheel from $(basename "$build")"
rm -f "$dist"/ortmlx_cu13-*.whl
ORTMLX_FLAVOUR=cuda ORTMLX_BUILD_DIR="$build" ORTMLX_JOBS="$(nproc)" \
  "$venv_cuda/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps -w "$dist" "$root"
wheel="$(ls "$dist"/ortmlx_cu13-*.whl)"
echo "[wheel-cuda] $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"

# The fresh venv, on the same interpreter as .venv-cuda (its site-packages layout must match).
rm -rf "$check"
"$(readlink -f "$venv_cuda/bin/python")" -m venv --without-pip "$check"
src_site="$("$venv_cuda/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
site="$("$check/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
for entry in "$src_site"/*; do
  name="$(basename "$entry")"
  case "$name" in
    ortmlx-checkout.pth | ortmlx | ortmlx-* | ortmlx_* | __pycache__) continue ;;
  esac
  # Hard links: no copy of the data, and real files, so that $ORIGIN is the fresh venv's.
  cp -al "$entry" "$site/" 2>/dev/null || fail "cannot hard-link $entry into $site (another file system?)"
done
pip=("$venv_cuda/bin/python" -m pip --disable-pip-version-check --python "$check/bin/python")
"${pip[@]}" install -q --no-deps --no-index "$wheel"
"${pip[@]}" check || fail "the installed wheel's requirements are not met (pip check above)"

env -u PYTHONPATH -u ORTMLX_LIBRARY -u VIRTUAL_ENV "$check/bin/python" - "$site" "$build" "$venv_cuda" <<'EOF'
"""The packaged library: where it is, its RUNPATH, what ldd resolves."""
import os
import re
import subprocess
import sys

site, build, venv_cuda = (os.path.realpath(p) for p in sys.argv[1:4])
import ortmlx  # noqa: E402  the installed package, not the checkout's

lib = os.path.realpath(ortmlx.get_library_path())
problems = []
if not lib.startswith(site + os.sep):
    problems.append(f"ortmlx found {lib}, not the library installed in {site}")
dyn = subprocess.run(["readelf", "-d", lib], capture_output=True, text=True, check=True).stdout
runpath = re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[(.*)\]", dyn)
for entry in ":".join(runpath).split(":"):
    if entry and not entry.startswith("$ORIGIN"):
        problems.append(f"RUNPATH entry {entry!r} is not $ORIGIN-relative")
out = subprocess.run(["ldd", lib], capture_output=True, text=True, check=True).stdout
system = ("/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/")
resolved = 0
for line in out.splitlines():
    line = line.strip()
    m = re.match(r"(\S+) => (.*?)(?: \(0x[0-9a-f]+\))?$", line)
    if not m:
        continue  # the vdso and the dynamic loader (absolute, without "=>")
    name, where = m.groups()
    if where == "not found":
        if name != "libcuda.so.1":
            problems.append(f"{name}: not found")
        continue
    path = os.path.normpath(where)
    resolved += 1
    if path.startswith((build + os.sep, venv_cuda + os.sep)):
        problems.append(f"{name} resolves into the build tree or .venv-cuda: {path}")
    elif not (path.startswith(site + os.sep) or path.startswith(system)):
        problems.append(f"{name} resolves outside site-packages and the system: {path}")
in_site = sum(1 for line in out.splitlines() if site in line)
print(f"[wheel-cuda] {lib.replace(site, 'site-packages')}: RUNPATH {':'.join(runpath)}")
print(f"[wheel-cuda] ldd: {resolved} libraries resolved, {in_site} of them from the venv's "
      "site-packages (MLX, NVIDIA wheels, OpenBLAS), the rest from the system; libcuda.so.1 "
      "(driver) " + ("absent (no GPU driver here)" if "libcuda.so.1 => not found" in out
                     else "found"))
if problems:
    print("[wheel-cuda] FAIL:\n  " + "\n  ".join(problems), file=sys.stderr)
    print(out, file=sys.stderr)
    sys.exit(1)
EOF
rm -rf "$check"
echo "[wheel-cuda] ok ($((SECONDS - start)) s)"
