# skein-broker image. Build from the repository root:
#   docker build -f docker/broker.Dockerfile -t skein-broker .
# The runtime keeps /bin/sh: the operator's StatefulSet starts the broker
# through a one-line shell command that derives node.id from the hostname.

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p skein-broker \
 && install -D target/release/skein-broker /out/skein-broker

FROM debian:bookworm-slim
RUN groupadd --gid 65532 skein \
 && useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin skein \
 && mkdir -p /var/lib/skein /etc/skein \
 && chown 65532:65532 /var/lib/skein
COPY --from=build /out/skein-broker /usr/local/bin/skein-broker
USER 65532:65532
EXPOSE 9092 9644
VOLUME ["/var/lib/skein"]
ENTRYPOINT ["/usr/local/bin/skein-broker"]
CMD ["--data-dir", "/var/lib/skein", "--listen", "0.0.0.0:9092", "--metrics-listen", "0.0.0.0:9644"]
