use std::process::ExitCode;

// jemalloc where it builds and is known to be faster than the system allocator, as in Ruff.
#[cfg(all(
    not(target_os = "windows"),
    not(target_os = "openbsd"),
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    torchlint::cli::main()
}
