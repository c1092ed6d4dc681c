//! Which processes are the script's: ours and every process below it (the interpreter, its
//! DataLoader workers, torchrun's ranks), told by walking parent links in `/proc`. Elsewhere
//! (no `/proc`) only our own process is known, and the script's share is not told apart.

/// How many parent links a walk follows: deeper trees than this are not the script's.
const MAX_DEPTH: usize = 64;

/// How far below `ancestor` `pid` is: 1 for a child (the script's interpreter, below
/// torchlint), 2 for a grandchild (its DataLoader workers), ...; `None` if it is not below.
pub fn depth_below(pid: u32, ancestor: u32) -> Option<usize> {
    let mut current = pid;
    for depth in 1..=MAX_DEPTH {
        match parent(current) {
            Some(parent) if parent == ancestor => return Some(depth),
            // Process 0 is the kernel's; 1 is init: the walk has left every tree of ours.
            Some(parent) if parent > 1 => current = parent,
            _ => return None,
        }
    }
    None
}

/// The parent of `pid`, from `/proc/<pid>/stat` (field 4; the command name before it, in
/// parentheses, may hold spaces and parentheses itself, so the fields are read after the last
/// `)`).
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let end = stat.iter().rposition(|&byte| byte == b')')?;
    let fields = std::str::from_utf8(&stat[end + 1..]).ok()?;
    fields.split_ascii_whitespace().nth(1)?.parse().ok()
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_one_below_us_its_child_two_and_we_are_not_below_them() {
        let ours = std::process::id();
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 5 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("sh runs");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let grandchild: u32 = line.trim().parse().unwrap();
        assert_eq!(depth_below(child.id(), ours), Some(1));
        assert_eq!(depth_below(grandchild, ours), Some(2));
        assert_eq!(depth_below(ours, child.id()), None);
        assert_eq!(depth_below(1, ours), None);
        let _ = std::process::Command::new("kill")
            .arg(grandchild.to_string())
            .status();
        let _ = child.wait();
    }
}
