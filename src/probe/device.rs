//! The GPU, read without putting anything on it. A CUDA context costs about half a gigabyte of
//! the device (527 MiB on an H200), and a probe that held one would change what it measures:
//! a script at the edge of its memory would run out where it does not by itself.
//!
//! So the CUDA driver (loaded at run time through cudarc, so torchlint runs on machines without
//! CUDA) is asked only what it tells without a context: the device, its name, total memory and
//! UUID. Used memory comes from NVML, the library `nvidia-smi` reads (also loaded at run time),
//! which sees the whole device and each process on it, no context needed: the script's own
//! processes (DataLoader workers, torchrun ranks: every process below ours) are told apart from
//! everything else on the card. Where NVML is missing (some containers ship the driver without
//! it), the runner reads `torch.cuda.mem_get_info` inside the script's process instead, once the
//! script has a context of its own there ([`MemorySource::InProcess`]).

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use cudarc::driver::{result, sys};
use nvml_wrapper::Nvml;
use nvml_wrapper::enums::device::UsedGpuMemory;

use super::events::DeviceSample;
use super::now;
use super::processes;
use super::report::MemorySource;

pub struct Device {
    pub index: usize,
    pub name: String,
    pub total: u64,
    /// Used memory on the whole device before the script starts (NVML only).
    pub used_before: Option<u64>,
    pub source: MemorySource,
    nvml: Option<Arc<NvmlDevice>>,
}

/// NVML and the device's UUID, which names the same GPU whatever order CUDA and NVML list
/// devices in (CUDA puts the fastest first; `CUDA_VISIBLE_DEVICES` renumbers).
struct NvmlDevice {
    nvml: Nvml,
    uuid: String,
}

impl Device {
    /// Opens GPU `index` (an index among the devices the CUDA driver lists), or says why not.
    pub fn open(index: usize) -> Result<Device, String> {
        // cudarc panics when a symbol is missing from an old driver; that is a "no" here.
        let driver =
            catch_unwind(AssertUnwindSafe(|| driver_facts(index))).unwrap_or_else(|_| {
                Err("the CUDA driver library lacks functions torchlint needs".into())
            })?;
        Ok(Device::with_nvml(
            index,
            driver,
            open_nvml(std::env::var_os("TORCHLINT_NVML_LIBRARY")),
        ))
    }

    /// The device as the driver describes it, read through NVML when it opened.
    fn with_nvml(index: usize, driver: DriverFacts, nvml: Result<Nvml, String>) -> Device {
        let opened = nvml.and_then(|nvml| {
            let used = nvml
                .device_by_uuid(driver.uuid.as_str())
                .and_then(|device| device.memory_info())
                .map_err(|error| {
                    format!("NVML cannot read GPU {} ({}): {error}", index, driver.uuid)
                })?
                .used;
            Ok((
                NvmlDevice {
                    nvml,
                    uuid: driver.uuid.clone(),
                },
                used,
            ))
        });
        let (source, used_before, nvml) = match opened {
            Ok((nvml, used)) => (MemorySource::Nvml, Some(used), Some(Arc::new(nvml))),
            Err(why) => (MemorySource::InProcess { why }, None, None),
        };
        Device {
            index,
            name: driver.name,
            total: driver.total,
            used_before,
            source,
            nvml,
        }
    }

    /// Starts sampling used memory every `every` until the returned sampler is stopped. Without
    /// NVML there is nothing to sample from here: the runner's samples carry the readings.
    pub fn sample(&self, every: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let held = Arc::new(Mutex::new(BTreeMap::new()));
        let thread = self.nvml.as_ref().map(|nvml| {
            let (nvml, stop, samples) = (Arc::clone(nvml), Arc::clone(&stop), Arc::clone(&samples));
            let held = Arc::clone(&held);
            std::thread::spawn(move || {
                let Ok(device) = nvml.nvml.device_by_uuid(nvml.uuid.as_str()) else {
                    return;
                };
                let ours = std::process::id();
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(memory) = device.memory_info() {
                        let mut sample = DeviceSample {
                            t: now(),
                            used: memory.used,
                            script: None,
                            probe: None,
                            workers: None,
                            worker_processes: None,
                        };
                        if let Ok(processes) = device.running_compute_processes() {
                            let (mut script, mut probe) = (0, 0);
                            let (mut workers, mut worker_processes) = (0, 0);
                            for process in processes {
                                let UsedGpuMemory::Used(bytes) = process.used_gpu_memory else {
                                    continue;
                                };
                                if process.pid == ours {
                                    probe += bytes;
                                    continue;
                                }
                                let Some(depth) = processes::depth_below(process.pid, ours) else {
                                    continue;
                                };
                                script += bytes;
                                let mut held = held.lock().unwrap();
                                let most = held.entry(process.pid).or_insert(0);
                                *most = (*most).max(bytes);
                                // The interpreter is our child; what it starts is below it.
                                if depth > 1 {
                                    workers += bytes;
                                    worker_processes += 1;
                                }
                            }
                            sample.script = Some(script);
                            sample.probe = Some(probe);
                            sample.workers = Some(workers);
                            sample.worker_processes = Some(worker_processes);
                        }
                        samples.lock().unwrap().push(sample);
                    }
                    std::thread::sleep(every);
                }
            })
        });
        Sampler {
            stop,
            samples,
            held,
            thread,
        }
    }
}

/// How many GPUs the CUDA driver lists (none without a driver), asked without a context: a
/// distributed job's ranks may compute on any of them.
pub fn count() -> usize {
    catch_unwind(driver_count)
        .ok()
        .and_then(Result::ok)
        .unwrap_or(0)
}

/// Loads the driver (`cuInit`: no context, no device memory) and asks how many GPUs it lists.
fn driver_count() -> Result<usize, String> {
    // SAFETY: only asks whether the library can be loaded.
    if !unsafe { sys::is_culib_present() } {
        return Err("no CUDA driver library (libcuda.so) on this machine".into());
    }
    result::init().map_err(|error| format!("the CUDA driver did not initialise: {error}"))?;
    let count = result::device::get_count().map_err(|error| error.to_string())?;
    Ok(count.max(0) as usize)
}

/// What the CUDA driver tells of a device without a context.
struct DriverFacts {
    name: String,
    total: u64,
    /// As NVML spells it: `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
    uuid: String,
}

fn driver_facts(index: usize) -> Result<DriverFacts, String> {
    let count = driver_count()?;
    if count == 0 {
        return Err("the CUDA driver lists no GPU".into());
    }
    if index >= count {
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
    let uuid = result::device::get_uuid(device).map_err(|error| error.to_string())?;
    Ok(DriverFacts {
        name,
        total: total as u64,
        uuid: nvml_uuid(&uuid.bytes.map(|byte| byte as u8)),
    })
}

/// The 16 bytes of a CUDA UUID as NVML names the device.
fn nvml_uuid(bytes: &[u8; 16]) -> String {
    let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// NVML, from `TORCHLINT_NVML_LIBRARY` when set (a driver installed outside the library path),
/// else the driver's `libnvidia-ml.so.1`.
fn open_nvml(custom: Option<std::ffi::OsString>) -> Result<Nvml, String> {
    let opened = catch_unwind(AssertUnwindSafe(|| match &custom {
        Some(path) => Nvml::builder().lib_path(path).init(),
        None => Nvml::init(),
    }));
    match opened {
        Ok(Ok(nvml)) => Ok(nvml),
        Ok(Err(error)) => Err(match custom {
            Some(path) => format!(
                "NVML did not load from TORCHLINT_NVML_LIBRARY={}: {error}",
                std::path::Path::new(&path).display()
            ),
            None => format!("NVML (libnvidia-ml.so.1) did not load: {error}"),
        }),
        Err(_) => Err("NVML lacks functions torchlint needs".into()),
    }
}

pub struct Sampler {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<DeviceSample>>>,
    held: Arc<Mutex<BTreeMap<u32, u64>>>,
    thread: Option<JoinHandle<()>>,
}

/// What a sampler saw of its device.
#[derive(Default)]
pub struct Sampled {
    /// The device's timeline.
    pub samples: Vec<DeviceSample>,
    /// The most each of the script's processes (by pid) held of the device at once, as NVML
    /// counts it: a rank's process on a device other than its own is memory that rank put
    /// there (a `torch.load` without `map_location` on every rank lands on GPU 0).
    pub held: BTreeMap<u32, u64>,
}

impl Sampler {
    pub fn finish(mut self) -> Sampled {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        Sampled {
            samples: std::mem::take(&mut *self.samples.lock().unwrap()),
            held: std::mem::take(&mut *self.held.lock().unwrap()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn driver() -> DriverFacts {
        DriverFacts {
            name: "NVIDIA H200".to_owned(),
            total: 141 << 30,
            uuid: "GPU-00000000-0000-0000-0000-000000000000".to_owned(),
        }
    }

    #[test]
    fn without_nvml_the_script_reads_the_device_and_says_why() {
        let device = Device::with_nvml(
            0,
            driver(),
            Err("NVML (libnvidia-ml.so.1) did not load".to_owned()),
        );
        assert_eq!(device.used_before, None);
        assert_eq!(
            device.source,
            MemorySource::InProcess {
                why: "NVML (libnvidia-ml.so.1) did not load".to_owned()
            }
        );
        assert!(
            device
                .source
                .describe()
                .contains("inside the script's process")
        );
        // Nothing to sample from outside: no thread, no samples.
        let sampled = device.sample(Duration::from_millis(1)).finish();
        assert!(sampled.samples.is_empty() && sampled.held.is_empty());
    }

    #[test]
    fn a_missing_nvml_library_is_a_reason_not_a_crash() {
        let Err(why) = open_nvml(Some("/nonexistent/libnvidia-ml.so.1".into())) else {
            panic!("no NVML at that path");
        };
        assert!(
            why.contains("TORCHLINT_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1"),
            "{why}"
        );
    }

    #[test]
    fn cuda_uuids_are_spelled_as_nvml_names_devices() {
        let bytes: [u8; 16] = core::array::from_fn(|i| (i * 17) as u8);
        assert_eq!(
            nvml_uuid(&bytes),
            "GPU-00112233-4455-6677-8899-aabbccddeeff"
        );
    }
}
