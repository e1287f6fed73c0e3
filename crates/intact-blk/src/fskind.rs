//! The file systems the validator knows: how to make, mount, unmount and check each.

use crate::sys::{have, run, tail, Mounted};
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FsKind {
    Ext4,
    Xfs,
    Btrfs,
    Intactfs,
}

/// Where the `intact` binary is (it makes, mounts and checks intactfs images).
#[derive(Clone, Debug)]
pub struct Tools {
    pub intact: PathBuf,
}

/// A file system mounted from an image (through an autoclear loop device, or an intactfs
/// daemon); unmounted on drop.
pub struct Attached {
    pub mount: Option<Mounted>,
    intact: Option<PathBuf>,
}

impl Attached {
    /// Unmounts (for intactfs: waits until the daemon has written everything back).
    pub fn unmount(mut self) -> Result<(), String> {
        let r = match (self.mount.take(), &self.intact) {
            (Some(m), Some(intact)) => {
                let dir = m.dir.clone();
                let r = run(
                    &format!("unmounting intactfs at {}", dir.display()),
                    Command::new(intact).args(["fs", "umount"]).arg(&dir),
                )
                .map(|_| ());
                if r.is_ok() {
                    m.forget();
                }
                r
            }
            (Some(m), None) => m.unmount(),
            (None, _) => Ok(()),
        };
        r
    }
}

/// What the file system's own checker said about an image.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FsckResult {
    pub clean: bool,
    pub code: Option<i32>,
    /// The tail of its output when not clean.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub output: String,
}

impl FsKind {
    pub const ALL: [FsKind; 4] = [FsKind::Ext4, FsKind::Xfs, FsKind::Btrfs, FsKind::Intactfs];

    pub fn parse(s: &str) -> Result<FsKind, String> {
        FsKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                format!("unknown file system {s:?}: choose ext4, xfs, btrfs or intactfs")
            })
    }

    pub fn name(self) -> &'static str {
        match self {
            FsKind::Ext4 => "ext4",
            FsKind::Xfs => "xfs",
            FsKind::Btrfs => "btrfs",
            FsKind::Intactfs => "intactfs",
        }
    }

    /// mkfs.xfs refuses file systems under 300 MiB.
    pub fn default_size(self) -> u64 {
        match self {
            FsKind::Xfs => 320 << 20,
            _ => 256 << 20,
        }
    }

    /// The built-in APM that states this file system's promise under these mount options
    /// (`intact apm list`): today's kernel models, validated with `validate-apm`
    /// (docs/validation.md), not the thesis' (ext4-o, btrfs).
    pub fn apm(self, mount_options: &str) -> &'static str {
        let has = |o: &str| mount_options.split(',').any(|x| x.trim() == o);
        match self {
            FsKind::Ext4 if has("dioread_lock") => "ext4-dioread_lock",
            FsKind::Ext4 => "ext4",
            FsKind::Xfs => "xfs",
            FsKind::Btrfs => "btrfs-linux6",
            FsKind::Intactfs => "intactfs",
        }
    }

    fn programs(self) -> &'static [(&'static str, &'static str)] {
        match self {
            FsKind::Ext4 => &[("mkfs.ext4", "e2fsprogs"), ("e2fsck", "e2fsprogs")],
            FsKind::Xfs => &[("mkfs.xfs", "xfsprogs"), ("xfs_repair", "xfsprogs")],
            FsKind::Btrfs => &[("mkfs.btrfs", "btrfs-progs"), ("btrfs", "btrfs-progs")],
            FsKind::Intactfs => &[("umount", "mount")],
        }
    }

    /// Every program this file system needs, or which are missing and how to get them.
    pub fn check_tools(self) -> Result<(), String> {
        let missing: Vec<_> = self.programs().iter().filter(|(p, _)| !have(p)).collect();
        if missing.is_empty() {
            return Ok(());
        }
        let progs: Vec<&str> = missing.iter().map(|(p, _)| *p).collect();
        let mut pkgs: Vec<&str> = missing.iter().map(|(_, k)| *k).collect();
        pkgs.dedup();
        Err(format!(
            "{} needs {} (not found): install with `apt-get install -y {}`",
            self.name(),
            progs.join(", "),
            pkgs.join(" ")
        ))
    }

    /// Makes the file system in `image` (an existing file of the device's size); returns the command line.
    pub fn mkfs(
        self,
        image: &Path,
        options: &[String],
        tools: &Tools,
    ) -> Result<Vec<String>, String> {
        let size = std::fs::metadata(image)
            .map_err(|e| format!("{}: {e}", image.display()))?
            .len();
        let mut c = match self {
            FsKind::Ext4 => {
                let mut c = Command::new("mkfs.ext4");
                // 4 KiB blocks: small images would otherwise get 1 KiB blocks.
                c.args(["-q", "-F", "-b", "4096"]);
                c
            }
            FsKind::Xfs => {
                let mut c = Command::new("mkfs.xfs");
                c.args(["-q", "-f"]);
                c
            }
            FsKind::Btrfs => {
                let mut c = Command::new("mkfs.btrfs");
                c.args(["-q", "-f"]);
                c
            }
            FsKind::Intactfs => {
                let mut c = Command::new(&tools.intact);
                c.args(["fs", "mkfs", "--force", "--size", &size.to_string()]);
                c
            }
        };
        c.args(options).arg(image);
        let argv: Vec<String> = std::iter::once(c.get_program())
            .chain(c.get_args())
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        run(
            &format!(
                "making {} on {} ({} MiB)",
                self.name(),
                image.display(),
                size >> 20
            ),
            &mut c,
        )?;
        Ok(argv)
    }

    /// Mounts `image` on `dir` with `options` (comma-separated, may be empty). Kernel file
    /// systems go through a loop device (`direct_io` as for the recorder).
    pub fn mount(
        self,
        image: &Path,
        dir: &Path,
        options: &str,
        direct_io: bool,
        tools: &Tools,
        daemon_log: &Path,
    ) -> Result<Attached, String> {
        if self == FsKind::Intactfs {
            let mut c = Command::new(&tools.intact);
            c.args(["fs", "mount", "--daemon", "--log"])
                .arg(daemon_log)
                .arg(image)
                .arg(dir);
            if !options.is_empty() {
                c.arg("-o").arg(options);
            }
            run(
                &format!("mounting intactfs {} on {}", image.display(), dir.display()),
                &mut c,
            )?;
            return Ok(Attached {
                mount: Some(Mounted::adopt(dir)),
                intact: Some(tools.intact.clone()),
            });
        }
        let m = crate::sys::mount_image(self.name(), image, dir, options, direct_io)?;
        Ok(Attached {
            mount: Some(m),
            intact: None,
        })
    }

    /// Mount options a check adds so that clones of one image can be mounted at once.
    pub fn clone_mount_options(self) -> &'static str {
        match self {
            FsKind::Xfs => "nouuid",
            _ => "",
        }
    }

    /// Runs the read-only checker of the file system on an unmounted image.
    pub fn fsck(self, image: &Path, tools: &Tools) -> Result<FsckResult, String> {
        let mut c = match self {
            FsKind::Ext4 => {
                let mut c = Command::new("e2fsck");
                c.args(["-f", "-n"]);
                c
            }
            FsKind::Xfs => {
                let mut c = Command::new("xfs_repair");
                c.args(["-n", "-f"]);
                c
            }
            FsKind::Btrfs => {
                let mut c = Command::new("btrfs");
                c.args(["check", "--readonly"]);
                c
            }
            FsKind::Intactfs => {
                let mut c = Command::new(&tools.intact);
                c.args(["fs", "fsck"]);
                c
            }
        };
        let out = c
            .arg(image)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {:?}: {e}", c.get_program()))?;
        let clean = out.status.success();
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        Ok(FsckResult {
            clean,
            code: out.status.code(),
            output: if clean {
                String::new()
            } else {
                tail(text.trim(), 2000)
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each file system defaults to today's kernel model, chosen by mount options, and
    /// every default is a built-in that validates as such.
    #[test]
    fn defaults_are_todays_models() {
        assert_eq!(FsKind::Ext4.apm(""), "ext4");
        assert_eq!(
            FsKind::Ext4.apm("noatime,dioread_lock"),
            "ext4-dioread_lock"
        );
        assert_eq!(FsKind::Ext4.apm("dioread_nolock"), "ext4");
        assert_eq!(FsKind::Btrfs.apm(""), "btrfs-linux6");
        for fs in FsKind::ALL {
            let apm = intact_apm::Apm::resolve(fs.apm("")).expect("a built-in");
            let about = apm.about.expect("built-ins say where they come from");
            assert_ne!(about.model, intact_apm::ModelKind::Thesis, "{}", fs.name());
            assert!(about.validation.is_some(), "{}", fs.name());
        }
    }
}
