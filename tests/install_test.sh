#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# install_test.sh - install this build into a scratch directory and use it
# the way a user would: only the installed headers, the installed libraries
# and pkg-config, never the source tree.
#
# Usage (tests/core/meson.build runs it, suite 'install', plain build only):
#   install_test.sh BUILD_DIR SOURCE_DIR PREFIX LIBDIR INCLUDEDIR
# with $CC the compiler (may be several words) and $PYTHON3 a python3.
#
# It fails when
#   - a header of include/sluice/ is not installed (the optional libraries'
#     headers only with their library), or an installed header
#     includes (by "..." or <sluice/...>) a file that was not installed:
#     checked file by file, so a stale copy elsewhere on the compiler's path
#     (an earlier `meson install` to /usr/local) cannot hide it;
#   - the installed sluice.pc does not resolve, names a required package,
#     or links anything but sluice, pthread (-pthread) and m, or points its
#     -I / -L outside the install;
#   - the soname is not libsluice.so.<major of pkg-config --modversion>;
#   - the version the installed headers, library and .pc report differ;
#   - an installed file is not in docs/build.md's installed-files table, or
#     a row of a part that is built was not installed;
#   - an installed libsluice-*.so does not load the libsluice.so installed
#     beside it without LD_LIBRARY_PATH (its run path, $ORIGIN);
#   - any ```c block of README.md or docs/keyed.md does not compile with
#     `pkg-config --cflags --libs sluice`, link (shared, and static with
#     --static) and exit 0 against the installed library.
set -euo pipefail

build=$1 src=$2 prefix=$3 libdir=$4 includedir=$5
: "${CC:=cc}" "${PYTHON3:=python3}"
case $libdir in /*) ;; *) libdir=$prefix/$libdir ;; esac
case $includedir in /*) ;; *) includedir=$prefix/$includedir ;; esac

fail() {
	echo "install_test: FAIL: $*" >&2
	exit 1
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sluice-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/dest

# --no-rebuild: meson test has just built everything; a nested ninja in the
# same build directory would race the test run.
meson install -C "$build" --destdir "$dest" --no-rebuild --quiet >"$tmp/install.log" 2>&1 ||
	{ cat "$tmp/install.log" >&2; fail "meson install --destdir failed"; }

# --- headers: everything public is installed, and closed under #include.
hdr=$dest$includedir/sluice
[ -f "$hdr/sluice.h" ] || fail "no sluice/sluice.h under $dest$includedir"
# The optional libraries' headers come with their library (rules/ needs
# libyaml, redis/ hiredis): where the build has no such library, the
# header is rightly absent, e.g. in a plain build on a machine with only
# libc and pthreads.
optional_library() {
	case $1 in
	rules.h) echo libsluice-rules ;;
	engine.h) echo libsluice-engine ;;
	redis.h) echo libsluice-redis ;;
	esac
}
for h in "$src"/include/sluice/*.h; do
	name=$(basename "$h")
	lib=$(optional_library "$name")
	if [ -n "$lib" ] && ! compgen -G "$dest$libdir/$lib.*" >/dev/null; then
		continue
	fi
	[ -f "$hdr/$name" ] ||
		fail "include/sluice/$name is not installed (add it to include/sluice/meson.build)"
done
for h in "$src"/include/sluice/static/*.h; do
	[ -f "$hdr/static/$(basename "$h")" ] ||
		fail "include/sluice/static/$(basename "$h") is not installed (include/sluice/meson.build)"
done
for h in "$hdr"/*.h "$hdr"/static/*.h; do
	while IFS= read -r inc; do
		case $inc in
		\"*\") file=$(dirname "$h")/${inc:1:-1} ;;          # next to the header
		\<sluice/*\>) file=$dest$includedir/${inc:1:-1} ;;  # through -I includedir
		*) continue ;;                                       # the C library's
		esac
		[ -f "$file" ] || fail "installed $(basename "$h") includes $inc, which is not installed"
	done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*\([<"][^>"]*[>"]\).*/\1/p' "$h")
done

# --- every installed file is in docs/build.md's table, and every row of a
# part that is built (one of its files is installed) was installed.
prefix_rel=${libdir#"$prefix"/}
version_full=$(sed -n "s/^ *version: *'\([0-9.]*\)'.*/\1/p" "$src/meson.build" | head -1)
"$PYTHON3" - "$src/docs/build.md" "$dest$prefix" "$prefix_rel" "$version_full" <<'PYEOF2' ||
import fnmatch, os, re, sys
doc, root, libdir, version = sys.argv[1:]
rows, inside = [], False
for line in open(doc):
    if line.startswith("<!-- installed-files"):
        inside = True
        continue
    if inside:
        m = re.match(r"^\| `([^`]+)` \| (\w+) \|", line)
        if m:
            pat = m.group(1).replace("LIBDIR", libdir).replace("VERSION", version)
            rows.append((pat.replace("MAJOR", version.split(".")[0]), m.group(2)))
        elif rows and not line.startswith("|"):
            break
if not rows:
    sys.exit("install_test: FAIL: docs/build.md has no installed-files table")
files = sorted(os.path.relpath(os.path.join(d, f), root)
               for d, _, fs in os.walk(root) for f in fs)
bad, seen = 0, set()
for f in files:
    hit = [r for r in rows if fnmatch.fnmatchcase(f, r[0]) and "/" not in f[len(r[0].split("*")[0]):]]
    if not hit:
        print("install_test: FAIL: installed %s is not in docs/build.md's table" % f)
        bad = 1
    seen.update(hit)
parts = {part for _, part in seen}
for row in rows:
    if row[1] in parts and row not in seen:
        print("install_test: FAIL: docs/build.md lists %s (part %s), not installed" % row)
        bad = 1
print("installed files: %d, each in docs/build.md (parts: %s)" % (len(files), " ".join(sorted(parts))))
sys.exit(bad)
PYEOF2
	fail "the installed files and docs/build.md's table differ"

# --- the installed shared libraries find each other from this prefix,
# with no LD_LIBRARY_PATH: each libsluice-*.so loads the libsluice.so
# beside it (run path $ORIGIN), never another copy.
for lib in "$dest$libdir"/libsluice-*.so; do
	[ -e "$lib" ] || continue
	loads=$(env -u LD_LIBRARY_PATH ldd "$lib")
	while read -r name _ path rest; do
		case $name in libsluice*) ;; *) continue ;; esac
		[[ $path == "$dest$libdir/"* ]] ||
			fail "$(basename "$lib"): $name => $path $rest, not the one installed beside it"
	done <<<"$loads"
done

# --- pkg-config: only the installed .pc, with every path inside $dest.
export PKG_CONFIG_PATH=
export PKG_CONFIG_LIBDIR=$dest$libdir/pkgconfig
export PKG_CONFIG_SYSROOT_DIR=$dest
pkg-config --exists --print-errors sluice || fail "pkg-config cannot find or parse the installed sluice.pc"
requires=$(pkg-config --print-requires sluice; pkg-config --print-requires-private sluice)
[ -z "$requires" ] || fail "sluice.pc requires other packages: $requires"
cflags=$(pkg-config --cflags sluice)
libs=$(pkg-config --libs sluice)
static_libs=$(pkg-config --static --libs sluice)
for tok in $cflags $static_libs; do
	case $tok in
	-I"$dest"/* | -L"$dest"/*) ;;
	-I* | -L*) fail "sluice.pc points outside the install: $tok" ;;
	-lsluice | -lpthread | -pthread | -lm) ;;
	*) fail "sluice.pc names more than sluice, pthreads and libm: $tok" ;;
	esac
done

# --- soname and version: the .pc, the headers and the library agree.
version=$(pkg-config --modversion sluice)
so=$dest$libdir/libsluice.so
if [ -e "$so" ]; then
	soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
	[ "$soname" = "libsluice.so.${version%%.*}" ] ||
		fail "soname '$soname', want libsluice.so.${version%%.*} (version $version)"
fi
cat >"$tmp/version.c" <<'EOF'
#include <stdio.h>
#include <string.h>
#include <sluice/sluice.h>

int main(void)
{
	printf("%s\n", SLUICE_VERSION_STRING);
	if (sluice_version() != SLUICE_VERSION_HEX ||
	    strcmp(sluice_version_string(), SLUICE_VERSION_STRING) != 0) {
		fprintf(stderr, "library %s (0x%06lx), headers %s (0x%06x)\n",
		        sluice_version_string(), sluice_version(), SLUICE_VERSION_STRING,
		        SLUICE_VERSION_HEX);
		return 1;
	}
	return 0;
}
EOF
programs=(version)

# --- the C examples the README and docs/keyed.md print, exactly as printed.
# (docs/keyed.md: its first two, the whole programs; later ones are
# fragments of a call)
for md in README.md:0 docs/keyed.md:2; do
	upto=${md#*:} md=${md%:*}
	blocks=$(grep -c '^[[:space:]]*```c[[:space:]]*$' "$src/$md" || true)
	[ "$blocks" -ge 1 ] || fail "$md has no \`\`\`c block"
	[ "$upto" -eq 0 ] || [ "$blocks" -lt "$upto" ] || blocks=$upto
	for n in $(seq 1 "$blocks"); do
		name=$(basename "$md" .md | tr -c 'a-zA-Z0-9\n' _)$n
		"$PYTHON3" "$src/examples/extract_readme_c.py" "$src/$md" "$tmp/$name.c" "$n" ||
			fail "extracting $md block $n"
		programs+=("$name")
	done
done

# Shared: -lsluice finds the installed libsluice.so; the run must load that
# copy (ldd says which), not one from the build tree or the system.
# Static: --static's Libs.private must be enough to link libsluice.a.
export LD_LIBRARY_PATH=$dest$libdir
for p in "${programs[@]}"; do
	if [ -e "$so" ]; then
		# shellcheck disable=SC2086 # $CC, $cflags and $libs are word lists
		$CC -Wall -Werror $cflags -o "$tmp/$p" "$tmp/$p.c" $libs ||
			fail "$p.c does not compile and link against the installed library with pkg-config"
		# ldd's output in full first: `ldd | grep -q` under pipefail fails
		# whenever grep quits before ldd has written everything (SIGPIPE).
		loads=$(ldd "$tmp/$p")
		[[ $loads == *"libsluice.so.${version%%.*} => $dest/"* ]] ||
			fail "$p does not load the installed libsluice.so: $(grep sluice <<<"$loads")"
		out=$("$tmp/$p") || fail "$p (shared) exited $?"
		[ "$p" != version ] || [ "$out" = "$version" ] ||
			fail "headers say $out, pkg-config --modversion says $version"
	fi
	if [ -e "$dest$libdir/libsluice.a" ]; then
		# shellcheck disable=SC2086
		$CC -Wall -Werror $cflags -o "$tmp/$p-static" "$tmp/$p.c" ${static_libs//-lsluice/-l:libsluice.a} ||
			fail "$p.c does not link the installed libsluice.a with pkg-config --static"
		"$tmp/$p-static" >/dev/null || fail "$p (static) exited $?"
	fi
	# The inline opt-in (common.h, INLINE): the same program with the
	# decision paths compiled in from sluice/static/, shared and static;
	# shared, it must require this release's own node, and without the
	# opt-in no inline node at all.
	if [ -e "$so" ]; then
		# shellcheck disable=SC2086
		$CC -Wall -Werror -DSLUICE_INLINE $cflags -o "$tmp/$p-inline" "$tmp/$p.c" $libs ||
			fail "$p.c does not compile and link with -DSLUICE_INLINE against the installed library"
		"$tmp/$p-inline" >/dev/null || fail "$p (inline, shared) exited $?"
		needs=$(readelf -V "$tmp/$p-inline")
		[[ $needs == *"SLUICE_INLINE_$version"* ]] ||
			fail "$p built with SLUICE_INLINE does not require the node SLUICE_INLINE_$version"
		needs=$(readelf -V "$tmp/$p")
		[[ $needs != *SLUICE_INLINE* ]] || fail "$p built without SLUICE_INLINE requires an inline node"
	fi
	if [ -e "$dest$libdir/libsluice.a" ]; then
		# shellcheck disable=SC2086
		$CC -Wall -Werror -DSLUICE_INLINE $cflags -o "$tmp/$p-inline-static" "$tmp/$p.c" \
			${static_libs//-lsluice/-l:libsluice.a} ||
			fail "$p.c does not link the installed libsluice.a with -DSLUICE_INLINE"
		"$tmp/$p-inline-static" >/dev/null || fail "$p (inline, static) exited $?"
	fi
done

# --- The release pin at work: a libsluice.so.1 of another release (a stub
# with that release's version nodes) must be refused by the dynamic linker
# for a program built with SLUICE_INLINE, by name of the node it lacks.
if [ -e "$so" ]; then
	mkdir "$tmp/other"
	printf 'int sluice_version_stub;\nint sluice_inline_stub;\n' >"$tmp/other/stub.c"
	printf 'SLUICE_1.0 { global: sluice_version_stub; local: *; };\nSLUICE_INLINE_0.0.0 { global: sluice_inline_stub; } SLUICE_1.0;\n' >"$tmp/other/stub.map"
	$CC -shared -fPIC -Wl,-soname,"libsluice.so.${version%%.*}" -Wl,--version-script="$tmp/other/stub.map" \
		-o "$tmp/other/libsluice.so.${version%%.*}" "$tmp/other/stub.c" || fail "cannot build the stub library"
	if out=$(LD_LIBRARY_PATH=$tmp/other "$tmp/version-inline" 2>&1); then
		fail "version (inline) started against another release's libsluice.so: $out"
	fi
	[[ $out == *"SLUICE_INLINE_$version"*"not found"* ]] ||
		fail "version (inline) against another release failed, but not for the node: $out"
fi
# --- libsluice-redis, where the build has it: a consumer built from the
# installed headers and `pkg-config --libs sluice sluice-redis` alone (the
# .pc names hiredis), shared and static, links and runs.
if [ -e "$dest$libdir/pkgconfig/sluice-redis.pc" ]; then
	# hiredis is the system's: its .pc is found where pkg-config looks by
	# default, after the installed ones (the sysroot only prefixes paths
	# that are not already the system's own: -lhiredis needs no -L)
	PKG_CONFIG_LIBDIR=$dest$libdir/pkgconfig:$(env -u PKG_CONFIG_LIBDIR -u PKG_CONFIG_SYSROOT_DIR pkg-config --variable pc_path pkg-config)
	export PKG_CONFIG_LIBDIR
	pkg-config --exists --print-errors sluice-redis ||
		fail "pkg-config cannot find or parse the installed sluice-redis.pc"
	cat >"$tmp/redis.c" <<'EOF'
#include <stdio.h>
#include <sluice/redis.h>
#include <sluice/sluice.h>

int main(void)
{
	/* no server: a call it refuses says so without a round trip */
	sluice_redis_t *r = NULL;
	int rc = sluice_redis_new(NULL, &r);
	printf("%s\n", sluice_err_name(rc));
	return rc == SLUICE_EINVAL && r == NULL ? 0 : 1;
}
EOF
	# shellcheck disable=SC2046 # pkg-config's output is a word list
	$CC -Wall -Werror $(pkg-config --cflags sluice sluice-redis) -o "$tmp/redis" "$tmp/redis.c" \
		$(pkg-config --libs sluice sluice-redis) ||
		fail "redis.c does not link with pkg-config --libs sluice sluice-redis"
	loads=$(ldd "$tmp/redis")
	[[ $loads == *"libsluice-redis.so.${version%%.*} => $dest/"* ]] ||
		fail "redis does not load the installed libsluice-redis.so: $(grep sluice <<<"$loads")"
	"$tmp/redis" >/dev/null || fail "redis (shared) exited $?"
	# shellcheck disable=SC2046
	$CC -Wall -Werror -DSLUICE_INLINE $(pkg-config --cflags sluice sluice-redis) -o "$tmp/redis-inline" \
		"$tmp/redis.c" $(pkg-config --libs sluice sluice-redis) ||
		fail "redis.c does not link with -DSLUICE_INLINE and pkg-config --libs sluice sluice-redis"
	"$tmp/redis-inline" >/dev/null || fail "redis (inline, shared) exited $?"
	# shellcheck disable=SC2046
	$CC -Wall -Werror $(pkg-config --cflags sluice sluice-redis) -o "$tmp/redis-static" \
		"$tmp/redis.c" -l:libsluice-redis.a -l:libsluice.a \
		$(pkg-config --static --libs sluice sluice-redis | sed 's/-lsluice-redis//; s/-lsluice\b//') ||
		fail "redis.c does not link the installed static libraries with pkg-config --static"
	"$tmp/redis-static" >/dev/null || fail "redis (static) exited $?"
	programs+=(redis)
fi
echo "install_test: ok: ${programs[*]} against $version installed in a scratch destdir"
