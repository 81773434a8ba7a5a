# syntax=docker/dockerfile:1
#
# streamlearn, built from source: a static binary (CGO_ENABLED=0) on a
# distroless, non-root runtime image.
#
#   docker build -t streamlearn .        # the service (target runtime)
#   docker run --rm -p 8080:8080 -v "$PWD/my.yaml:/etc/streamlearn/streamlearn.yaml:ro" streamlearn
#                                        # my.yaml: a broker source, http.addr 0.0.0.0:8080
#   docker build --target generator -t streamlearn-generator .   # + /bin/sh, for deploy/generator
#
# docker-compose.yml builds both targets. CI checks this file's pins and
# stages (cmd/streamlearn/compose_test.go) but builds no image.

# The go directive of go.mod; the golang images set GOTOOLCHAIN=local.
FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w" -o /out/streamlearn ./cmd/streamlearn \
 && /out/streamlearn version \
 && mkdir -p /out/state

# The demo generator of docker-compose.yml: deploy/generator/generate.sh,
# a shell loop around `streamlearn generate` and `streamlearn publish`, so
# the binary on Alpine (a shell) rather than distroless.
FROM alpine:3.22 AS generator
RUN adduser -D -H -u 10001 streamlearn
COPY --from=build /out/streamlearn /usr/local/bin/streamlearn
COPY deploy/generator/generate.sh /usr/local/bin/streamlearn-generate
USER 10001:10001
CMD ["/bin/sh", "/usr/local/bin/streamlearn-generate"]

# The service: nothing but the binary, CA certificates (TLS to brokers)
# and the nonroot user (uid 65532) of the distroless image.
FROM gcr.io/distroless/static-debian12:nonroot AS runtime
COPY --from=build /out/streamlearn /usr/local/bin/streamlearn
# checkpoint.dir of deploy/streamlearn.yaml, owned by the user so that a
# volume mounted there starts writable (distroless has no shell to mkdir).
COPY --from=build --chown=65532:65532 /out/state /var/lib/streamlearn
USER nonroot:nonroot
WORKDIR /home/nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/streamlearn"]
CMD ["run", "-c", "/etc/streamlearn/streamlearn.yaml"]
