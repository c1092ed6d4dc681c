use std::process::ExitCode;

// The targets of the jemalloc dependencies in Cargo.toml.
#[cfg(all(
    not(target_os = "windows"),
    not(target_os = "openbsd"),
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod jemalloc;

fn main() -> ExitCode {
    #[cfg(all(
        not(target_os = "windows"),
        not(target_os = "openbsd"),
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    jemalloc::route_tree_sitter();
    torchlint::cli::main()
}
