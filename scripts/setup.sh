#!/usr/bin/env bash
# One-time, idempotent set-up: the project-local Python venv (pinned) and the ORT C/C++ headers.
# Fast when already done (stamp files); never installs anything system-wide.
#   scripts/setup.sh        the CPU flavour: .venv from requirements.txt (mlx-cpu)
#   scripts/setup.sh cuda   the CUDA flavour: .venv-cuda from requirements-cuda.txt (mlx-cuda-13)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
flavour="${1:-cpu}"
case "$flavour" in
  cpu) venv="$root/.venv"; reqs=requirements.txt ;;
  cuda) venv="$root/.venv-cuda"; reqs=requirements-cuda.txt ;;
  *) echo "[setup] unknown flavour '$flavour' (cpu or cuda)" >&2; exit 2 ;;
esac
stamp="$venv/.ortmlx-requirements.sha"
want="$(cat "$reqs" requirements-base.txt | sha256sum | cut -d' ' -f1)"

if [ ! -x "$venv/bin/python" ]; then
  echo "[setup] creating $venv"
  python3 -m venv "$venv"
fi
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "[setup] installing pinned Python packages ($reqs)"
  if ! "$venv/bin/pip" install --disable-pip-version-check -q -r "$reqs"; then
    echo "[setup] ERROR: pip could not install $reqs." >&2
    echo "[setup] Is the PyPI registry reachable from this machine? Re-run 'make setup' when it is." >&2
    exit 1
  fi
  # The locator package, importable from this checkout (it then finds build/libortmlx.so).
  site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$root/python" > "$site/ortmlx-checkout.pth"
  echo "$want" > "$stamp"
fi

"$root/scripts/fetch_ort_headers.sh"
