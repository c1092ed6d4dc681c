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
    #[cfg(all(
        not(target_os = "windows"),
        not(target_os = "openbsd"),
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    // SAFETY: nothing has created a parser or tree yet, so nothing allocated by the C library
    // can be freed by the other allocator; the functions are jemalloc's C entry points.
    unsafe {
        tree_sitter::set_allocator(Some(tree_sitter::Allocator {
            malloc: tikv_jemalloc_sys::malloc,
            calloc: tikv_jemalloc_sys::calloc,
            realloc: tikv_jemalloc_sys::realloc,
            free: tikv_jemalloc_sys::free,
        }));
    }
    torchlint::cli::main()
}
