//! The launcher command line a user already runs (`torchrun --nproc-per-node 2 train.py
//! --lr 3e-4`, or `python -m torch.distributed.run ...`), split into the launcher with its
//! options, the training script and the script's arguments, so that the probe can run the
//! same job with its runner in the script's place.

use std::path::PathBuf;

/// A launcher command line, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launcher {
    /// The launcher and its options: everything before the training script.
    pub command: Vec<String>,
    pub script: PathBuf,
    pub script_args: Vec<String>,
    /// `--nproc-per-node` when it is a number (`gpu` and `auto` are decided by the launcher).
    pub nproc_per_node: Option<usize>,
}

/// torchrun's options that take no value: every other option takes one, as `--opt value` or
/// `--opt=value`, so the first word that is neither is the training script.
const FLAGS: &[&str] = &[
    "--standalone",
    "--no-python",
    "--no_python",
    "--run-path",
    "--run_path",
    "--virtual-local-rank",
    "--virtual_local_rank",
    "-h",
    "--help",
];

/// Splits `words` (what follows `torchlint probe --`) when it starts with a launcher: the
/// `torchrun` program (any path to it), or an interpreter followed by `-m torch.distributed.run`
/// (or the older `torch.distributed.launch`). None when it does not.
pub fn parse(words: &[String]) -> Option<Result<Launcher, String>> {
    let first = words.first()?;
    let program = std::path::Path::new(first)
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or_default();
    let options_start = if program == "torchrun" {
        1
    } else if words.get(1).map(String::as_str) == Some("-m")
        && matches!(
            words.get(2).map(String::as_str),
            Some("torch.distributed.run" | "torch.distributed.launch")
        )
    {
        3
    } else {
        return None;
    };
    Some(split(words, options_start))
}

fn split(words: &[String], options_start: usize) -> Result<Launcher, String> {
    let mut nproc_per_node = None;
    let mut index = options_start;
    while let Some(word) = words.get(index) {
        if !word.starts_with('-') {
            break;
        }
        if matches!(word.as_str(), "-m" | "--module") {
            return Err(format!(
                "`{word}`: the probe runs a training script by its path, not a module (`torchrun train.py`, not `torchrun -m train`)"
            ));
        }
        if matches!(word.as_str(), "--no-python" | "--no_python") {
            return Err(format!(
                "`{word}`: the probe runs each rank's script with Python, so it needs the launcher to start Python"
            ));
        }
        let (name, value) = match word.split_once('=') {
            Some((name, value)) => (name, Some(value.to_owned())),
            None if FLAGS.contains(&word.as_str()) => (word.as_str(), None),
            None => {
                index += 1;
                let value = words
                    .get(index)
                    .ok_or_else(|| format!("`{word}` needs a value"))?;
                (word.as_str(), Some(value.clone()))
            }
        };
        if matches!(name, "--nproc-per-node" | "--nproc_per_node") {
            nproc_per_node = value.as_deref().and_then(|n| n.parse().ok());
        }
        index += 1;
    }
    let script = words
        .get(index)
        .ok_or("the launcher's command line names no training script")?;
    Ok(Launcher {
        command: words[..index].to_vec(),
        script: PathBuf::from(script),
        script_args: words[index + 1..].to_vec(),
        nproc_per_node,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    fn launcher(line: &str) -> Launcher {
        parse(&words(line))
            .expect("a launcher")
            .unwrap_or_else(|error| panic!("{line}: {error}"))
    }

    #[test]
    fn torchrun_options_with_values_flags_and_equals_signs() {
        let job = launcher(
            "torchrun --standalone --nnodes 1 --nproc_per_node=4 --rdzv-backend c10d train.py --lr 3e-4 --epochs 2",
        );
        assert_eq!(
            job.command,
            words("torchrun --standalone --nnodes 1 --nproc_per_node=4 --rdzv-backend c10d")
        );
        assert_eq!(job.script, PathBuf::from("train.py"));
        assert_eq!(job.script_args, words("--lr 3e-4 --epochs 2"));
        assert_eq!(job.nproc_per_node, Some(4));
    }

    #[test]
    fn python_dash_m_and_a_path_to_torchrun() {
        let job = launcher("/opt/venv/bin/python -m torch.distributed.run --nproc-per-node 2 a.py");
        assert_eq!(
            job.command,
            words("/opt/venv/bin/python -m torch.distributed.run --nproc-per-node 2")
        );
        assert_eq!(job.nproc_per_node, Some(2));
        let job = launcher("/opt/venv/bin/torchrun --nproc-per-node gpu a.py x");
        assert_eq!(job.nproc_per_node, None, "decided by the launcher");
        assert_eq!(job.script_args, words("x"));
    }

    #[test]
    fn not_a_launcher_or_not_a_script() {
        assert!(parse(&words("python train.py")).is_none());
        assert!(parse(&[]).is_none());
        let error = parse(&words("torchrun -m train")).unwrap().unwrap_err();
        assert!(error.contains("not a module"), "{error}");
        let error = parse(&words("torchrun --no-python train.sh"))
            .unwrap()
            .unwrap_err();
        assert!(
            error.contains("needs the launcher to start Python"),
            "{error}"
        );
        let error = parse(&words("torchrun --nnodes 1")).unwrap().unwrap_err();
        assert!(error.contains("names no training script"), "{error}");
    }
}
