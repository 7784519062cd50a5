# syntax=docker/dockerfile:1
#
# classifierd image: the daemon, ONNX Runtime, the default model and the
# index of data/catalogs/default.json, running as a non-root user on a
# distroless base (glibc, libstdc++; no shell, no package manager).
#
# Nothing is downloaded while the image builds except Go modules (the Go
# module proxy): ONNX Runtime and the model come from .cache/, so run
# `make deps` first, in a checkout where .cache/ is a real directory (the
# build context does not follow a symlink). See docs/deploy.md.
#
#   make deps && docker build -t classifierd:dev .
#   docker run --rm -p 50051:50051 classifierd:dev

ARG GO_VERSION=1.26
ARG MODEL=all-MiniLM-L6-v2-int8
ARG ORT_VERSION=1.24.3

FROM golang:${GO_VERSION}-bookworm AS build
ARG MODEL
ARG ORT_VERSION
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN test -f .cache/onnxruntime-${ORT_VERSION}/libonnxruntime.so.1 && test -f .cache/models/${MODEL}/model.onnx \
    || { echo "no ONNX Runtime or model under .cache/: run 'make deps' before 'docker build'"; exit 1; }
RUN CGO_ENABLED=1 go build -trimpath -ldflags="-s -w" -o /out/classifierd ./cmd/classifierd \
 && CGO_ENABLED=1 go build -trimpath -ldflags="-s -w" -o /out/gen-index ./tools/gen-index
# The index is built here, with the model the image serves, so the two
# always match (the daemon refuses an index built by another model).
RUN mkdir -p /out/app/model /out/app/lib \
 && cp .cache/onnxruntime-${ORT_VERSION}/libonnxruntime.so.1 /out/app/lib/ \
 && cp .cache/models/${MODEL}/model.onnx .cache/models/${MODEL}/tokenizer.json .cache/models/${MODEL}/manifest.json /out/app/model/ \
 && /out/gen-index --catalog data/catalogs/default.json --model /out/app/model \
      --ort-lib /out/app/lib/libonnxruntime.so.1 --out /out/app/default.idx \
 && chmod 0444 /out/app/default.idx

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/classifierd /usr/local/bin/classifierd
COPY --from=build /out/app /opt/classifierd
# distroless's nonroot user (65532); the Kubernetes manifests also require it.
USER 65532:65532
EXPOSE 50051
ENTRYPOINT ["/usr/local/bin/classifierd", \
  "--index", "/opt/classifierd/default.idx", \
  "--model", "/opt/classifierd/model", \
  "--ort-lib", "/opt/classifierd/lib/libonnxruntime.so.1", \
  "--listen", "0.0.0.0:50051", \
  "--log-format", "json"]
