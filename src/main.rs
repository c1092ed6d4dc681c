use std::process::ExitCode;

fn main() -> ExitCode {
    torchlint::cli::main()
}
