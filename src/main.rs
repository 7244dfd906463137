//! The `sluice` executable: the CLI face (the Lambda face joins it when
//! `AWS_LAMBDA_RUNTIME_API` is set).

fn main() {
    sluice::allocator::tune();
    // Several crates enable rustls crypto providers; pin one process-wide so any TLS
    // client built without an explicit provider uses ring too.
    let _ = rustls::crypto::ring::default_provider().install_default();
    std::process::exit(sluice::cli::main());
}
