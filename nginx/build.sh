#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build ngx_http_sluice_module.so against Debian's nginx-dev, so the
# packaged nginx loads it with load_module.
#   nginx/build.sh OUT_DIR LIBSLUICE_A INCLUDE_DIR [RULES_LIB...]
# OUT_DIR gets a copy of nginx's configured source tree (objs/ and the
# Makefile are written there: /usr/share/nginx/src stays untouched) and
# the module, OUT_DIR/ngx_http_sluice_module.so.  RULES_LIB...: the
# archives and flags the rules module (sluice_rules) links, in link order
# (libsluice-engine.a, libsluice-rules.a, [libsluice-redis.a], -lyaml,
# -lurcu-bp, ...); none: the module is built without sluice_rules.
# nginx is configured with the package's own conf_flags (the ones `nginx -V`
# prints) and --with-compat: the module's binary signature must match the
# nginx binary's or load_module refuses it.  libsluice is linked in
# statically; its objects must be position-independent (meson builds static
# libraries -fPIC: b_staticpic, checked in nginx/meson.build).
set -euo pipefail
out=$(realpath -m "$1")
lib=$(realpath "$2")
inc=$(realpath "$3")
shift 3
rules_libs=""
for l in "$@"; do
  case "$l" in -*) rules_libs="$rules_libs $l" ;; *) rules_libs="$rules_libs $(realpath "$l")" ;; esac
done
here=$(dirname "$(realpath "$0")")
src=/usr/share/nginx/src
[ -f "$src/conf_flags" ] || { echo "build.sh: nginx-dev is not installed ($src/conf_flags)" >&2; exit 1; }
# shellcheck disable=SC1091
. "$src/conf_flags" # NGX_CONF_FLAGS=( ... )

mkdir -p "$out"
rm -rf "$out/src-tree"
cp -r "$src" "$out/src-tree"
cd "$out/src-tree"
# the engine's archives before libsluice.a, which they call
export SLUICE_INC="$inc" SLUICE_LIB="$rules_libs $lib" SLUICE_RULES=$([ -n "$rules_libs" ] && echo 1 || echo 0)
# The package's CFLAGS (nginx -V's --with-cc-opt), plus what sluice's
# headers need: C11 atomics and the double-width CAS (-mcx16, x86-64).
cc_opt='-g -O2 -fstack-protector-strong -Wformat -Werror=format-security -fPIC -Wdate-time -D_FORTIFY_SOURCE=2'
case "$(uname -m)" in x86_64) cc_opt="$cc_opt -mcx16" ;; esac
./configure "${NGX_CONF_FLAGS[@]}" --with-compat \
  --with-cc-opt="$cc_opt" --with-ld-opt='-Wl,-z,relro -Wl,-z,now -fPIC' \
  --add-dynamic-module="$here" >"$out/configure.log" 2>&1 ||
  { tail -30 "$out/configure.log" >&2; exit 1; }
make -j2 -f objs/Makefile modules >"$out/make.log" 2>&1 || { grep -E 'error|warning' "$out/make.log" >&2 || tail -30 "$out/make.log" >&2; exit 1; }
# A new file renamed over the old one, never the old one rewritten: an
# nginx still running has the old file mapped, and rewriting its pages
# under it crashes every process that loaded it (seen: signal 11).
cp objs/ngx_http_sluice_module.so "$out/ngx_http_sluice_module.so.new"
mv -f "$out/ngx_http_sluice_module.so.new" "$out/ngx_http_sluice_module.so"
echo "$out/ngx_http_sluice_module.so"
