#!/usr/bin/env bash
# One-time, idempotent set-up: the project-local Python venv (pinned) and the ORT C/C++ headers.
# Fast when already done (stamp files). The one system-wide install: Debian's chromium package,
# which the test of `run --html` drives headless, when it is missing and this is a Debian-like
# system where we are root (a CI machine); otherwise it says how to get it.
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

# Headless Chromium for tests/plugin/test_html.py (the test fails, saying so, without it).
if [ "$flavour" = cpu ] && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null \
    && [ -z "${ORTMLX_CHROMIUM:-}" ]; then
  # Debian only: elsewhere the apt package of that name may be something else (Ubuntu: a snap).
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && grep -qx 'ID=debian' /etc/os-release; then
    echo "[setup] installing Debian's chromium package (headless browser for the --html test)"
    export DEBIAN_FRONTEND=noninteractive
    apt_install() { apt-get install -y -qq --no-install-recommends chromium > /dev/null; }
    if ! apt_install && ! { apt-get update -qq && apt_install; }; then
      echo "[setup] WARNING: apt-get could not install chromium; tests/plugin/test_html.py will fail" >&2
    fi
  else
    echo "[setup] note: chromium not found; tests/plugin/test_html.py needs it" \
         "(Debian: apt-get install chromium, or set ORTMLX_CHROMIUM)" >&2
  fi
fi
