# The uprev manager: a static binary on a distroless, non-root base image.
#
#   docker build -t ghcr.io/uprev-dev/uprev:latest .
#   docker buildx build --platform linux/amd64,linux/arm64 -t ghcr.io/uprev-dev/uprev:latest .

FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src

# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download

COPY . .
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w" -o /out/uprev .

FROM gcr.io/distroless/static:nonroot
COPY --from=builder /out/uprev /uprev
USER 65532:65532
ENTRYPOINT ["/uprev"]
