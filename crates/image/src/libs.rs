//! Which shared libraries a binary needs: `ldd` on the host to collect them
//! (it resolves the whole closure the way the loader does), and a small ELF
//! reader (interpreter and `DT_NEEDED`) to check an image without running
//! anything.

use std::path::{Path, PathBuf};
use std::process::Command;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum LibsError {
    #[error(
        "`ldd` is not installed (it comes with glibc, Debian package libc-bin); it is needed to find the shared libraries of {binary}"
    )]
    LddMissing { binary: PathBuf },
    #[error("running `ldd {binary}`: {error}")]
    Ldd { binary: PathBuf, error: std::io::Error },
    #[error("`ldd {binary}` failed: {stderr}")]
    LddFailed { binary: PathBuf, stderr: String },
    #[error("{binary} needs {library}, which `ldd` cannot find on this host")]
    NotFound { binary: PathBuf, library: String },
    #[error("`ldd {binary}` printed a line this tool does not understand: {line:?}")]
    Unparsed { binary: PathBuf, line: String },
    #[error(transparent)]
    Layer(Box<crate::layer::LayerError>),
    #[error("{path}: not an ELF file this tool understands: {reason}")]
    Elf { path: String, reason: &'static str },
}

/// The shared objects `ldd` says `binary` loads, as absolute host paths
/// (the dynamic loader included); empty for a static binary.
pub fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>, LibsError> {
    let output = Command::new("ldd").arg(binary).output().map_err(|error| {
        if error.kind() == std::io::ErrorKind::NotFound {
            LibsError::LddMissing {
                binary: binary.to_path_buf(),
            }
        } else {
            LibsError::Ldd {
                binary: binary.to_path_buf(),
                error,
            }
        }
    })?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        // glibc's ldd exits 1 for a static binary.
        if stdout.contains("not a dynamic executable") || stderr.contains("not a dynamic executable") {
            return Ok(Vec::new());
        }
        return Err(LibsError::LddFailed {
            binary: binary.to_path_buf(),
            stderr: stderr.trim().to_string(),
        });
    }
    parse_ldd(&stdout, binary)
}

/// Parses `ldd` output: `name => /path (0x…)`, `/path (0x…)` (the loader),
/// `linux-vdso.so.1 (0x…)` (in the kernel, skipped), `name => not found`
/// (an error), `statically linked`.
pub fn parse_ldd(stdout: &str, binary: &Path) -> Result<Vec<PathBuf>, LibsError> {
    let mut libs = Vec::new();
    for line in stdout.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line == "statically linked" || line == "not a dynamic executable" {
            continue;
        }
        let unparsed = || LibsError::Unparsed {
            binary: binary.to_path_buf(),
            line: line.to_string(),
        };
        let path = match line.split_once(" => ") {
            Some((name, rest)) => {
                let rest = rest.trim();
                if rest.starts_with("not found") {
                    return Err(LibsError::NotFound {
                        binary: binary.to_path_buf(),
                        library: name.trim().to_string(),
                    });
                }
                // `linux-vdso.so.1 =>  (0x…)` on older glibc: nothing to copy.
                if rest.starts_with('(') {
                    continue;
                }
                rest.split(" (").next().ok_or_else(unparsed)?
            }
            None => line.split(" (").next().ok_or_else(unparsed)?,
        };
        if path.starts_with('/') {
            libs.push(PathBuf::from(path));
        } else if !(path.starts_with("linux-vdso") || path.starts_with("linux-gate")) {
            return Err(unparsed());
        }
    }
    libs.sort();
    libs.dedup();
    Ok(libs)
}

/// What an ELF executable asks of the system it runs on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ElfNeeds {
    /// `PT_INTERP`: the dynamic loader (`None` for a static binary).
    pub interpreter: Option<String>,
    /// `DT_NEEDED` sonames (`libc.so.6`).
    pub needed: Vec<String>,
}

/// Reads the interpreter and `DT_NEEDED` entries of a 64-bit little-endian
/// ELF file (x86-64, aarch64). `path` only names the file in errors.
pub fn elf_needs(bytes: &[u8], path: &str) -> Result<ElfNeeds, LibsError> {
    let bad = |reason| LibsError::Elf {
        path: path.to_string(),
        reason,
    };
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" {
        return Err(bad("no ELF magic"));
    }
    if bytes[4] != 2 || bytes[5] != 1 {
        return Err(bad("not 64-bit little-endian"));
    }
    let u16_at = |o: usize| bytes.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize);
    let u32_at = |o: usize| bytes.get(o..o + 4).map(|b| u32::from_le_bytes(b.try_into().unwrap()));
    let u64_at = |o: usize| {
        bytes
            .get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()) as usize)
    };
    let truncated = || bad("truncated");
    let phoff = u64_at(0x20).ok_or_else(truncated)?;
    let phentsize = u16_at(0x36).ok_or_else(truncated)?;
    let phnum = u16_at(0x38).ok_or_else(truncated)?;
    struct Ph {
        kind: u32,
        offset: usize,
        vaddr: usize,
        filesz: usize,
    }
    let mut phs = Vec::new();
    for i in 0..phnum {
        let at = phoff + i * phentsize;
        phs.push(Ph {
            kind: u32_at(at).ok_or_else(truncated)?,
            offset: u64_at(at + 8).ok_or_else(truncated)?,
            vaddr: u64_at(at + 16).ok_or_else(truncated)?,
            filesz: u64_at(at + 32).ok_or_else(truncated)?,
        });
    }
    let c_string = |at: usize| -> Result<String, LibsError> {
        let rest = bytes.get(at..).ok_or_else(truncated)?;
        let end = rest.iter().position(|&b| b == 0).ok_or_else(truncated)?;
        Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
    };
    let mut needs = ElfNeeds::default();
    if let Some(interp) = phs.iter().find(|p| p.kind == 3) {
        needs.interpreter = Some(c_string(interp.offset)?);
    }
    let Some(dynamic) = phs.iter().find(|p| p.kind == 2) else {
        return Ok(needs);
    };
    let (mut strtab, mut needed_offsets) = (None, Vec::new());
    for i in 0..dynamic.filesz / 16 {
        let at = dynamic.offset + i * 16;
        match (u64_at(at).ok_or_else(truncated)?, u64_at(at + 8).ok_or_else(truncated)?) {
            (0, _) => break,
            (1, v) => needed_offsets.push(v),
            (5, v) => strtab = Some(v),
            _ => {}
        }
    }
    if needed_offsets.is_empty() {
        return Ok(needs);
    }
    let strtab = strtab.ok_or_else(|| bad("DT_NEEDED without DT_STRTAB"))?;
    let strtab_offset = phs
        .iter()
        .find(|p| p.kind == 1 && p.vaddr <= strtab && strtab < p.vaddr + p.filesz)
        .map(|p| strtab - p.vaddr + p.offset)
        .ok_or_else(|| bad("DT_STRTAB is outside every loaded segment"))?;
    for v in needed_offsets {
        needs.needed.push(c_string(strtab_offset + v)?);
    }
    Ok(needs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_glibc_ldd_output() {
        let out = "\tlinux-vdso.so.1 (0x00007ffd8d1f5000)\n\
                   \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f0a)\n\
                   \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0b)\n\
                   \t/lib64/ld-linux-x86-64.so.2 (0x00007f0c)\n";
        let libs = parse_ldd(out, Path::new("sluice")).unwrap();
        assert_eq!(
            libs,
            [
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
        assert_eq!(
            parse_ldd("\tstatically linked\n", Path::new("x")).unwrap(),
            Vec::<PathBuf>::new()
        );
    }

    #[test]
    fn a_missing_library_names_the_binary_and_the_library() {
        let err = parse_ldd("\tlibssl.so.3 => not found\n", Path::new("/bin/app"))
            .unwrap_err()
            .to_string();
        assert_eq!(err, "/bin/app needs libssl.so.3, which `ldd` cannot find on this host");
        let err = parse_ldd("\twhat is this\n", Path::new("/bin/app"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"what is this\""), "{err}");
    }

    #[test]
    fn host_binaries_dynamic_and_static() {
        if Command::new("ldd").arg("--version").output().is_err() {
            eprintln!("skipped: no ldd on this host");
            return;
        }
        let true_bin = Path::new("/bin/true");
        let libs = shared_libraries(true_bin).unwrap();
        assert!(
            libs.iter().any(|l| l.to_string_lossy().contains("libc.so.6")),
            "{libs:?}"
        );
        let needs = elf_needs(&std::fs::read(true_bin).unwrap(), "/bin/true").unwrap();
        let interp = needs.interpreter.unwrap();
        assert!(libs.contains(&PathBuf::from(&interp)), "{interp} not in {libs:?}");
        assert!(needs.needed.contains(&"libc.so.6".to_string()), "{:?}", needs.needed);
        if Path::new("/bin/busybox").exists()
            && elf_needs(&std::fs::read("/bin/busybox").unwrap(), "")
                .unwrap()
                .interpreter
                .is_none()
        {
            assert_eq!(
                shared_libraries(Path::new("/bin/busybox")).unwrap(),
                Vec::<PathBuf>::new()
            );
        }
    }

    #[test]
    fn non_elf_is_refused_with_the_path() {
        let err = elf_needs(b"#!/bin/sh\necho hi\n", "/usr/local/bin/x")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "/usr/local/bin/x: not an ELF file this tool understands: no ELF magic"
        );
    }
}
