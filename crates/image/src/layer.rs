//! A layer's file tree: files, directories and symbolic links at absolute
//! image paths, written as a deterministic tar (sorted by path component,
//! parents first, one fixed mtime).

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::tar::{self, Header, Kind, TarWriter};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    File(Vec<u8>),
    Dir,
    Symlink(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub content: Content,
    /// Permission bits (`0o755`, `0o1777`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

#[derive(Debug, Error)]
pub enum LayerError {
    #[error("image path {path:?}: {reason}")]
    BadPath { path: String, reason: &'static str },
    #[error("image path /{path}: {reason}")]
    Conflict { path: String, reason: String },
    #[error("reading {path}: {error}")]
    Host { path: PathBuf, error: std::io::Error },
    #[error("{path}: more than 40 symbolic links to follow")]
    LinkLoop { path: PathBuf },
    #[error(transparent)]
    Tar(#[from] tar::TarError),
}

/// A file tree. Paths are absolute image paths (`/usr/local/bin/sluice`);
/// missing parent directories are created as `0755 root:root`.
#[derive(Debug, Clone, Default)]
pub struct Layer {
    nodes: BTreeMap<Vec<String>, Node>,
}

fn components(path: &str) -> Result<Vec<String>, LayerError> {
    let bad = |reason| LayerError::BadPath {
        path: path.to_string(),
        reason,
    };
    if path.contains('\0') {
        return Err(bad("contains a NUL byte"));
    }
    let mut out = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(bad("contains `..`")),
            p => out.push(p.to_string()),
        }
    }
    if out.is_empty() {
        return Err(bad("is the root directory"));
    }
    Ok(out)
}

impl Layer {
    pub fn new() -> Self {
        Layer::default()
    }

    /// Adds (or re-owns) a directory.
    pub fn dir(&mut self, path: &str, mode: u32, uid: u32, gid: u32) -> Result<&mut Self, LayerError> {
        self.insert(
            path,
            Node {
                content: Content::Dir,
                mode,
                uid,
                gid,
            },
        )
    }

    /// Adds a root-owned file.
    pub fn file(&mut self, path: &str, data: impl Into<Vec<u8>>, mode: u32) -> Result<&mut Self, LayerError> {
        self.insert(
            path,
            Node {
                content: Content::File(data.into()),
                mode,
                uid: 0,
                gid: 0,
            },
        )
    }

    /// Adds a symbolic link (`target` is stored as given, absolute or
    /// relative to the link's directory).
    pub fn symlink(&mut self, path: &str, target: &str) -> Result<&mut Self, LayerError> {
        if target.is_empty() || target.contains('\0') {
            return Err(LayerError::BadPath {
                path: path.to_string(),
                reason: "has an empty or NUL link target",
            });
        }
        self.insert(
            path,
            Node {
                content: Content::Symlink(target.to_string()),
                mode: 0o777,
                uid: 0,
                gid: 0,
            },
        )
    }

    /// Adds any node. Replaces a node of the same kind at that path (a
    /// directory keeps its children); refuses a node of another kind, or a
    /// path under a file or a symbolic link.
    pub fn insert(&mut self, path: &str, node: Node) -> Result<&mut Self, LayerError> {
        let parts = components(path)?;
        for depth in 1..parts.len() {
            let parent = parts[..depth].to_vec();
            match self.nodes.get(&parent).map(|n| &n.content) {
                None => {
                    self.nodes.insert(
                        parent,
                        Node {
                            content: Content::Dir,
                            mode: 0o755,
                            uid: 0,
                            gid: 0,
                        },
                    );
                }
                Some(Content::Dir) => {}
                Some(other) => {
                    return Err(LayerError::Conflict {
                        path: parts.join("/"),
                        reason: format!("its parent /{} is a {}", parent.join("/"), kind_name(other)),
                    });
                }
            }
        }
        if let Some(existing) = self.nodes.get(&parts)
            && std::mem::discriminant(&existing.content) != std::mem::discriminant(&node.content)
        {
            return Err(LayerError::Conflict {
                path: parts.join("/"),
                reason: format!(
                    "is already a {}, cannot add a {}",
                    kind_name(&existing.content),
                    kind_name(&node.content)
                ),
            });
        }
        self.nodes.insert(parts, node);
        Ok(self)
    }

    /// Copies a host file into the image at `image_path`, keeping its
    /// permission bits (symbolic links on the host are followed).
    pub fn host_file(&mut self, image_path: &str, host_path: &Path) -> Result<&mut Self, LayerError> {
        let host = |error| LayerError::Host {
            path: host_path.to_path_buf(),
            error,
        };
        let data = std::fs::read(host_path).map_err(host)?;
        let mode = std::fs::metadata(host_path).map_err(host)?.permissions().mode() & 0o7777;
        self.file(image_path, data, mode)
    }

    /// Copies the host file at `path` to the same path in the image,
    /// reproducing the chain of symbolic links that leads to it
    /// (`/lib64/ld-linux-x86-64.so.2 -> /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2`
    /// becomes that link plus the file it names).
    pub fn host_path_with_links(&mut self, path: &Path) -> Result<&mut Self, LayerError> {
        let mut current = path.to_path_buf();
        for _ in 0..40 {
            let meta = std::fs::symlink_metadata(&current).map_err(|error| LayerError::Host {
                path: current.clone(),
                error,
            })?;
            let image_path = current.to_string_lossy().into_owned();
            if !meta.file_type().is_symlink() {
                return self.host_file(&image_path, &current);
            }
            let target = std::fs::read_link(&current).map_err(|error| LayerError::Host {
                path: current.clone(),
                error,
            })?;
            self.symlink(&image_path, &target.to_string_lossy())?;
            current = if target.is_absolute() {
                target
            } else {
                current.parent().unwrap_or(Path::new("/")).join(target)
            };
            current = lexical_normalize(&current);
        }
        Err(LayerError::LinkLoop {
            path: path.to_path_buf(),
        })
    }

    /// Copies a host executable to `image_path` (mode 0755) with the shared
    /// libraries and loader `ldd` says it needs, at their host paths (none
    /// for a static binary).
    pub fn host_executable(&mut self, image_path: &str, host_path: &Path) -> Result<&mut Self, crate::libs::LibsError> {
        let wrap = |e: LayerError| crate::libs::LibsError::Layer(Box::new(e));
        self.host_file(image_path, host_path).map_err(wrap)?;
        if let Some(node) = self.get(image_path).cloned() {
            // Executable by anyone, writable by no one but root.
            self.insert(image_path, Node { mode: 0o755, ..node }).map_err(wrap)?;
        }
        for lib in crate::libs::shared_libraries(host_path)? {
            self.host_path_with_links(&lib).map_err(wrap)?;
        }
        Ok(self)
    }

    pub fn get(&self, path: &str) -> Option<&Node> {
        self.nodes.get(&components(path).ok()?)
    }

    /// Every node, sorted by path, parents before children.
    pub fn iter(&self) -> impl Iterator<Item = (String, &Node)> {
        self.nodes.iter().map(|(k, v)| (format!("/{}", k.join("/")), v))
    }

    /// The layer as an uncompressed tar, every entry with `mtime`.
    pub fn to_tar(&self, mtime: u64) -> Result<Vec<u8>, LayerError> {
        let mut w = TarWriter::new(Vec::new());
        for (parts, node) in &self.nodes {
            let (kind, link, data): (Kind, &str, &[u8]) = match &node.content {
                Content::File(data) => (Kind::File, "", data),
                Content::Dir => (Kind::Dir, "", &[]),
                Content::Symlink(target) => (Kind::Symlink, target, &[]),
            };
            let header = Header {
                path: parts.join("/"),
                kind,
                mode: node.mode,
                uid: node.uid,
                gid: node.gid,
                mtime,
                link: link.to_string(),
            };
            w.append(&header, data)?;
        }
        Ok(w.finish()?)
    }
}

fn kind_name(c: &Content) -> &'static str {
    match c {
        Content::File(_) => "file",
        Content::Dir => "directory",
        Content::Symlink(_) => "symbolic link",
    }
}

/// Removes `.` and resolves `..` without touching the filesystem.
pub fn lexical_normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::Normal(p) => out.push(p),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_are_created_and_entries_sorted_parents_first() {
        let mut l = Layer::new();
        l.file("/usr/local/bin/sluice", b"x".to_vec(), 0o755).unwrap();
        l.file("/usr-x", b"y".to_vec(), 0o644).unwrap();
        l.dir("/tmp", 0o1777, 0, 0).unwrap();
        l.symlink("/lib64/ld.so", "/lib/ld.so").unwrap();
        let paths: Vec<_> = l.iter().map(|(p, _)| p).collect();
        assert_eq!(
            paths,
            [
                "/lib64",
                "/lib64/ld.so",
                "/tmp",
                "/usr",
                "/usr/local",
                "/usr/local/bin",
                "/usr/local/bin/sluice",
                "/usr-x"
            ]
        );
        assert_eq!(l.get("usr/local").unwrap().mode, 0o755);
        let entries = tar::read(&l.to_tar(0).unwrap()).unwrap();
        assert_eq!(
            entries.iter().map(|e| format!("/{}", e.path)).collect::<Vec<_>>(),
            paths
        );
    }

    #[test]
    fn the_same_tree_gives_the_same_bytes_whatever_the_insertion_order() {
        let mut a = Layer::new();
        a.file("/b/f", b"1".to_vec(), 0o644)
            .unwrap()
            .dir("/a", 0o700, 1, 1)
            .unwrap();
        let mut b = Layer::new();
        b.dir("/a", 0o700, 1, 1)
            .unwrap()
            .file("/b/f", b"1".to_vec(), 0o644)
            .unwrap();
        assert_eq!(a.to_tar(0).unwrap(), b.to_tar(0).unwrap());
    }

    #[test]
    fn conflicts_and_bad_paths_are_refused_with_the_path() {
        let mut l = Layer::new();
        l.file("/etc/passwd", b"".to_vec(), 0o644).unwrap();
        let err = l.file("/etc/passwd/x", b"".to_vec(), 0o644).unwrap_err().to_string();
        assert!(
            err.contains("/etc/passwd/x") && err.contains("parent /etc/passwd is a file"),
            "{err}"
        );
        let err = l.symlink("/etc", "/x").unwrap_err().to_string();
        assert!(err.contains("/etc: is already a directory"), "{err}");
        assert!(
            l.file("/a/../b", b"".to_vec(), 0o644)
                .unwrap_err()
                .to_string()
                .contains("`..`")
        );
        assert!(l.dir("/", 0o755, 0, 0).is_err());
        // Re-adding a directory changes its mode and keeps its children.
        l.dir("/etc", 0o750, 0, 0).unwrap();
        assert_eq!(l.get("/etc").unwrap().mode, 0o750);
        assert!(l.get("/etc/passwd").is_some());
    }

    #[test]
    fn host_links_are_reproduced_up_to_the_file() {
        let dir = std::env::temp_dir().join(format!("sluice-image-links-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("real")).unwrap();
        std::fs::write(dir.join("real/lib.so.1.2"), b"ELF").unwrap();
        std::os::unix::fs::symlink("lib.so.1.2", dir.join("real/lib.so.1")).unwrap();
        std::os::unix::fs::symlink(dir.join("real/lib.so.1"), dir.join("lib.so")).unwrap();
        let mut l = Layer::new();
        l.host_path_with_links(&dir.join("lib.so")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let d = dir.to_string_lossy();
        assert_eq!(
            l.get(&format!("{d}/lib.so")).unwrap().content,
            Content::Symlink(format!("{d}/real/lib.so.1"))
        );
        assert_eq!(
            l.get(&format!("{d}/real/lib.so.1")).unwrap().content,
            Content::Symlink("lib.so.1.2".into())
        );
        assert_eq!(
            l.get(&format!("{d}/real/lib.so.1.2")).unwrap().content,
            Content::File(b"ELF".to_vec())
        );
    }
}
