use std::process::ExitCode;

// The targets of the jemalloc dependencies in Cargo.toml.
#[cfg(all(
    not(target_os = "windows"),
    not(target_os = "openbsd"),
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod jemalloc;

/// Whether stdout was closed when the process started (`torchlint >&-`), asked before Rust's
/// runtime opens `/dev/null` over a closed descriptor, after which a report written to stdout
/// would vanish with a success status. Runs from `.init_array`, before `main`.
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static NOTE_CLOSED_STDOUT: extern "C" fn() = {
    extern "C" fn note() {
        // SAFETY: F_GETFD only asks whether descriptor 1 is open.
        if unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_GETFD) } == -1 {
            torchlint::files::STDOUT_CLOSED_AT_START
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    note
};

fn main() -> ExitCode {
    #[cfg(all(
        not(target_os = "windows"),
        not(target_os = "openbsd"),
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    jemalloc::route_tree_sitter();
    torchlint::cli::main()
}
