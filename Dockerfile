# SplitKV images: one runtime image with the three binaries (storage-node,
# compute-node, eval), and a tools image with redis-cli for checks.
#
#   docker compose build                    # builds the binaries in a Rust stage
#   BINARIES=prebuilt: the binaries are taken from target/release instead
#   (built on a Debian bookworm host with `cargo build --release`), for
#   machines without access to a registry's Rust image.
ARG RUST_IMAGE=docker.io/library/rust:1.95-bookworm
ARG RUNTIME_IMAGE=docker.io/library/debian:bookworm-slim
ARG BINARIES=build

FROM ${RUST_IMAGE} AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p storage-node -p compute-node -p eval \
 && mkdir -p /out \
 && cp target/release/storage-node target/release/compute-node target/release/eval /out/

FROM ${RUNTIME_IMAGE} AS prebuilt
COPY target/release/storage-node target/release/compute-node target/release/eval /out/

FROM ${BINARIES} AS binaries

FROM ${RUNTIME_IMAGE} AS runtime
RUN groupadd --system --gid 10001 splitkv \
 && useradd --system --uid 10001 --gid splitkv --home-dir /data --no-create-home \
      --shell /usr/sbin/nologin splitkv \
 && mkdir -p /data /certs/ca /certs/storage /certs/compute /out \
 && chown -R splitkv:splitkv /data /certs /out \
 && chmod 0700 /certs/ca
COPY --from=binaries /out/storage-node /out/compute-node /out/eval /usr/local/bin/
USER splitkv
WORKDIR /data
EXPOSE 7000/udp 6379/tcp
CMD ["storage-node", "--help"]

FROM runtime AS tools
USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends redis-tools \
 && rm -rf /var/lib/apt/lists/*
USER splitkv
