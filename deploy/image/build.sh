#!/usr/bin/env bash
# make image: the classifierd OCI image, built on a host without a Docker
# daemon or a registry (docs/deploy.md).
#
#   base      Debian bookworm's runtime libraries (libc6, libstdc++6,
#             libgcc-s1, tzdata, netbase), extracted by mmdebstrap from the
#             Debian archive: no shell, no package manager; /etc/passwd
#             names root and nonroot (65532); each package's control
#             paragraph in var/lib/dpkg/status.d (as distroless does), so
#             scanners see them
#   app       the daemon (cgo, -trimpath), libonnxruntime.so.1, the model
#             and the index of data/catalogs/default.json built with it,
#             under /opt/classifierd, read-only, owned by root
#   image     buildah from scratch, committed with SOURCE_DATE_EPOCH as
#             every timestamp and no history: the same inputs give the
#             same digest
#   SBOM      SPDX 2.3 (tools/image sbom): Go modules from the binary,
#             Debian packages from the root file system, ONNX Runtime
#             and the model; inside the image and beside it
#
# Inputs: the checked-out tree (SOURCE_DATE_EPOCH defaults to the last
# commit's time), $ORT_LIB, $MODEL_DIR, the Go toolchain and the Debian
# archive's current bookworm packages (their versions are in the SBOM).
# Outputs under $OUT (default var/image): classifierd.oci.tar
# (oci-archive), digest, sbom.spdx.json, packages.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${OUT:-$ROOT/var/image}
: "${ORT_LIB:?set ORT_LIB (make image sets it)}" "${MODEL_DIR:?set MODEL_DIR (make image sets it)}"
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# The runtime libraries ONNX Runtime and the cgo daemon link against
# (ldd bin/classifierd libonnxruntime.so.1), tzdata for time zones in
# logs, netbase for /etc/services and /etc/protocols.
PACKAGES=libc6,libstdc++6,libgcc-s1,tzdata,netbase,base-files
UID_GID=65532
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
export TZ=UTC LC_ALL=C

rm -rf "$OUT/rootfs" "$OUT/app" "$OUT/debs" "$OUT/empty" "$OUT/storage" "$OUT/run"
mkdir -p "$OUT/debs" "$OUT/app/usr/local/bin" "$OUT/app/opt/classifierd/model" "$OUT/app/opt/classifierd/lib"

echo ">> base: Debian $SUITE runtime libraries (mmdebstrap, extract only)"
mmdebstrap --quiet --variant=extract --include="$PACKAGES" \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
  --extract-hook="cp \"\$1\"/var/cache/apt/archives/*.deb '$OUT/debs/'" \
  "$SUITE" "$OUT/rootfs" "$MIRROR"
rootfs=$OUT/rootfs
# What apt set up to fetch the packages is not part of the image.
rm -rf "$rootfs"/etc/apt "$rootfs"/var/cache/apt "$rootfs"/var/lib/apt "$rootfs"/var/log/apt
mkdir -p "$rootfs/var/lib/dpkg/status.d" "$rootfs/tmp" "$rootfs/home/nonroot"
chmod 1777 "$rootfs/tmp"
: > "$OUT/packages.txt"
for deb in "$OUT"/debs/*.deb; do
  name=$(dpkg-deb -f "$deb" Package)
  dpkg-deb -f "$deb" > "$rootfs/var/lib/dpkg/status.d/$name"
  printf '%s\t%s\t%s\n' "$name" "$(dpkg-deb -f "$deb" Version)" "$(sha256sum < "$deb" | cut -d' ' -f1)" >> "$OUT/packages.txt"
done
sort -o "$OUT/packages.txt" "$OUT/packages.txt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%s:%s:nonroot:/home/nonroot:/sbin/nologin\n' $UID_GID $UID_GID > "$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:%s:\n' $UID_GID > "$rootfs/etc/group"

echo ">> app: daemon, ONNX Runtime, model, index"
app=$OUT/app/opt/classifierd
CGO_ENABLED=1 go build -trimpath -ldflags='-s -w' -o "$OUT/app/usr/local/bin/classifierd" ./cmd/classifierd
CGO_ENABLED=1 go build -trimpath -o "$OUT/gen-index" ./tools/gen-index
cp "$ORT_LIB" "$app/lib/libonnxruntime.so.1"
cp "$MODEL_DIR/model.onnx" "$MODEL_DIR/tokenizer.json" "$MODEL_DIR/manifest.json" "$app/model/"
"$OUT/gen-index" --quiet --catalog data/catalogs/default.json --model "$app/model" \
  --ort-lib "$app/lib/libonnxruntime.so.1" --out "$app/default.idx"
go run ./tools/image sbom --binary "$OUT/app/usr/local/bin/classifierd" --status-dir "$rootfs/var/lib/dpkg/status.d" \
  --ort-lib "$app/lib/libonnxruntime.so.1" --model "$app/model" --out "$OUT/sbom.spdx.json"
cp "$OUT/sbom.spdx.json" "$app/sbom.spdx.json"
chmod -R u=rwX,go=rX "$OUT/app"
chmod 0755 "$OUT/app/usr/local/bin/classifierd"

echo ">> image: buildah from scratch"
B=(buildah --root "$OUT/storage" --runroot "$OUT/run" --storage-driver vfs)
ctr=$("${B[@]}" from --quiet scratch)
trap '"${B[@]}" rm "$ctr" >/dev/null 2>&1 || true; rm -rf "$OUT/storage" "$OUT/run"' EXIT
"${B[@]}" copy --quiet "$ctr" "$rootfs" /
"${B[@]}" copy --quiet "$ctr" "$OUT/app" /
mkdir -p "$OUT/empty"
"${B[@]}" copy --quiet --chown "$UID_GID:$UID_GID" "$ctr" "$OUT/empty" /home/nonroot
"${B[@]}" config \
  --user "$UID_GID:$UID_GID" --workingdir /home/nonroot \
  --env PATH=/usr/local/bin:/usr/bin:/bin --env TZ=UTC \
  --port 50051/tcp --port 8080/tcp --port 9090/tcp \
  --label org.opencontainers.image.title=classifierd \
  --label org.opencontainers.image.revision="$(git rev-parse HEAD)" \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  --entrypoint '["/usr/local/bin/classifierd","--index","/opt/classifierd/default.idx","--model","/opt/classifierd/model","--ort-lib","/opt/classifierd/lib/libonnxruntime.so.1","--listen","0.0.0.0:50051","--log-format","json"]' \
  "$ctr"
rm -f "$OUT/classifierd.oci.tar"
"${B[@]}" commit --quiet --timestamp "$SOURCE_DATE_EPOCH" --omit-history "$ctr" "oci-archive:$OUT/classifierd.oci.tar:classifierd" >/dev/null
digest=$(skopeo inspect --format '{{.Digest}}' "oci-archive:$OUT/classifierd.oci.tar")
echo "$digest" > "$OUT/digest"
echo "image: $OUT/classifierd.oci.tar"
echo "digest: $digest"
echo "sbom: $OUT/sbom.spdx.json ($(grep -c '"SPDXID": "SPDXRef-Go-' "$OUT/sbom.spdx.json") Go modules, $(wc -l < "$OUT/packages.txt") Debian packages)"
