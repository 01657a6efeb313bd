# The uprev manager: a static binary on a distroless, non-root base image.
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t ghcr.io/uprev-dev/uprev:<that version> .
#   docker buildx build --platform linux/amd64,linux/arm64 --build-arg VERSION=… -t ghcr.io/uprev-dev/uprev:… .
#
# VERSION is stamped into the binary (`uprev version`), as `make release`
# stamps it; it should be the tag the image is pushed with, which
# dist/install.yaml runs.

FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src

# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download

COPY . .
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w -X github.com/uprev-dev/uprev/internal/version.stamped=${VERSION}" -o /out/uprev .

FROM gcr.io/distroless/static:nonroot
COPY --from=builder /out/uprev /uprev
USER 65532:65532
ENTRYPOINT ["/uprev", "run"]
