//! A minimal, deterministic tar writer and reader (POSIX ustar, with pax
//! extended headers for long paths and link targets).
//!
//! Only what images need: regular files, directories and symbolic links with
//! numeric owners, modes and a fixed mtime. No user or group names, no
//! devices, no extended attributes: the same entries always give the same
//! bytes.

use std::io::{self, Write};

use thiserror::Error;

const BLOCK: usize = 512;

/// What a tar entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
}

/// One entry's header fields. Paths are relative (`usr/bin/x`); directories
/// are written with a trailing `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub path: String,
    pub kind: Kind,
    /// Permission bits, including setuid/setgid/sticky (`0o1777`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime: u64,
    /// The symbolic link's target (empty otherwise).
    pub link: String,
}

#[derive(Debug, Error)]
pub enum TarError {
    #[error("tar entry {path}: {field} {value} does not fit the header")]
    TooLarge {
        path: String,
        field: &'static str,
        value: u64,
    },
    #[error("tar entry {path}: the path contains a NUL byte")]
    Nul { path: String },
    #[error("writing the tar stream: {0}")]
    Io(#[from] io::Error),
    #[error("reading the tar stream at byte {offset}: {reason}")]
    Malformed { offset: usize, reason: String },
}

/// Writes entries to `W`; call [`TarWriter::finish`] at the end.
pub struct TarWriter<W: Write> {
    out: W,
}

impl<W: Write> TarWriter<W> {
    pub fn new(out: W) -> Self {
        TarWriter { out }
    }

    /// Appends one entry; `data` is the file's content (empty for
    /// directories and links).
    pub fn append(&mut self, header: &Header, data: &[u8]) -> Result<(), TarError> {
        if header.path.contains('\0') || header.link.contains('\0') {
            return Err(TarError::Nul {
                path: header.path.clone(),
            });
        }
        let mut path = header.path.trim_start_matches('/').to_string();
        if header.kind == Kind::Dir && !path.ends_with('/') {
            path.push('/');
        }
        let split = split_ustar_path(&path);
        let mut pax = Vec::new();
        if split.is_none() {
            pax_record(&mut pax, "path", &path);
        }
        if header.link.len() > 100 {
            pax_record(&mut pax, "linkpath", &header.link);
        }
        if !pax.is_empty() {
            let pax_header = Header {
                path: format!("PaxHeaders/{}", short_name(&path)),
                kind: Kind::File,
                mode: 0o644,
                uid: 0,
                gid: 0,
                mtime: header.mtime,
                link: String::new(),
            };
            let block = encode(&pax_header, b'x', ("", &pax_header.path), "", pax.len() as u64)?;
            self.write_block(&block)?;
            self.write_data(&pax)?;
        }
        let (prefix, name) = split.unwrap_or(("", short_name(&path)));
        let link = if header.link.len() > 100 {
            ""
        } else {
            header.link.as_str()
        };
        let typeflag = match header.kind {
            Kind::File => b'0',
            Kind::Dir => b'5',
            Kind::Symlink => b'2',
        };
        let size = if header.kind == Kind::File {
            data.len() as u64
        } else {
            0
        };
        let mut named = header.clone();
        named.path = path.clone();
        let block = encode(&named, typeflag, (prefix, name), link, size)?;
        self.write_block(&block)?;
        if header.kind == Kind::File {
            self.write_data(data)?;
        }
        Ok(())
    }

    /// Writes the two zero blocks that end an archive and returns the
    /// writer.
    pub fn finish(mut self) -> Result<W, TarError> {
        self.write_block(&[0; BLOCK])?;
        self.write_block(&[0; BLOCK])?;
        self.out.flush()?;
        Ok(self.out)
    }

    fn write_block(&mut self, block: &[u8; BLOCK]) -> Result<(), TarError> {
        self.out.write_all(block)?;
        Ok(())
    }

    fn write_data(&mut self, data: &[u8]) -> Result<(), TarError> {
        self.out.write_all(data)?;
        let pad = (BLOCK - data.len() % BLOCK) % BLOCK;
        self.out.write_all(&[0; BLOCK][..pad])?;
        Ok(())
    }
}

/// The last 100 bytes at most of a path, at a character boundary, for the
/// name field of an entry whose real path is in a pax header.
fn short_name(path: &str) -> &str {
    let mut start = path.len().saturating_sub(100);
    while !path.is_char_boundary(start) {
        start += 1;
    }
    &path[start..]
}

/// `(prefix, name)` for ustar, or `None` when the path needs a pax header.
fn split_ustar_path(path: &str) -> Option<(&str, &str)> {
    if path.len() <= 100 {
        return Some(("", path));
    }
    // The name part may keep a directory's trailing slash.
    let body = path.strip_suffix('/').unwrap_or(path);
    body.char_indices()
        .filter(|&(_, c)| c == '/')
        .map(|(i, _)| i)
        .find_map(|i| {
            let (prefix, name) = (&path[..i], &path[i + 1..]);
            (prefix.len() <= 155 && name.len() <= 100 && !name.is_empty()).then_some((prefix, name))
        })
}

fn pax_record(out: &mut Vec<u8>, key: &str, value: &str) {
    // "<len> <key>=<value>\n", where <len> counts itself.
    let rest = key.len() + value.len() + 3;
    let mut len = rest + 1;
    while len != rest + len.to_string().len() {
        len = rest + len.to_string().len();
    }
    out.extend_from_slice(format!("{len} {key}={value}\n").as_bytes());
}

fn encode(
    header: &Header,
    typeflag: u8,
    (prefix, name): (&str, &str),
    link: &str,
    size: u64,
) -> Result<[u8; BLOCK], TarError> {
    let mut b = [0u8; BLOCK];
    b[..name.len()].copy_from_slice(name.as_bytes());
    octal(&mut b[100..108], header.mode as u64, &header.path, "mode")?;
    octal(&mut b[108..116], header.uid as u64, &header.path, "uid")?;
    octal(&mut b[116..124], header.gid as u64, &header.path, "gid")?;
    octal(&mut b[124..136], size, &header.path, "size")?;
    octal(&mut b[136..148], header.mtime, &header.path, "mtime")?;
    b[156] = typeflag;
    b[157..157 + link.len()].copy_from_slice(link.as_bytes());
    b[257..263].copy_from_slice(b"ustar\0");
    b[263..265].copy_from_slice(b"00");
    octal(&mut b[329..337], 0, &header.path, "devmajor")?;
    octal(&mut b[337..345], 0, &header.path, "devminor")?;
    b[345..345 + prefix.len()].copy_from_slice(prefix.as_bytes());
    b[148..156].copy_from_slice(b"        ");
    let sum: u64 = b.iter().map(|&x| x as u64).sum();
    let chk = format!("{sum:06o}\0 ");
    b[148..156].copy_from_slice(chk.as_bytes());
    Ok(b)
}

/// Zero-padded octal, NUL-terminated, filling the field.
fn octal(field: &mut [u8], value: u64, path: &str, name: &'static str) -> Result<(), TarError> {
    let digits = field.len() - 1;
    let text = format!("{value:0digits$o}");
    if text.len() > digits {
        return Err(TarError::TooLarge {
            path: path.to_string(),
            field: name,
            value,
        });
    }
    field[..digits].copy_from_slice(text.as_bytes());
    field[digits] = 0;
    Ok(())
}

/// One entry read back from an archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Relative path without a trailing slash (`usr/bin`).
    pub path: String,
    /// `None` for entry types other than file, directory and symlink.
    pub kind: Option<Kind>,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime: u64,
    pub link: String,
    pub data: Vec<u8>,
}

/// Reads every entry of a tar archive held in memory (ustar, pax `path` and
/// `linkpath`, GNU long names).
pub fn read(bytes: &[u8]) -> Result<Vec<Entry>, TarError> {
    let mut entries = Vec::new();
    let mut offset = 0;
    let mut long = LongNames::default();
    while offset + BLOCK <= bytes.len() {
        let b = &bytes[offset..offset + BLOCK];
        if b.iter().all(|&x| x == 0) {
            return Ok(entries);
        }
        let header = RawHeader::checked(b, offset)?;
        let size = header.num(124..136, "size")? as usize;
        let data_start = offset + BLOCK;
        let data_end = data_start + size;
        if data_end > bytes.len() {
            return Err(header.bad(format!("entry of {size} bytes runs past the end of the archive")));
        }
        let data = &bytes[data_start..data_end];
        offset = data_start + size.div_ceil(BLOCK) * BLOCK;
        if long.take_in(header.typeflag(), data, data_start)? {
            continue;
        }
        entries.push(header.entry(data, &mut long)?);
    }
    Err(TarError::Malformed {
        offset,
        reason: "the archive ends without its end-of-archive blocks".into(),
    })
}

/// A header block at `at`, its checksum verified.
struct RawHeader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> RawHeader<'a> {
    fn checked(b: &'a [u8], at: usize) -> Result<Self, TarError> {
        let header = Self { b, at };
        let stored: u64 = parse_octal(&b[148..156]).ok_or_else(|| header.bad("bad checksum field".into()))?;
        let sum: u64 = b
            .iter()
            .enumerate()
            .map(|(i, &x)| if (148..156).contains(&i) { 32 } else { x as u64 })
            .sum();
        if sum != stored {
            return Err(header.bad(format!("checksum {stored:o} does not match the header ({sum:o})")));
        }
        Ok(header)
    }

    fn bad(&self, reason: String) -> TarError {
        TarError::Malformed {
            offset: self.at,
            reason,
        }
    }

    fn typeflag(&self) -> u8 {
        self.b[156]
    }

    /// A NUL-terminated text field.
    fn field(&self, r: std::ops::Range<usize>) -> String {
        let f = &self.b[r];
        let end = f.iter().position(|&x| x == 0).unwrap_or(f.len());
        String::from_utf8_lossy(&f[..end]).into_owned()
    }

    /// An octal number field.
    fn num(&self, r: std::ops::Range<usize>, name: &str) -> Result<u64, TarError> {
        parse_octal(&self.b[r]).ok_or_else(|| self.bad(format!("bad {name} field")))
    }

    /// The entry this header describes, with `data` (kept for files only)
    /// and the long names that came before it.
    fn entry(&self, data: &[u8], long: &mut LongNames) -> Result<Entry, TarError> {
        let path = long.path.take().unwrap_or_else(|| {
            let (prefix, name) = (self.field(345..500), self.field(0..100));
            if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            }
        });
        let link = long.link.take().unwrap_or_else(|| self.field(157..257));
        let kind = match self.typeflag() {
            b'0' | 0 => Some(Kind::File),
            b'5' => Some(Kind::Dir),
            b'2' => Some(Kind::Symlink),
            _ => None,
        };
        Ok(Entry {
            path: path.trim_start_matches("./").trim_end_matches('/').to_string(),
            kind,
            mode: self.num(100..108, "mode")? as u32,
            uid: self.num(108..116, "uid")? as u32,
            gid: self.num(116..124, "gid")? as u32,
            mtime: self.num(136..148, "mtime")?,
            link,
            data: if kind == Some(Kind::File) {
                data.to_vec()
            } else {
                Vec::new()
            },
        })
    }
}

/// The path and link target a pax header or GNU long-name entry gives the
/// entry after it.
#[derive(Default)]
struct LongNames {
    path: Option<String>,
    link: Option<String>,
}

impl LongNames {
    /// Takes in an extension entry (pax `x`, GNU `L` and `K`; pax `g` is
    /// skipped): whether it was one.
    fn take_in(&mut self, typeflag: u8, data: &[u8], data_start: usize) -> Result<bool, TarError> {
        match typeflag {
            b'x' => {
                for (key, value) in parse_pax(data).map_err(|r| TarError::Malformed {
                    offset: data_start,
                    reason: r,
                })? {
                    match key.as_str() {
                        "path" => self.path = Some(value),
                        "linkpath" => self.link = Some(value),
                        _ => {}
                    }
                }
            }
            b'L' => self.path = Some(String::from_utf8_lossy(data).trim_end_matches('\0').to_string()),
            b'K' => self.link = Some(String::from_utf8_lossy(data).trim_end_matches('\0').to_string()),
            b'g' => {}
            _ => return Ok(false),
        }
        Ok(true)
    }
}

fn parse_octal(field: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(field).ok()?;
    let text = text.trim_matches(|c: char| c == '\0' || c == ' ');
    if text.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(text, 8).ok()
}

fn parse_pax(mut data: &[u8]) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    while !data.is_empty() {
        let space = data
            .iter()
            .position(|&x| x == b' ')
            .ok_or("pax record without a length")?;
        let len: usize = std::str::from_utf8(&data[..space])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or("pax record with a bad length")?;
        if len > data.len() || len <= space + 1 {
            return Err("pax record length out of range".into());
        }
        let record = std::str::from_utf8(&data[space + 1..len - 1]).map_err(|_| "pax record is not UTF-8")?;
        let (key, value) = record.split_once('=').ok_or("pax record without '='")?;
        out.push((key.to_string(), value.to_string()));
        data = &data[len..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(path: &str, kind: Kind, link: &str) -> Header {
        Header {
            path: path.into(),
            kind,
            mode: 0o755,
            uid: 0,
            gid: 0,
            mtime: 0,
            link: link.into(),
        }
    }

    #[test]
    fn round_trips_files_dirs_links_and_long_paths() {
        let long_dir = format!("a/{}", "d".repeat(120));
        let very_long = format!("{}/{}", "x".repeat(160), "f".repeat(110));
        let long_target = format!("/{}", "t".repeat(150));
        let mut w = TarWriter::new(Vec::new());
        w.append(&header("usr", Kind::Dir, ""), &[]).unwrap();
        w.append(
            &Header {
                mode: 0o1777,
                uid: 65532,
                gid: 65532,
                mtime: 7,
                ..header("tmp", Kind::Dir, "")
            },
            &[],
        )
        .unwrap();
        w.append(&header("usr/bin/x", Kind::File, ""), b"hello").unwrap();
        w.append(&header("lib64/ld.so", Kind::Symlink, "/lib/ld.so"), &[])
            .unwrap();
        w.append(&header(&format!("{long_dir}/file"), Kind::File, ""), &[1; 513])
            .unwrap();
        w.append(&header(&very_long, Kind::File, ""), b"deep").unwrap();
        w.append(&header("l", Kind::Symlink, &long_target), &[]).unwrap();
        let bytes = w.finish().unwrap();
        assert_eq!(bytes.len() % BLOCK, 0);

        let entries = read(&bytes).unwrap();
        let paths: Vec<_> = entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "usr",
                "tmp",
                "usr/bin/x",
                "lib64/ld.so",
                &format!("{long_dir}/file"),
                &very_long,
                "l"
            ]
        );
        assert_eq!(entries[1].mode, 0o1777);
        assert_eq!((entries[1].uid, entries[1].gid, entries[1].mtime), (65532, 65532, 7));
        assert_eq!(entries[2].data, b"hello");
        assert_eq!(entries[3].link, "/lib/ld.so");
        assert_eq!(entries[4].data, vec![1; 513]);
        assert_eq!(entries[5].data, b"deep");
        assert_eq!(entries[6].link, long_target);
    }

    #[test]
    fn system_tar_reads_what_we_write() {
        let Ok(out) = std::process::Command::new("tar").arg("--version").output() else {
            eprintln!("skipped: no `tar` on PATH");
            return;
        };
        assert!(out.status.success());
        let long = format!("{}/{}", "x".repeat(160), "f".repeat(110));
        let mut w = TarWriter::new(Vec::new());
        w.append(&header("etc", Kind::Dir, ""), &[]).unwrap();
        w.append(
            &Header {
                mode: 0o644,
                ..header("etc/passwd", Kind::File, "")
            },
            b"root:x:0:0::/root:/sbin/nologin\n",
        )
        .unwrap();
        w.append(&header(&long, Kind::File, ""), b"x").unwrap();
        w.append(&header("sh", Kind::Symlink, "busybox"), &[]).unwrap();
        let bytes = w.finish().unwrap();
        let dir = std::env::temp_dir().join(format!("sluice-image-tar-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("t.tar");
        std::fs::write(&file, &bytes).unwrap();
        let listing = std::process::Command::new("tar")
            .arg("-tvf")
            .arg(&file)
            .output()
            .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(listing.status.success(), "{}", String::from_utf8_lossy(&listing.stderr));
        let text = String::from_utf8(listing.stdout).unwrap();
        assert!(text.contains("etc/passwd"), "{text}");
        assert!(text.contains(&long), "{text}");
        assert!(text.contains("sh -> busybox"), "{text}");
        assert!(text.lines().next().unwrap().starts_with("drwxr-xr-x 0/0"), "{text}");
    }

    #[test]
    fn a_corrupt_header_is_refused_with_its_offset() {
        let mut w = TarWriter::new(Vec::new());
        w.append(&header("a", Kind::File, ""), b"1").unwrap();
        let mut bytes = w.finish().unwrap();
        bytes[0] = b'b';
        let err = read(&bytes).unwrap_err().to_string();
        assert!(err.contains("at byte 0") && err.contains("checksum"), "{err}");
    }

    #[test]
    fn pax_lengths_count_themselves() {
        let mut out = Vec::new();
        pax_record(&mut out, "path", &"p".repeat(93));
        let text = String::from_utf8(out).unwrap();
        let (len, _) = text.split_once(' ').unwrap();
        assert_eq!(len.parse::<usize>().unwrap(), text.len());
    }
}
