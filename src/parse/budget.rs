//! How long one parse may take. tree-sitter-python's external scanner is quadratic on some
//! inputs (200 KB of backslash continuations take over a minute), and a parse that long
//! would stall the whole run, or the editor's server thread, on one file.
//!
//! The budget is CPU time of the parsing thread, not wall time, so that a loaded machine (a
//! CI runner, every core busy) does not push ordinary files over it. The numbers: ordinary
//! code parses at about 0.3 ms of CPU per KB in a release build and 0.5 ms in a debug build
//! (the 50 MB file of the tests: about 25 s in debug), so [`PER_KB`] leaves eight times that
//! and [`BASE`] covers small files on a slow machine. A 200 KB file gets 2.8 s.

use std::time::{Duration, Instant};

/// What every file may take, whatever its size.
pub const BASE: Duration = Duration::from_secs(2);
/// What each KB of text adds.
pub const PER_KB: Duration = Duration::from_millis(4);

/// The parse budget of a text of `len` bytes.
pub fn for_len(len: usize) -> Duration {
    let kilobytes = u32::try_from(len / 1024).unwrap_or(u32::MAX);
    BASE.saturating_add(PER_KB.saturating_mul(kilobytes))
}

/// The parsing thread's CPU time since the clock was started.
pub struct CpuClock {
    started: Duration,
    /// Wall time bounds a thread's CPU time from above, and reading it costs no system call
    /// (reading a thread's CPU clock does: 2% of a whole run, asked every hundred parse
    /// operations), so the CPU clock is read only once this much wall time has passed.
    started_wall: Instant,
}

impl CpuClock {
    pub fn start() -> Self {
        CpuClock {
            started: now(),
            started_wall: Instant::now(),
        }
    }

    pub fn elapsed(&self) -> Duration {
        now().saturating_sub(self.started)
    }

    /// Whether more than `budget` of CPU time passed since the start.
    pub fn past(&self, budget: Duration) -> bool {
        self.started_wall.elapsed() > budget && self.elapsed() > budget
    }
}

#[cfg(unix)]
fn now() -> Duration {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `time` is a valid timespec to write to; the thread CPU clock always exists.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut time) };
    if status != 0 {
        return Duration::ZERO;
    }
    Duration::new(time.tv_sec as u64, time.tv_nsec as u32)
}

/// Without a thread CPU clock, wall time since the first call stands in (it only runs longer).
#[cfg(not(unix))]
fn now() -> Duration {
    static EPOCH: std::sync::LazyLock<std::time::Instant> =
        std::sync::LazyLock::new(std::time::Instant::now);
    EPOCH.elapsed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_grows_with_the_text() {
        assert_eq!(for_len(0), BASE);
        assert_eq!(for_len(200 * 1024), Duration::from_millis(2800));
        assert_eq!(for_len(50 << 20), Duration::from_millis(2000 + 4 * 51_200));
    }

    #[test]
    fn cpu_clock_advances_with_work() {
        let clock = CpuClock::start();
        let mut sum = 0u64;
        for i in 0..20_000_000u64 {
            sum = sum.wrapping_add(std::hint::black_box(i));
        }
        std::hint::black_box(sum);
        assert!(clock.elapsed() > Duration::ZERO);
    }

    #[test]
    fn past_a_budget_only_once_the_cpu_time_is_spent() {
        let clock = CpuClock::start();
        assert!(!clock.past(Duration::from_secs(60)));
        let mut sum = 0u64;
        while clock.elapsed() < Duration::from_millis(5) {
            for i in 0..100_000u64 {
                sum = sum.wrapping_add(std::hint::black_box(i));
            }
        }
        std::hint::black_box(sum);
        assert!(clock.past(Duration::from_millis(2)));
        assert!(!clock.past(Duration::from_secs(60)));
    }
}
