//! An image (one layer plus its config) written as a docker-archive
//! tarball, the `docker save` format that `docker load`,
//! `ctr images import` and `kind load image-archive` read:
//!
//! ```text
//! manifest.json              [{"Config": "<id>.json", "RepoTags": [...], "Layers": ["<diff>/layer.tar"]}]
//! <id>.json                  the image config (its sha256 is the image id)
//! <diff>/layer.tar           the uncompressed layer (its sha256 is the diff id)
//! ```

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde_json::{Value, json};
use thiserror::Error;

use crate::layer::{Layer, LayerError};
use crate::tar::{self, Header, Kind, TarError, TarWriter};

#[derive(Debug, Error)]
pub enum ImageError {
    #[error(transparent)]
    Layer(#[from] LayerError),
    #[error(transparent)]
    Tar(#[from] TarError),
    #[error("repo tag {tag:?}: {reason}")]
    BadTag { tag: String, reason: &'static str },
    #[error("writing {path}: {error}")]
    Write { path: String, error: std::io::Error },
    #[error("docker archive: {0}")]
    Malformed(String),
}

/// The runtime part of an image config (`config` in the JSON).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `uid:gid` (numeric, so that `runAsNonRoot` can check it) or a name.
    pub user: Option<String>,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    /// `KEY=value`.
    pub env: Vec<String>,
    /// `8080/tcp`.
    pub exposed_ports: Vec<String>,
    pub working_dir: Option<String>,
    pub labels: BTreeMap<String, String>,
    /// `amd64`, `arm64`: the host's by default.
    pub architecture: String,
    pub os: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            user: None,
            entrypoint: Vec::new(),
            cmd: Vec::new(),
            env: vec![format!("PATH={DEFAULT_PATH}")],
            exposed_ports: Vec::new(),
            working_dir: None,
            labels: BTreeMap::new(),
            architecture: host_architecture().to_string(),
            os: "linux".to_string(),
        }
    }
}

/// The `PATH` Docker gives a container when the image sets none.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The OCI architecture name of the host.
pub fn host_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "arm" => "arm",
        "powerpc64" => "ppc64le",
        "s390x" => "s390x",
        "riscv64" => "riscv64",
        other => other,
    }
}

/// A single-layer image.
#[derive(Debug, Clone, Default)]
pub struct Image {
    pub layer: Layer,
    pub config: Config,
    /// Seconds since the epoch for every file's mtime and the config's
    /// `created`; 0 by default so that the same files give the same image id.
    pub created: u64,
}

/// What [`Image::write_docker_archive`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// `sha256:…` of the config: what `docker images` and `ctr images ls`
    /// show as the image id.
    pub image_id: String,
    /// `sha256:…` of the uncompressed layer.
    pub diff_id: String,
    /// Size of the uncompressed layer in bytes.
    pub layer_size: u64,
    pub repo_tags: Vec<String>,
}

pub fn sha256_hex(data: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, data);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Checks a `name:tag` reference (`sluice:dev`, `registry:5000/a/b:1.0`)
/// and returns it with `:latest` added when it has no tag.
pub fn normalize_tag(tag: &str) -> Result<String, ImageError> {
    let bad = |reason| ImageError::BadTag {
        tag: tag.to_string(),
        reason,
    };
    if tag.contains('@') {
        return Err(bad("digests cannot be tags in an archive; give name:tag"));
    }
    let last_slash = tag.rfind('/').map_or(0, |i| i + 1);
    let (name, version) = match tag[last_slash..].rfind(':') {
        Some(i) => (&tag[..last_slash + i], &tag[last_slash + i + 1..]),
        None => (tag, "latest"),
    };
    if name.is_empty() || name.starts_with('/') || name.ends_with('/') || name.contains("//") {
        return Err(bad("the name is empty or has an empty path component"));
    }
    let (registry, path) = match name.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => (Some(first), rest),
        _ => (None, name),
    };
    if registry.is_some_and(|r| !r.chars().all(|c| c.is_ascii_alphanumeric() || ".-:".contains(c))) {
        return Err(bad(
            "the registry host has characters other than letters, digits, '.', '-' and ':'",
        ));
    }
    if !path
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-/".contains(c))
    {
        return Err(bad(
            "the repository name must be lowercase letters, digits, '.', '_', '-' and '/'",
        ));
    }
    if version.is_empty()
        || version.len() > 128
        || version.starts_with(['.', '-'])
        || !version.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return Err(bad(
            "the tag must be 1-128 letters, digits, '.', '_', '-', not starting with '.' or '-'",
        ));
    }
    Ok(format!("{name}:{version}"))
}

/// RFC 3339 UTC time of `secs` since the epoch.
fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

impl Image {
    /// The image config JSON for a layer with `diff_id`.
    pub fn config_json(&self, diff_id: &str) -> Value {
        let c = &self.config;
        let mut runtime = serde_json::Map::new();
        if let Some(user) = &c.user {
            runtime.insert("User".into(), json!(user));
        }
        if !c.exposed_ports.is_empty() {
            let ports: serde_json::Map<String, Value> =
                c.exposed_ports.iter().map(|p| (p.clone(), json!({}))).collect();
            runtime.insert("ExposedPorts".into(), Value::Object(ports));
        }
        if !c.env.is_empty() {
            runtime.insert("Env".into(), json!(c.env));
        }
        if !c.entrypoint.is_empty() {
            runtime.insert("Entrypoint".into(), json!(c.entrypoint));
        }
        if !c.cmd.is_empty() {
            runtime.insert("Cmd".into(), json!(c.cmd));
        }
        if let Some(dir) = &c.working_dir {
            runtime.insert("WorkingDir".into(), json!(dir));
        }
        if !c.labels.is_empty() {
            runtime.insert("Labels".into(), json!(c.labels));
        }
        let created = rfc3339(self.created);
        json!({
            "architecture": c.architecture,
            "os": c.os,
            "created": created,
            "config": runtime,
            "rootfs": { "type": "layers", "diff_ids": [diff_id] },
            "history": [{ "created": created, "created_by": "sluice-image" }],
        })
    }

    /// Writes the image as a docker-archive tarball tagged `repo_tags`.
    pub fn write_docker_archive<W: Write>(&self, out: W, repo_tags: &[String]) -> Result<Written, ImageError> {
        let tags = repo_tags
            .iter()
            .map(|t| normalize_tag(t))
            .collect::<Result<Vec<_>, _>>()?;
        let layer = self.layer.to_tar(self.created)?;
        let diff_hex = sha256_hex(&layer);
        let diff_id = format!("sha256:{diff_hex}");
        let config = serde_json::to_vec(&self.config_json(&diff_id)).expect("a JSON value serialises");
        let id_hex = sha256_hex(&config);
        let layer_path = format!("{diff_hex}/layer.tar");
        let manifest = json!([{
            "Config": format!("{id_hex}.json"),
            "RepoTags": tags,
            "Layers": [layer_path],
        }]);
        let manifest = serde_json::to_vec(&manifest).expect("a JSON value serialises");

        let mut w = TarWriter::new(out);
        let header = |path: &str, kind| Header {
            path: path.to_string(),
            kind,
            mode: if kind == Kind::Dir { 0o755 } else { 0o644 },
            uid: 0,
            gid: 0,
            mtime: self.created,
            link: String::new(),
        };
        let mut files: Vec<(String, Kind, &[u8])> = vec![
            (format!("{id_hex}.json"), Kind::File, &config),
            (diff_hex.clone(), Kind::Dir, &[]),
            (layer_path, Kind::File, &layer),
            ("manifest.json".to_string(), Kind::File, &manifest),
        ];
        files.sort_by(|a, b| a.0.cmp(&b.0));
        for (path, kind, data) in files {
            w.append(&header(&path, kind), data)?;
        }
        w.finish()?;
        Ok(Written {
            image_id: format!("sha256:{id_hex}"),
            diff_id,
            layer_size: layer.len() as u64,
            repo_tags: tags,
        })
    }

    /// Writes the archive to `path` (through a temporary file beside it, so
    /// a failed build leaves no half-written image).
    pub fn write_docker_archive_file(&self, path: &Path, repo_tags: &[String]) -> Result<Written, ImageError> {
        let io = |error| ImageError::Write {
            path: path.display().to_string(),
            error,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let file = std::fs::File::create(&tmp).map_err(io)?;
        let result = self
            .write_docker_archive(std::io::BufWriter::new(file), repo_tags)
            .and_then(|w| std::fs::rename(&tmp, path).map(|()| w).map_err(io));
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }
}

/// A docker archive read back: its manifest entry, config and layers.
#[derive(Debug, Clone)]
pub struct LoadedImage {
    pub repo_tags: Vec<String>,
    pub image_id: String,
    pub config: Value,
    /// Each layer's entries, in order.
    pub layers: Vec<Vec<tar::Entry>>,
}

impl LoadedImage {
    /// The entry at an absolute image path in the last layer that has it.
    pub fn file(&self, path: &str) -> Option<&tar::Entry> {
        let rel = path.trim_start_matches('/').trim_end_matches('/');
        self.layers.iter().rev().find_map(|l| l.iter().find(|e| e.path == rel))
    }

    /// Follows symbolic links (absolute or relative, at most 40) to the
    /// entry they end at.
    pub fn resolve(&self, path: &str) -> Option<&tar::Entry> {
        let mut current = std::path::PathBuf::from(path);
        for _ in 0..40 {
            let entry = self.file(&current.to_string_lossy())?;
            if entry.kind != Some(Kind::Symlink) {
                return Some(entry);
            }
            let parent = current.parent().unwrap_or(Path::new("/")).to_path_buf();
            current = crate::layer::lexical_normalize(&parent.join(&entry.link));
        }
        None
    }

    /// The string value of `config.<key>` (`User`, `WorkingDir`).
    pub fn runtime(&self, key: &str) -> Option<&Value> {
        self.config.get("config").and_then(|c| c.get(key))
    }
}

/// Reads a single-image docker archive and checks that the config and
/// every layer match the digests that name them.
pub fn read_docker_archive(bytes: &[u8]) -> Result<LoadedImage, ImageError> {
    let bad = |m: String| ImageError::Malformed(m);
    let entries = tar::read(bytes)?;
    let find = |name: &str| {
        entries
            .iter()
            .find(|e| e.path == name && e.kind == Some(Kind::File))
            .ok_or_else(|| bad(format!("no {name} in the archive")))
    };
    let manifest: Value =
        serde_json::from_slice(&find("manifest.json")?.data).map_err(|e| bad(format!("manifest.json: {e}")))?;
    let [image] = manifest.as_array().map(Vec::as_slice).unwrap_or_default() else {
        return Err(bad("manifest.json does not hold exactly one image".into()));
    };
    let field = |key: &str| image.get(key).ok_or_else(|| bad(format!("manifest.json: no {key}")));
    let config_name = field("Config")?
        .as_str()
        .ok_or_else(|| bad("manifest.json: Config is not a string".into()))?;
    let config_bytes = &find(config_name)?.data;
    let id_hex = sha256_hex(config_bytes);
    if config_name != format!("{id_hex}.json") {
        return Err(bad(format!("{config_name}: its sha256 is {id_hex}")));
    }
    let config: Value = serde_json::from_slice(config_bytes).map_err(|e| bad(format!("{config_name}: {e}")))?;
    let repo_tags = field("RepoTags")?
        .as_array()
        .map(|a| a.iter().filter_map(|t| t.as_str().map(String::from)).collect())
        .unwrap_or_default();
    let layer_names = field("Layers")?.as_array().cloned().unwrap_or_default();
    let diff_ids = config
        .pointer("/rootfs/diff_ids")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if diff_ids.len() != layer_names.len() {
        return Err(bad(format!(
            "{} layers but {} diff_ids in the config",
            layer_names.len(),
            diff_ids.len()
        )));
    }
    let mut layers = Vec::new();
    for (name, diff_id) in layer_names.iter().zip(&diff_ids) {
        let name = name
            .as_str()
            .ok_or_else(|| bad("manifest.json: a layer name is not a string".into()))?;
        let data = &find(name)?.data;
        let actual = format!("sha256:{}", sha256_hex(data));
        if diff_id.as_str() != Some(actual.as_str()) {
            return Err(bad(format!(
                "{name}: sha256 {actual}, but the config's diff_id is {diff_id}"
            )));
        }
        layers.push(tar::read(data).map_err(|e| bad(format!("{name}: {e}")))?);
    }
    Ok(LoadedImage {
        repo_tags,
        image_id: format!("sha256:{id_hex}"),
        config,
        layers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_checked_and_default_to_latest() {
        assert_eq!(normalize_tag("sluice:dev").unwrap(), "sluice:dev");
        assert_eq!(normalize_tag("busybox").unwrap(), "busybox:latest");
        assert_eq!(
            normalize_tag("localhost:5000/a/pause:3.9").unwrap(),
            "localhost:5000/a/pause:3.9"
        );
        assert_eq!(
            normalize_tag("localhost:5000/pause").unwrap(),
            "localhost:5000/pause:latest"
        );
        for bad in ["Sluice:dev", "sluice:", "sluice@sha256:ab", "/x:1", "a//b:1", "x:-1"] {
            assert!(normalize_tag(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn created_is_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_709_251_199), "2024-02-29T23:59:59Z");
    }

    #[test]
    fn an_archive_reads_back_and_is_reproducible() {
        let mut image = Image::default();
        image.layer.file("/bin/app", b"#!x".to_vec(), 0o755).unwrap();
        image.config.entrypoint = vec!["/bin/app".into()];
        image.config.exposed_ports = vec!["8080/tcp".into()];
        let mut a = Vec::new();
        let written = image.write_docker_archive(&mut a, &["app:1".into()]).unwrap();
        let mut b = Vec::new();
        assert_eq!(image.write_docker_archive(&mut b, &["app:1".into()]).unwrap(), written);
        assert_eq!(a, b);

        let loaded = read_docker_archive(&a).unwrap();
        assert_eq!(loaded.image_id, written.image_id);
        assert_eq!(loaded.repo_tags, ["app:1"]);
        assert_eq!(loaded.runtime("Entrypoint").unwrap(), &json!(["/bin/app"]));
        assert_eq!(loaded.runtime("ExposedPorts").unwrap(), &json!({"8080/tcp": {}}));
        assert_eq!(loaded.config["architecture"], host_architecture());
        assert_eq!(loaded.config["rootfs"]["diff_ids"][0], json!(written.diff_id));
        assert_eq!(loaded.file("/bin/app").unwrap().data, b"#!x");

        // A changed layer no longer matches the config's diff id.
        let mut tampered = a.clone();
        let at = tampered.windows(3).position(|w| w == b"#!x").unwrap();
        tampered[at + 2] = b'y';
        let err = read_docker_archive(&tampered).unwrap_err().to_string();
        assert!(err.contains("layer.tar: sha256") && err.contains("diff_id"), "{err}");
    }
}
