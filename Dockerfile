# syntax=docker/dockerfile:1
# The sluice binary (controller, webhook, crds, simulate) on a distroless,
# non-root base: no shell or package manager at runtime.
#
#   docker build -t ghcr.io/sluice-dev/sluice:0.1.0 .

# The toolchain the project is developed and tested with.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target,id=sluice-target \
    cargo build --profile dist --locked -p sluice-cli \
 && install -D -m 0755 target/dist/sluice /out/sluice

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/sluice /usr/local/bin/sluice
# 65532:65532 (the chart runs the pods as this user too).
USER nonroot:nonroot
EXPOSE 8080 9443
ENTRYPOINT ["/usr/local/bin/sluice"]
