#!/usr/bin/env bash
# make image-test: run the image `make image` built, as a cluster would run
# it, and check it answers (docs/deploy.md).
#
# No container engine runs here: podman and crun fail on setrlimit, which
# this sandbox refuses. So the image is unpacked into an OCI bundle
# (skopeo, umoci) and run by runc itself, with a runtime config
# (tools/image bundle) that sets no rlimits, keeps the root file system
# read-only and the image's non-root user, and joins a network namespace
# that has nothing but loopback. tools/image check then, inside that
# namespace, waits for health, routes a query and reads the metrics.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/var/image}
test -f "$OUT/classifierd.oci.tar" || { echo "no image in $OUT: run make image first"; exit 1; }
id=classifierd-test-$$
ns=$id
work=$(mktemp -d)
cleanup() {
  runc kill "$id" KILL >/dev/null 2>&1 || true
  for _ in $(seq 50); do runc state "$id" 2>/dev/null | grep -q '"status": "stopped"' && break; sleep 0.1; done
  runc delete --force "$id" >/dev/null 2>&1 || true
  ip netns delete "$ns" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

echo ">> unpacking $(cat "$OUT/digest")"
mkdir "$work/layout"
tar -xf "$OUT/classifierd.oci.tar" -C "$work/layout"   # an oci-archive is a tarred OCI layout
got=$(skopeo inspect --format '{{.Digest}}' "oci:$work/layout:classifierd")
test "$got" = "$(cat "$OUT/digest")" || { echo "unpacked digest $got, built $(cat "$OUT/digest")"; exit 1; }
umoci unpack --image "$work/layout:classifierd" "$work/bundle" >/dev/null
ip netns add "$ns"
ip netns exec "$ns" ip link set lo up
go build -o "$work/image" ./tools/image
"$work/image" bundle --dir "$work/bundle" --netns "/var/run/netns/$ns" -- --metrics-listen 0.0.0.0:9090

echo ">> running it with runc (read-only root, uid 65532, loopback only)"
runc run --detach --bundle "$work/bundle" --pid-file "$work/pid" "$id" > "$work/daemon.log" 2>&1
pid=$(cat "$work/pid")
uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")
test "$uid" = 65532 || { echo "the daemon runs as uid $uid, want 65532"; exit 1; }
awk '$5 == "/" {print $6}' "/proc/$pid/mountinfo" | grep -q '^ro' || { echo "the root file system is not read-only"; exit 1; }
links=$(ip netns exec "$ns" ip -o link show | awk -F': ' '{print $2}' | tr '\n' ' ')
test "$links" = "lo " || { echo "the namespace has links other than loopback: $links"; exit 1; }
echo "pid $pid: uid $uid, root read-only, links: $links"

if ! ip netns exec "$ns" "$work/image" check --grpc 127.0.0.1:50051 --metrics 127.0.0.1:9090; then
  echo "--- daemon log"; tail -n 30 "$work/daemon.log"; exit 1
fi
runc kill "$id" TERM
for _ in $(seq 100); do runc state "$id" 2>/dev/null | grep -q '"status": "stopped"' && break; sleep 0.1; done
runc state "$id" | grep -q '"status": "stopped"' || { echo "the daemon did not stop on SIGTERM within 10 s"; exit 1; }
echo ">> stopped on SIGTERM; image-test passed"
