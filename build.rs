//! Compiles the rule packs in `rules/` into the binary: each `rules/<pack>/<rule>.md` becomes an
//! entry of `BUILTIN_RULE_FILES`, so adding a rule never means editing a list.

use std::fs;
use std::path::Path;

fn main() {
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
