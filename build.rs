//! Compiles the rule packs in `rules/` into the binary: each `rules/<pack>/<rule>.md` becomes an
//! entry of `BUILTIN_RULE_FILES`, so adding a rule never means editing a list.

use std::fs;
use std::path::Path;

fn main() {
    compile_node_children();
    println!("cargo:rerun-if-changed=rules");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    let mut packs: Vec<_> = fs::read_dir(root.join("rules"))
        .expect("the rules/ folder exists")
        .map(|entry| entry.expect("rules/ is readable").path())
        .filter(|path| path.is_dir())
        .collect();
    packs.sort();
    for pack in packs {
        println!("cargo:rerun-if-changed={}", pack.display());
        let mut rules: Vec<_> = fs::read_dir(&pack)
            .expect("a pack folder is readable")
            .map(|entry| entry.expect("a pack folder is readable").path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
            .collect();
        rules.sort();
        for rule in rules {
            let relative = rule
                .strip_prefix(root)
                .unwrap()
                .to_str()
                .unwrap()
                .replace('\\', "/");
            files.push(format!(
                "    ({relative:?}, include_str!({:?})),\n",
                rule.to_str().unwrap()
            ));
        }
    }
    let out = Path::new(&std::env::var("OUT_DIR").unwrap()).join("builtin_rules.rs");
    let code = format!(
        "/// `(path, text)` of every rule file under `rules/`, sorted by path.\npub static BUILTIN_RULE_FILES: &[(&str, &str)] = &[\n{}];\n",
        files.concat()
    );
    fs::write(out, code).unwrap();
}

/// Compiles `src/node_children.c` against the private headers of the tree-sitter release we
/// link: its build script publishes `include/`, and the sources sit beside it in `src/`.
fn compile_node_children() {
    println!("cargo:rerun-if-changed=src/syntax/build.c");
    let include = std::path::PathBuf::from(
        std::env::var("DEP_TREE_SITTER_INCLUDE").expect("tree-sitter publishes its include folder"),
    );
    let private = include.join("../src");
    cc::Build::new()
        .file("src/syntax/build.c")
        .include(&include)
        .include(&private)
        .std("c11")
        .warnings(true)
        .compile("torchlint_node_children");
}
