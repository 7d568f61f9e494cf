#!/usr/bin/env bash
# Builds the gateway's container image (gateway/Containerfile) with buildah, Debian's
# daemonless builder: vfs storage under ${CARGO_TARGET_DIR:-target}/image/ and only COPY steps,
# so it needs no Docker engine, no overlay mount and nothing run inside the image. Saves it as
# target/image/tool-health-gateway.tar (a docker-archive: `docker load -i`, `podman load -i`)
# and keeps it in that storage, where gateway/tests/packaging/ runs it (`buildah run`).
#
#   bash scripts/wheel.sh [--release] && bash scripts/image.sh
#
# The binary is the one in the wheel scripts/wheel.sh left (one build, two packagings). The
# base is made here from Debian's packages, of this machine's release (the glibc the binary
# was linked against): the four files the binary links from libc6 and libgcc-s1, the CA bundle
# of ca-certificates, their copyright files, and passwd/group with the `nonroot` user (65532).
# Needs buildah (`apt-get install buildah`) and apt's package lists.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET="${CARGO_TARGET_DIR:-target}"
OUT="$TARGET/image"
CONTEXT="$OUT/context"
ROOTFS="$CONTEXT/rootfs"
DEBS="$OUT/debs"
B=(buildah --storage-driver vfs --root "$OUT/storage" --runroot "$OUT/run")

command -v buildah >/dev/null || { echo "image.sh: no buildah (apt-get install buildah)" >&2; exit 1; }
wheels=("$TARGET"/wheel/dist/tool_health_gateway-*.whl)
[ -f "${wheels[0]}" ] && [ ${#wheels[@]} -eq 1 ] || {
  echo "image.sh: no single wheel in $TARGET/wheel/dist (bash scripts/wheel.sh)" >&2; exit 1; }
wheel="${wheels[0]}"
version=$(basename "$wheel" | cut -d- -f2)

rm -rf "$CONTEXT" "$DEBS"
mkdir -p "$ROOTFS" "$DEBS/x"

# The binary, byte for byte the wheel's.
python3 - "$wheel" "$CONTEXT/tool-health-gateway" <<'EOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    [name] = [n for n in z.namelist() if n.endswith(".data/scripts/tool-health-gateway")]
    with z.open(name) as src, open(sys.argv[2], "wb") as dst:
        shutil.copyfileobj(src, dst)
EOF
chmod 755 "$CONTEXT/tool-health-gateway"

# Debian's packages, unpacked (not installed: no maintainer scripts run).
download() { (cd "$DEBS" && apt-get download -qq "$@" >/dev/null 2>&1); }
download libc6 libgcc-s1 ca-certificates || { apt-get update -qq && download libc6 libgcc-s1 ca-certificates; }
gcc_base=$(dpkg-deb -f "$DEBS"/libgcc-s1_*.deb Depends | grep -o 'gcc-[0-9]*-base' | head -1)
download "$gcc_base"
for deb in "$DEBS"/*.deb; do dpkg-deb -x "$deb" "$DEBS/x"; done

# What the binary links must be what the base carries (a new library fails here, not at run).
libs=(ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libgcc_s.so.1)
for needed in $(readelf -d "$CONTEXT/tool-health-gateway" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
  [[ " ${libs[*]} " == *" $needed "* ]] || { echo "image.sh: the binary links $needed, which the base lacks" >&2; exit 1; }
done
mkdir -p "$ROOTFS/lib/x86_64-linux-gnu" "$ROOTFS/lib64"
for lib in "${libs[@]}"; do cp -a "$DEBS/x/lib/x86_64-linux-gnu/$lib" "$ROOTFS/lib/x86_64-linux-gnu/"; done
cp -a "$DEBS/x/lib64/ld-linux-x86-64.so.2" "$ROOTFS/lib64/"

# The CA bundle update-ca-certificates makes from every certificate the package ships.
mkdir -p "$ROOTFS/etc/ssl/certs"
find "$DEBS/x/usr/share/ca-certificates" -name '*.crt' | LC_ALL=C sort | xargs cat \
  > "$ROOTFS/etc/ssl/certs/ca-certificates.crt"

for pkg in libc6 "$gcc_base" ca-certificates; do
  mkdir -p "$ROOTFS/usr/share/doc/$pkg"
  cp "$DEBS/x/usr/share/doc/$pkg/copyright" "$ROOTFS/usr/share/doc/$pkg/"
done

printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
  > "$ROOTFS/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' > "$ROOTFS/etc/group"
printf 'hosts: files dns\n' > "$ROOTFS/etc/nsswitch.conf"
mkdir -p "$ROOTFS/home/nonroot" "$ROOTFS/tmp"
chown 65532:65532 "$ROOTFS/home/nonroot"
chmod 1777 "$ROOTFS/tmp"

"${B[@]}" rmi -f "tool-health-gateway:$version" >/dev/null 2>&1 || true
"${B[@]}" build --quiet --isolation chroot --format docker --build-arg "VERSION=$version" \
  -f gateway/Containerfile -t "tool-health-gateway:$version" "$CONTEXT" >/dev/null
rm -f "$OUT/tool-health-gateway.tar"
"${B[@]}" push --quiet "tool-health-gateway:$version" \
  "docker-archive:$OUT/tool-health-gateway.tar:tool-health-gateway:$version"
echo "image.sh: tool-health-gateway:$version, $(du -k "$OUT/tool-health-gateway.tar" | cut -f1) KiB ($OUT/tool-health-gateway.tar; the base $(du -sk "$ROOTFS" | cut -f1) KiB)" >&2
