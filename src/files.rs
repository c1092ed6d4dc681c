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
/// The most torchlint reads from stdin.
pub const MAX_STDIN_BYTES: u64 = 256 << 20;
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
    input
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("larger than torchlint reads ({})", human_size(limit)),
        ));
    }
    Ok(bytes)
}

/// Reads Python source or a notebook from a stream (stdin) up to `limit` bytes, stopping at the
/// first NUL byte: source cannot hold one, and `/dev/zero` would otherwise fill memory up to
/// the limit first.
pub fn read_source_stream(input: &mut impl Read, limit: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let mut chunk = vec![0; 64 << 10];
    loop {
        let read = match input.read(&mut chunk) {
            Ok(0) => return Ok(bytes),
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        if let Some(at) = memchr::memchr(0, &chunk[..read]) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "it looks binary (NUL byte at offset {}), and Python source cannot contain NUL bytes",
                    bytes.len() + at
                ),
            ));
        }
        bytes.extend_from_slice(&chunk[..read]);
        if bytes.len() as u64 > limit {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                format!("larger than torchlint reads ({})", human_size(limit)),
            ));
        }
    }
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
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            replace(&target, bytes, Durability::Synced)
        }
        Err(error) => Err(error),
        Ok(metadata) if metadata.is_file() => replace(&target, bytes, Durability::Synced),
        Ok(metadata) if is_stream(&metadata.file_type()) => {
            let mut file = open_stream(&target)?;
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

/// Opens a device or a FIFO for writing. A FIFO no program reads would block `open` for
/// ever: opened without blocking, it is an error at once instead.
fn open_stream(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        use std::os::unix::io::AsRawFd;
        options.custom_flags(libc::O_NONBLOCK);
        let file = options.open(path).map_err(|error| {
            if error.raw_os_error() == Some(libc::ENXIO) {
                io::Error::new(error.kind(), "it is a FIFO that no program reads")
            } else {
                error
            }
        })?;
        // Writes block again, as for any file: a slow reader must not lose part of the report.
        // SAFETY: fcntl on a descriptor this function owns.
        unsafe {
            let flags = libc::fcntl(file.as_raw_fd(), libc::F_GETFL);
            if flags == -1
                || libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) == -1
            {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(file)
    }
    #[cfg(not(unix))]
    options.open(path)
}

/// Set by the binary when stdout was closed at start (`>&-`).
pub static STDOUT_CLOSED_AT_START: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Writes the report to stdout. With stdout closed (`>&-`), Rust's runtime puts `/dev/null` in
/// its place, or its writes are dropped: either loses the report with a success status, so it
/// is an error.
pub fn write_stdout(bytes: &[u8]) -> io::Result<()> {
    let closed = STDOUT_CLOSED_AT_START.load(std::sync::atomic::Ordering::Relaxed);
    #[cfg(unix)]
    // SAFETY: F_GETFD only asks whether descriptor 1 is open.
    let closed = closed || unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_GETFD) } == -1;
    if closed {
        return Err(io::Error::new(io::ErrorKind::NotConnected, "it is closed"));
    }
    let mut stdout = io::stdout().lock();
    stdout.write_all(bytes)?;
    stdout.flush()
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

/// Whether [`replace`] waits for the new content to reach the disk before the rename: a
/// report must survive a crash whole; a cache is rebuilt if it does not.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    Synced,
    Unsynced,
}

/// Writes a new file beside `target` and renames it over `target`: readers see the old content
/// or the new, never a mix, whichever writer renames last. The new file keeps the old one's
/// permissions; a file created afresh gets the usual ones (0666 less the umask), not the
/// private ones of a temporary file.
pub fn replace(target: &Path, bytes: &[u8], durability: Durability) -> io::Result<()> {
    let folder = target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut builder = tempfile::Builder::new();
    builder.prefix(".torchlint-tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut temporary = builder.tempfile_in(folder).map_err(without_path)?;
    // Through the file itself: the temporary's own `Write` adds its path to errors.
    temporary.as_file_mut().write_all(bytes)?;
    if let Ok(existing) = std::fs::metadata(target) {
        temporary
            .as_file()
            .set_permissions(existing.permissions())?;
    }
    if durability == Durability::Synced {
        temporary.as_file().sync_all()?;
    }
    temporary.persist(target).map_err(|error| error.error)?;
    Ok(())
}

/// An error of `tempfile` without the path of its temporary file, which it appends as
/// `... at path "..."` (its annotation gives no other way to the OS error beneath): a name the
/// user never chose, which a message about their file should not show.
fn without_path(error: io::Error) -> io::Error {
    let message = error.to_string();
    match message.rfind(" at path ") {
        Some(at) if error.get_ref().is_some() => {
            io::Error::new(error.kind(), message[..at].to_owned())
        }
        _ => error,
    }
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
