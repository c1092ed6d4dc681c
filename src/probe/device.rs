//! The GPU as the CUDA driver sees it: name, total memory, and used memory sampled through the
//! run. The driver library is loaded at run time (cudarc's dynamic loading), so torchlint builds
//! and runs on machines without CUDA; there it reports why and the probe runs in CPU mode.
//!
//! Used memory comes from `cuMemGetInfo` on the device: everything on it, including what
//! PyTorch's own counters miss (CUDA contexts, cuDNN/cuBLAS workspaces, NCCL, other libraries,
//! other processes). Reading it needs a context of our own on the device; its cost is part of
//! the `used_before` baseline, so deltas exclude it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use cudarc::driver::{result, sys};

use super::events::DeviceSample;
use super::now;

pub struct Device {
    pub index: usize,
    pub name: String,
    pub total: u64,
    pub used_before: u64,
    context: Context,
}

/// The device's primary context, held for as long as we sample.
struct Context {
    device: sys::CUdevice,
    raw: sys::CUcontext,
}

// The context handle is only a token the driver hands back; it may be made current on any
// thread (that is how the sampler uses it).
unsafe impl Send for Context {}
unsafe impl Sync for Context {}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: the context was retained by `open` and is released once, here.
        unsafe {
            let _ = result::primary_ctx::release(self.device);
        }
    }
}

impl Device {
    /// Opens GPU `index` (an index among the devices the driver lists), or says why not.
    pub fn open(index: usize) -> Result<Device, String> {
        // cudarc panics when a symbol is missing from an old driver; that is a "no" here.
        catch_unwind(AssertUnwindSafe(|| open(index))).unwrap_or_else(|_| {
            Err("the CUDA driver library lacks functions torchlint needs".into())
        })
    }

    /// Starts sampling used memory every `every` until the returned sampler is stopped.
    pub fn sample(self: &Arc<Self>, every: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let thread = {
            let (device, stop, samples) =
                (Arc::clone(self), Arc::clone(&stop), Arc::clone(&samples));
            std::thread::spawn(move || {
                // SAFETY: the context stays alive while `device` (an Arc) is held by this thread.
                if unsafe { result::ctx::set_current(device.context.raw) }.is_err() {
                    return;
                }
                while !stop.load(Ordering::Relaxed) {
                    if let Ok((free, total)) = result::mem_get_info() {
                        let used = (total - free) as u64;
                        samples
                            .lock()
                            .unwrap()
                            .push(DeviceSample { t: now(), used });
                    }
                    std::thread::sleep(every);
                }
            })
        };
        Sampler {
            stop,
            samples,
            thread: Some(thread),
        }
    }
}

fn open(index: usize) -> Result<Device, String> {
    // SAFETY: only asks whether the library can be loaded.
    if !unsafe { sys::is_culib_present() } {
        return Err("no CUDA driver library (libcuda.so) on this machine".into());
    }
    result::init().map_err(|error| format!("the CUDA driver did not initialise: {error}"))?;
    let count = result::device::get_count().map_err(|error| error.to_string())?;
    if count == 0 {
        return Err("the CUDA driver lists no GPU".into());
    }
    if index >= count as usize {
        return Err(format!(
            "--gpu {index}: the CUDA driver lists {count} GPU{} (0..{})",
            if count == 1 { "" } else { "s" },
            count - 1
        ));
    }
    let device = result::device::get(index as i32).map_err(|error| error.to_string())?;
    let name = result::device::get_name(device).map_err(|error| error.to_string())?;
    // SAFETY: `device` is a valid handle from `get`.
    let total = unsafe { result::device::total_mem(device) }.map_err(|error| error.to_string())?;
    // SAFETY: as above; released by `Context::drop`.
    let raw = unsafe { result::primary_ctx::retain(device) }.map_err(|error| error.to_string())?;
    let context = Context { device, raw };
    // SAFETY: the context was just retained.
    unsafe { result::ctx::set_current(context.raw) }.map_err(|error| error.to_string())?;
    let (free, total_now) = result::mem_get_info().map_err(|error| error.to_string())?;
    Ok(Device {
        index,
        name,
        total: total as u64,
        used_before: (total_now - free) as u64,
        context,
    })
}

pub struct Sampler {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<DeviceSample>>>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    pub fn finish(mut self) -> Vec<DeviceSample> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        std::mem::take(&mut *self.samples.lock().unwrap())
    }
}
