# shellcheck shell=bash
# Sourced by scripts/demo and scripts/test: create or update .venv with '.[test]'.
# Works on a fresh Debian/Ubuntu machine as root with only python3 installed.

_sudo() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"
  else return 1
  fi
}

_apt_updated=0
apt_install() {
  # apt_install PKG... : install Debian/Ubuntu packages (needs root or passwordless sudo).
  command -v apt-get >/dev/null 2>&1 || { echo "apt-get not found; please install: $*" >&2; return 1; }
  if [ "$_apt_updated" -eq 0 ]; then
    _sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq || return 1
    _apt_updated=1
  fi
  _sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

ensure_venv() {
  local py="${PYTHON:-python3}"
  if [ ! -x .venv/bin/python ]; then
    # Debian's python3 has no ensurepip until python3-venv is installed.
    if ! "$py" -m venv .venv 2>/dev/null; then
      rm -rf .venv
      local ver
      ver="$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
      apt_install python3-venv "python${ver}-venv" || apt_install python3-venv
      "$py" -m venv .venv
    fi
  fi
  # Reinstall only when the dependency spec changed since the last install.
  local stamp=.venv/.gpusbom-install-stamp want
  want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] \
     || ! .venv/bin/python -c 'import gpusbom, pytest, xdist' >/dev/null 2>&1; then
    .venv/bin/python -m pip install -q -e '.[test]'
    echo "$want" > "$stamp"
  fi
}
