#!/usr/bin/env bash
# Fetch the ONNX Runtime C/C++ headers from Debian's libonnxruntime-dev into build/deps/ort,
# with a private apt configuration so the machine's own apt state is never touched.
# Prefers 1.27.x (experimental), falls back to 1.23.x (unstable).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
deps="$root/build/deps"
dest="$deps/ort"
if [ -f "$dest/include/onnxruntime/onnxruntime_c_api.h" ]; then
  exit 0
fi
echo "[setup] fetching ONNX Runtime headers (Debian libonnxruntime-dev)"
apt_dir="$deps/apt"
rm -rf "$apt_dir"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
cat > "$apt_dir/sources.list" <<LIST
deb [signed-by=$keyring] http://deb.debian.org/debian unstable main
deb [signed-by=$keyring] http://deb.debian.org/debian experimental main
LIST
opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
      -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache::Archives=$apt_dir/archives"
      -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o APT::Get::List-Cleanup=0
      -o APT::Sandbox::User=root)
if ! apt-get "${opts[@]}" -qq update; then
  echo "[setup] ERROR: cannot reach Debian's package registry to fetch libonnxruntime-dev." >&2
  exit 1
fi
versions="$(apt-cache "${opts[@]}" madison libonnxruntime-dev | awk -F'|' '{gsub(/ /,"",$2); print $2}')"
pick="$(echo "$versions" | grep -E '^1\.27\.' | head -n1 || true)"
[ -n "$pick" ] || pick="$(echo "$versions" | grep -E '^1\.(2[3-9]|[3-9][0-9])\.' | head -n1 || true)"
if [ -z "$pick" ]; then
  echo "[setup] ERROR: no libonnxruntime-dev >= 1.23 found in Debian unstable/experimental." >&2
  exit 1
fi
( cd "$apt_dir" && apt-get "${opts[@]}" -qq download "libonnxruntime-dev=$pick" )
rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
dpkg -x "$apt_dir"/libonnxruntime-dev_*.deb "$dest.tmp/x"
mkdir -p "$dest.tmp/include"
cp -r "$dest.tmp/x/usr/include/onnxruntime" "$dest.tmp/include/"
echo "$pick" > "$dest.tmp/VERSION"
rm -rf "$dest.tmp/x" "$dest" && mv "$dest.tmp" "$dest"
echo "[setup] ORT headers $pick in $dest/include"
