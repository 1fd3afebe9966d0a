#!/usr/bin/env bash
# The package check of continuous integration: configure + build must read no
# file of a Debian package that the install list (scripts/setup.sh,
# QCONV_PACKAGES) does not bring in, directly or through its Depends.
#
#   1. configures and builds a Release tree in a temporary folder under
#      `strace -f`, recording every file opened or executed;
#   2. maps each file to the package that owns it (dpkg's file lists, with the
#      /usr-merged aliases /bin, /lib, ... resolved);
#   3. computes the closure of the install list over Depends and Pre-Depends
#      (`apt-cache depends --recurse`, no Recommends or Suggests) and adds the
#      packages every Debian system has (Essential: yes, Priority: required);
#   4. fails, naming each package and one file it was read for, when a package
#      outside that set was read.
#
# A fresh machine installs exactly the list, so a package read here but not in
# the closure is one a fresh machine may lack (libdnnl-dev only recommends
# ocl-icd-opencl-dev, which its CMake config needs).
#
# Continuous integration traces the Release build it tests (one configure and
# build, not two): `check_packages.sh trace BUILD_DIR` configures and builds
# BUILD_DIR as scripts/setup.sh does (with ccache when installed) under strace
# and keeps the trace in BUILD_DIR/package_trace; `check_packages.sh verify
# BUILD_DIR` then does steps 2-4 on it. With no argument both run on a
# temporary folder. The traced build starts from clean objects (an up-to-date
# folder would open nothing); a ccache hit opens the headers it hashes and runs the
# linker as a miss does; only the compiler proper is not run, and every package
# it reads is a Depends of g++, already in the closure. A file that starts to
# include a new package's header changes, so it misses and is traced in full.
#
# Environment: QCONV_CHECK_TARGETS (targets to build, default all), QCONV_JOBS.
set -euo pipefail
source "$(dirname "$0")/setup.sh"

mode="${1:-all}"
case "$mode" in
all) work="$(mktemp -d /tmp/qconv_check_packages.XXXXXX)"; build="$work/build"
     trap 'rm -rf "$work"' EXIT ;;
trace | verify) build="${2:?usage: check_packages.sh trace|verify BUILD_DIR}"
     mkdir -p "$build"; work="$(mktemp -d /tmp/qconv_check_packages.XXXXXX)"
     trap 'rm -rf "$work"' EXIT ;;
*) echo "usage: check_packages.sh [trace BUILD_DIR | verify BUILD_DIR]" >&2; exit 2 ;;
esac
trace="$build/package_trace"

qconv_install_deps

# ---------------------------------------------------------------- 1. trace
if [ "$mode" != verify ]; then
  targets=()
  for t in ${QCONV_CHECK_TARGETS:-}; do targets+=(--target "$t"); done
  start=$(date +%s)
  set +e
  QCONV_BUILD="$build" strace -f -qq -e trace=open,openat,execve -e signal=none -o "$trace" \
    bash -c 'source "$1/scripts/setup.sh" && qconv_configure && qconv_build_clean_first "${@:2}"' _ \
    "$QCONV_ROOT" ${QCONV_CHECK_TARGETS:-} >"$work/build.log" 2>&1
  rc=$?
  set -e
  if [ $rc -ne 0 ]; then
    tail -n 40 "$work/build.log" >&2
    echo "check_packages: FAILED: configure or build failed (above)" >&2
    exit 1
  fi
  echo "check_packages: configure + build traced in $(( $(date +%s) - start )) s ($trace)"
  [ "$mode" = trace ] && exit 0
fi
[ -s "$trace" ] || { echo "check_packages: no trace in $trace (run 'check_packages.sh trace $build' first)" >&2; exit 2; }
start=$(date +%s)

# Files that exist, opened successfully (return value >= 0) or executed.
grep -v ' = -1 ' "$trace" |
  sed -n 's/.*\(openat([^"]*\|open(\|execve(\)"\([^"]*\)".*/\2/p' |
  grep '^/' | sort -u | while IFS= read -r f; do if [ -f "$f" ]; then printf '%s\n' "$f"; fi; done >"$work/files"

# ---------------------------------------------------------------- 2. owners
# dpkg's lists name files as installed (/lib/...); the build may open them
# through the /usr merge (/usr/lib/...) or a symlink, so each file is looked up
# as opened and as its canonical path, and each listed path under both names.
tr '\n' '\0' <"$work/files" | xargs -0 realpath -m -- >"$work/real"
paste "$work/files" "$work/real" >"$work/paths"
awk -F'\t' '
  FNR == 1 { pkg = FILENAME; sub(".*/", "", pkg); sub("\\.list$", "", pkg); sub(":.*", "", pkg) }
  FILENAME != paths {
    owner[$0] = pkg
    if ($0 ~ "^/(bin|sbin|lib|lib32|lib64|libx32)/") owner["/usr" $0] = pkg
    else if ($0 ~ "^/usr/(bin|sbin|lib|lib32|lib64|libx32)/") owner[substr($0, 5)] = pkg
    next
  }
  { o = ($1 in owner) ? owner[$1] : (($2 in owner) ? owner[$2] : "")
    if (o != "") print o "\t" $1 }' paths="$work/paths" /var/lib/dpkg/info/*.list "$work/paths" >"$work/owned"

# ---------------------------------------------------------------- 3. closure
apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
  --no-replaces --no-enhances "${QCONV_PACKAGES[@]}" 2>/dev/null |
  sed -n 's/^\([a-z0-9][^ <>:]*\).*/\1/p; s/^ *[|]\{0,1\}\(Pre\)\{0,1\}Depends: \([a-z0-9][^ <>:]*\).*/\2/p' |
  sort -u >"$work/closure"
dpkg-query -W -f='${Package} ${Essential} ${Priority}\n' |
  awk '$2 == "yes" || $3 == "required" { print $1 }' >>"$work/closure"
printf '%s\n' "${QCONV_PACKAGES[@]}" >>"$work/closure"
# Read when present, harmless when absent (not needed by the build):
#   locales  /usr/share/locale/locale.alias, read by every gettext program.
printf '%s\n' locales >>"$work/closure"
sort -u -o "$work/closure" "$work/closure"

# ---------------------------------------------------------------- 4. verdict
sort -u -k1,1 "$work/owned" >"$work/by_package"
missing="$(join -t $'\t' -v1 "$work/by_package" "$work/closure" || true)"
read_pkgs=$(cut -f1 "$work/by_package" | sort -u | wc -l)
echo "check_packages: $(wc -l <"$work/files") files read from $read_pkgs packages in $(( $(date +%s) - start )) s;" \
     "the install list brings in $(wc -l <"$work/closure") packages"
if [ -n "$missing" ]; then
  echo "check_packages: FAILED: configure + build read files of packages the install list does not bring in:" >&2
  while IFS=$'\t' read -r pkg f; do echo "  $pkg  (e.g. $f)" >&2; done <<<"$missing"
  echo "check_packages: add them to QCONV_PACKAGES in scripts/setup.sh (and say why in README.md)" >&2
  exit 1
fi
echo "check_packages: every package read is in the install list's closure"
