//! Generates the control-plane gRPC code from `control.proto`. protox parses
//! the proto in Rust, so no `protoc` is needed on the build machine.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = "proto";
    let proto = "skein/control/v1/control.proto";
    println!("cargo:rerun-if-changed={root}/{proto}");
    let descriptors = protox::compile([proto], [root])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}
