//! The files torchlint reads for itself (config files, rule packs, the cache, baselines, stdin)
//! and the files it writes (reports, baselines). A repository can commit a FIFO or a link to
//! `/dev/zero` where a config or a cache belongs, and CI often runs as root, where renaming a
//! report over `/dev/full` replaces the device: so reads take regular files only, each up to a
//! limit, and a write replaces only a regular file (anything else it may write is written in
//! place).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// The most a config file or a rule file may hold.
pub const MAX_CONFIG_BYTES: u64 = 4 << 20;
/// The most a baseline or the result cache may hold.
pub const MAX_RECORD_BYTES: u64 = 1 << 30;

/// Reads a regular file of at most `limit` bytes. A FIFO, a device, a socket or a folder is an
/// error (without opening it for long: a FIFO with no writer would block `open` for ever).
pub fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let mut file = open_regular(path)?;
    read_limited(&mut file, limit)
}

/// [`read_regular`] as text.
pub fn read_regular_to_string(path: &Path, limit: u64) -> io::Result<String> {
    String::from_utf8(read_regular(path, limit)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "it is not valid UTF-8"))
}

/// Opens a file for reading if it is a regular file. `O_NONBLOCK` makes opening a FIFO return
/// at once; the file's type is then checked on the open file, so it cannot change in between.
fn open_regular(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}, not a regular file", describe_kind(&kind)),
        ));
    }
    Ok(file)
}

/// Reads at most `limit` bytes; more is an error that says the limit.
pub fn read_limited(input: &mut impl Read, limit: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    input.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("larger than torchlint reads ({})", human_size(limit)),
        ));
    }
    Ok(bytes)
}

/// What a file that is not a regular file is, in words.
pub fn describe_kind(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
    }
    if kind.is_dir() {
        "a folder"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else {
        "a special file"
    }
}

pub fn human_size(bytes: u64) -> String {
    if bytes >= 1 << 30 && bytes.is_multiple_of(1 << 30) {
        format!("{} GiB", bytes >> 30)
    } else if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

/// Writes a report or a baseline. A regular file (or a missing one) has its content replaced all
/// at once: the bytes go to a new file beside it, renamed over it only when complete, so a
/// failed run never leaves half a report; it keeps the old file's permissions, and a symlink
/// keeps pointing at it. A character device or a FIFO (`/dev/stdout`, `/dev/null`, a pipe to
/// another program) is written in place: renaming over it would replace it. A folder, a socket
/// or a block device is an error.
pub fn write_output(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let target = resolve_symlinks(path)?;
    match std::fs::metadata(&target) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => replace(&target, bytes),
        Err(error) => Err(error),
        Ok(metadata) if metadata.is_file() => replace(&target, bytes),
        Ok(metadata) if is_stream(&metadata.file_type()) => {
            let mut file = OpenOptions::new().write(true).open(&target)?;
            file.write_all(bytes)?;
            file.flush()
        }
        Ok(metadata) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "it is {}; name a regular file, or a character device or FIFO to write to",
                describe_kind(&metadata.file_type())
            ),
        )),
    }
}

/// A file written to in place: a character device or a FIFO.
fn is_stream(kind: &std::fs::FileType) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        kind.is_char_device() || kind.is_fifo()
    }
    #[cfg(not(unix))]
    {
        let _ = kind;
        false
    }
}

fn replace(target: &Path, bytes: &[u8]) -> io::Result<()> {
    let folder = target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    let temporary = folder.join(format!(".{name}.{}.torchlint-tmp", std::process::id()));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)?;
        file.write_all(bytes)?;
        if let Ok(existing) = std::fs::metadata(target) {
            file.set_permissions(existing.permissions())?;
        }
        file.sync_all()?;
        std::fs::rename(&temporary, target)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result
}

/// The file a path finally names, following symlinks (also dangling ones).
fn resolve_symlinks(path: &Path) -> io::Result<PathBuf> {
    let mut current = path.to_owned();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&current) {
            Ok(metadata) if metadata.file_type().is_symlink() => {
                let link = std::fs::read_link(&current)?;
                current = match current.parent() {
                    Some(parent) if link.is_relative() => parent.join(link),
                    _ => link,
                };
            }
            _ => return Ok(current),
        }
    }
    Err(io::Error::other("too many levels of symbolic links"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_past_the_limit_says_the_limit() {
        let error = read_limited(&mut io::repeat(0), 1 << 20).unwrap_err();
        assert_eq!(error.to_string(), "larger than torchlint reads (1 MiB)");
        assert_eq!(read_limited(&mut &b"abc"[..], 3).unwrap(), b"abc");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let folder = tempfile::tempdir().unwrap();
        let fifo = folder.path().join("pipe");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o644) }, 0);
        let error = read_regular(&fifo, 10).unwrap_err();
        assert_eq!(error.to_string(), "a FIFO (named pipe), not a regular file");
    }
}
