//! A [`PmemSim`] that, at every fence (a persistence point), first takes the images a crash
//! right there may leave: all of them when few, else seeded draws.

use intactfs_device::{PmemCounters, PmemDevice, PmemError, PmemSim};

/// A crash image and where it came from.
pub struct Image {
    /// Crash points (fences) seen by this probe before this one.
    pub point: u64,
    pub bytes: Vec<u8>,
    pub description: String,
}

pub struct Probe {
    pub sim: PmemSim,
    pub capture: bool,
    pub images: Vec<Image>,
    pub points: u64,
    /// Points where every allowed image was taken.
    pub exhaustive_points: u64,
    pub per_point: u64,
    pub exhaustive_max: usize,
    pub seed: u64,
}

impl Probe {
    pub fn new(sim: PmemSim, seed: u64, per_point: u64, exhaustive_max: usize) -> Probe {
        Probe {
            sim,
            capture: false,
            images: Vec::new(),
            points: 0,
            exhaustive_points: 0,
            per_point,
            exhaustive_max,
            seed,
        }
    }

    /// Takes the images a crash now may leave.
    pub fn snap(&mut self) {
        let point = self.points;
        self.points += 1;
        if self.sim.image_count() <= self.exhaustive_max as u128 {
            if let Some(all) = self.sim.all_images(self.exhaustive_max) {
                self.exhaustive_points += 1;
                let n = all.len();
                for (k, bytes) in all.into_iter().enumerate() {
                    self.images.push(Image {
                        point,
                        bytes,
                        description: format!("image {k} of all {n}"),
                    });
                }
                return;
            }
        }
        for k in 0..self.per_point {
            let s = self.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)
                ^ point.wrapping_mul(1_000_003).wrapping_add(k);
            let img = self.sim.crash(s);
            self.images.push(Image {
                point,
                bytes: img.bytes,
                description: img.description,
            });
        }
    }

    pub fn take(&mut self) -> Vec<Image> {
        std::mem::take(&mut self.images)
    }
}

impl PmemDevice for Probe {
    fn len(&self) -> u64 {
        self.sim.len()
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> Result<(), PmemError> {
        self.sim.read(off, buf)
    }
    fn write(&mut self, off: u64, data: &[u8]) -> Result<(), PmemError> {
        self.sim.write(off, data)
    }
    fn store_u64(&mut self, off: u64, v: u64) -> Result<(), PmemError> {
        self.sim.store_u64(off, v)
    }
    fn load_u64(&self, off: u64) -> Result<u64, PmemError> {
        self.sim.load_u64(off)
    }
    fn clwb(&mut self, off: u64, len: u64) -> Result<(), PmemError> {
        self.sim.clwb(off, len)
    }
    fn fence(&mut self) -> Result<(), PmemError> {
        if self.capture {
            self.snap();
        }
        self.sim.fence()
    }
    fn counters(&self) -> PmemCounters {
        self.sim.counters()
    }
}
