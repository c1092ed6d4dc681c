//! jemalloc for Rust's allocations and for tree-sitter's, on the targets where Ruff uses it
//! (main.rs names them): the semantic model allocates many small maps and vectors per file,
//! and the parser a node per token.

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Routes tree-sitter's C allocations to jemalloc. Call it before anything creates a parser
/// or a tree.
pub fn route_tree_sitter() {
    // SAFETY: called first thing in `main`, so nothing allocated by the C library can be freed
    // by the other allocator; the functions are jemalloc's C entry points.
    unsafe {
        tree_sitter::set_allocator(Some(tree_sitter::Allocator {
            malloc: tikv_jemalloc_sys::malloc,
            calloc: tikv_jemalloc_sys::calloc,
            realloc: tikv_jemalloc_sys::realloc,
            free: tikv_jemalloc_sys::free,
        }));
    }
}
