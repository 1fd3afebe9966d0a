# Shared set-up of ./run.sh and ./test.sh (sourced, not executed).
#
#   qconv_install_deps   installs the Debian packages qconv needs when some are
#                        missing: with apt-get when run as root, otherwise it
#                        prints the exact command and exits 1.
#   qconv_configure      configures a Release build in $QCONV_BUILD (default build/)
#   qconv_build [TARGET...]  builds (everything when no target is given)
#
# Environment: QCONV_BUILD (build folder), QCONV_JOBS (parallel jobs, default nproc).

QCONV_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
QCONV_BUILD="${QCONV_BUILD:-$QCONV_ROOT/build}"
QCONV_JOBS="${QCONV_JOBS:-$(nproc 2>/dev/null || echo 2)}"
# When ccache is installed (optional), let clones in other folders share its
# objects: paths below the source tree are hashed relative to it.
# The build folder is not hashed either (debug builds name it in their debug
# info; a clone's build/ then reuses the objects of another clone's).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$QCONV_ROOT}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"

# Why each package is needed: README.md, "Dependencies".
QCONV_PACKAGES=(
  cmake g++ make pkg-config
  libxbyak-dev libdnnl-dev ocl-icd-opencl-dev libcpu-features-dev
  libonnx-dev libprotobuf-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev clang-format
  gnuplot-nox strace ccache
  python3-onnx python3-numpy
)

qconv_install_deps() {
  local missing=() p
  for p in "${QCONV_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -eq 0 ]; then
    echo "qconv: installing missing packages: ${missing[*]}"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
  else
    echo "qconv: missing Debian packages: ${missing[*]}" >&2
    echo "qconv: install them as root with:" >&2
    echo "  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
}

qconv_configure() {
  local launcher=()
  command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S "$QCONV_ROOT" -B "$QCONV_BUILD" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@"
}

# As qconv_build, every object rebuilt (a ccache hit where the cache has it).
qconv_build_clean_first() {
  local targets=() t
  for t in "$@"; do targets+=(--target "$t"); done
  cmake --build "$QCONV_BUILD" --clean-first -j"$QCONV_JOBS" "${targets[@]}"
}

qconv_build() {
  local targets=() t
  for t in "$@"; do targets+=(--target "$t"); done
  cmake --build "$QCONV_BUILD" -j"$QCONV_JOBS" "${targets[@]}"
}
