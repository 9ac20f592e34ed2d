# skein-operator image. Build from the repository root:
#   docker build -f docker/operator.Dockerfile -t skein-operator .
# The operator needs no shell: a distroless runtime is enough.

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p skein-operator \
 && install -D target/release/skein-operator /out/skein-operator

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/skein-operator /usr/local/bin/skein-operator
USER 65532:65532
EXPOSE 9645
ENTRYPOINT ["/usr/local/bin/skein-operator"]
CMD ["kubernetes"]
