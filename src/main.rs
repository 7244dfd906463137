//! The `sluice` executable: the CLI face (the Lambda face joins it when
//! `AWS_LAMBDA_RUNTIME_API` is set).

fn main() {
    std::process::exit(sluice::cli::main());
}
