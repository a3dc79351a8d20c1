#!/usr/bin/env bash
# make package: the release build's larql as a Debian package, with the demo models, a man
# page generated from the CLI's help, the systemd units and example configurations. Reuses
# the build folder (no second compile). Prints the package's path.
#   scripts/make-package.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$src/build}" && pwd)"
out="$(mkdir -p "${2:-$build}" && cd "${2:-$build}" && pwd)"
larql="$build/larql"
[ -x "$larql" ] || { echo "make-package: $larql is missing: run make build first" >&2; exit 1; }
for tool in dpkg-deb dpkg-shlibdeps help2man; do
  command -v "$tool" >/dev/null || { echo "make-package: $tool is missing (make deps installs it)" >&2; exit 1; }
done

version="$("$larql" --version | awk '{print $2}')"
arch="$(dpkg --print-architecture)"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
root="$stage/root"

install -Dm755 "$larql" "$root/usr/bin/larql"
strip --strip-unneeded "$root/usr/bin/larql"
mkdir -p "$root/usr/share/larql/models"
cp -r "$src/models/demo" "$src/models/demo-moe" "$src/models/demo-draft" "$root/usr/share/larql/models/"
install -Dm644 -t "$root/usr/lib/systemd/system" "$src"/packaging/systemd/*.service
install -Dm644 -t "$root/usr/share/doc/larql/examples" "$src"/packaging/examples/*.env
install -Dm644 "$src/README.md" "$root/usr/share/doc/larql/README.md"
# The guides beside the README, where its links point (the benchmarks' history stays in the repository).
install -Dm644 -t "$root/usr/share/doc/larql/docs" "$src"/docs/*.md "$src"/docs/*.png

# The man page: the top-level help, then each subcommand's whole help. The version without
# the CPU's kernel list, which differs between machines.
{
  echo "[SUBCOMMANDS]"
  "$larql" --help | awk '/^Subcommands:/ {on = 1; next} on && NF {print $1}' | while read -r cmd; do
    echo ".SS \"larql $cmd\""
    echo ".nf"
    "$larql" "$cmd" --help 2>&1 | sed -e 's/\\/\\e/g' -e 's/^\./\\\&./' -e "s|^Usage: [^ ]*larql|Usage: larql|"
    echo ".fi"
  done
  echo "[FILES]"
  echo "/etc/larql/shard-N.env, /etc/larql/router.env, /etc/larql/api.env: the services' settings (examples in"
  echo "/usr/share/doc/larql/examples); /usr/share/larql/models: the demo models."
} > "$stage/subcommands.h2m"
mkdir -p "$root/usr/share/man/man1"
PATH="$(dirname "$root/usr/bin/larql"):$PATH" help2man --no-info --no-discard-stderr --version-string="larql $version" \
  --name="transformer inference with remote FFN shards" --include="$stage/subcommands.h2m" larql |
  gzip -9n > "$root/usr/share/man/man1/larql.1.gz"

# Depends: the shared libraries the binary links, as dpkg-shlibdeps finds their packages.
mkdir -p "$stage/debian"
printf 'Source: larql\n\nPackage: larql\nArchitecture: any\n' > "$stage/debian/control"
depends="$(cd "$stage" && dpkg-shlibdeps -O root/usr/bin/larql 2>/dev/null | sed -n 's/^shlibs:Depends=//p')"
size_kb="$(du -sk "$root" | cut -f1)"
mkdir -p "$root/DEBIAN"
cat > "$root/DEBIAN/control" <<CONTROL
Package: larql
Version: $version
Architecture: $arch
Maintainer: larql developers <larql@localhost>
Installed-Size: $size_kb
Depends: $depends
Section: net
Priority: optional
Homepage: https://localhost/larql
Description: transformer inference with the FFN layers on other machines
 larql runs transformer language models whose feed-forward layers live on shard
 servers: a client computes embeddings, attention and norms and sends each layer's
 FFN input over HTTP (ADR-0009 wire formats) to the shard that owns the layer, through
 a router with replicas and failover. Includes an OpenAI-compatible API server, the
 systemd units larql-shard@.service, larql-router.service and larql-api.service, and
 two small demo models.
CONTROL
deb="$out/larql_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zgzip --build "$root" "$deb" >/dev/null
echo "$deb"
