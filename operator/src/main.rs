fn main() {
    eprintln!("skein-operator: not implemented yet; run `skein-broker` for a single-node cluster");
    std::process::exit(2);
}
