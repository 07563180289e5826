//! The Sluice image: its runtime contract (the one place that states it;
//! the `Dockerfile` and the image this crate builds are both checked
//! against it), the distroless-like non-root base, the build, and the
//! checks.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use thiserror::Error;

use crate::archive::{Config, DEFAULT_PATH, Image, LoadedImage};
use crate::layer::{Layer, LayerError};
use crate::libs::{self, LibsError};
use crate::tar::Kind;

/// What the Sluice image promises whoever runs it (the chart, the e2e
/// harness, a `docker run`), whichever way it was built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuntimeContract {
    pub uid: u32,
    pub gid: u32,
    /// `uid:gid` as the config's `User` (numeric, so that the kubelet can
    /// check `runAsNonRoot`).
    pub user: &'static str,
    /// The user's name in `/etc/passwd` and `/etc/group` (distroless).
    pub user_name: &'static str,
    pub home: &'static str,
    pub binary: &'static str,
    pub entrypoint: &'static [&'static str],
    pub ports: &'static [u16],
    /// The CA bundle, also named by `SSL_CERT_FILE`.
    pub ca_bundle: &'static str,
}

pub const SLUICE: RuntimeContract = RuntimeContract {
    uid: 65532,
    gid: 65532,
    user: "65532:65532",
    user_name: "nonroot",
    home: "/home/nonroot",
    binary: "/usr/local/bin/sluice",
    entrypoint: &["/usr/local/bin/sluice"],
    ports: &[8080, 9443],
    ca_bundle: "/etc/ssl/certs/ca-certificates.crt",
};

/// The tag `sluice-image sluice` gives by default.
pub const DEFAULT_TAG: &str = "sluice:dev";
/// Debian's `ca-certificates` bundle.
pub const HOST_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

#[derive(Debug, Error)]
pub enum SluiceImageError {
    #[error(transparent)]
    Layer(#[from] LayerError),
    #[error(transparent)]
    Libs(#[from] LibsError),
    #[error("CA bundle {path}: {reason} (install Debian's ca-certificates, or pass another bundle)")]
    CaBundle { path: PathBuf, reason: String },
    #[error("Dockerfile: {0}")]
    Dockerfile(String),
}

/// `/etc/passwd`, `/etc/group`, `/tmp` (1777), `/root` and the user's home
/// as in distroless `:nonroot` images: root, nobody and the contract's
/// user, no login shells.
pub fn add_nonroot_base(layer: &mut Layer, contract: &RuntimeContract) -> Result<(), LayerError> {
    let (uid, gid, name, home) = (contract.uid, contract.gid, contract.user_name, contract.home);
    let passwd = format!(
        "root:x:0:0:root:/root:/sbin/nologin\n\
         nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n\
         {name}:x:{uid}:{gid}:{name}:{home}:/sbin/nologin\n"
    );
    let group = format!("root:x:0:\nnobody:x:65534:\n{name}:x:{gid}:\n");
    layer.file("/etc/passwd", passwd, 0o644)?;
    layer.file("/etc/group", group, 0o644)?;
    layer.dir("/tmp", 0o1777, 0, 0)?;
    layer.dir("/root", 0o700, 0, 0)?;
    layer.dir(home, 0o700, uid, gid)?;
    Ok(())
}

/// The Sluice image from a `sluice` binary built on this host: the binary,
/// the shared libraries and loader it needs (from `ldd`, none for a static
/// binary), the CA bundle, the non-root base and the contract's config.
pub fn sluice_image(binary: &Path, ca_bundle: &Path) -> Result<Image, SluiceImageError> {
    image_for(&SLUICE, binary, ca_bundle)
}

/// [`sluice_image`] for any contract.
pub fn image_for(contract: &RuntimeContract, binary: &Path, ca_bundle: &Path) -> Result<Image, SluiceImageError> {
    let mut image = Image::default();
    let layer = &mut image.layer;
    add_nonroot_base(layer, contract)?;
    layer.host_executable(contract.binary, binary)?;
    let ca = std::fs::read(ca_bundle).map_err(|e| SluiceImageError::CaBundle {
        path: ca_bundle.to_path_buf(),
        reason: e.to_string(),
    })?;
    if !String::from_utf8_lossy(&ca).contains("BEGIN CERTIFICATE") {
        return Err(SluiceImageError::CaBundle {
            path: ca_bundle.to_path_buf(),
            reason: "holds no PEM certificate".into(),
        });
    }
    layer.file(contract.ca_bundle, ca, 0o644)?;
    image.config = Config {
        user: Some(contract.user.to_string()),
        entrypoint: contract.entrypoint.iter().map(|s| s.to_string()).collect(),
        env: vec![
            format!("PATH={DEFAULT_PATH}"),
            format!("SSL_CERT_FILE={}", contract.ca_bundle),
        ],
        exposed_ports: contract.ports.iter().map(|p| format!("{p}/tcp")).collect(),
        working_dir: Some(contract.home.to_string()),
        ..Config::default()
    };
    Ok(image)
}

/// What a Dockerfile's final stage sets up at run time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerfileRuntime {
    pub base: String,
    /// `USER` with distroless names mapped to ids (`nonroot:nonroot` →
    /// `65532:65532`).
    pub user: String,
    pub entrypoint: Vec<String>,
    pub ports: Vec<u16>,
    /// The destinations of the final stage's `COPY` instructions.
    pub copied_to: Vec<String>,
}

/// Reads the final stage of a Dockerfile (comments, `\` continuations,
/// exec-form `ENTRYPOINT`).
pub fn dockerfile_runtime(text: &str) -> Result<DockerfileRuntime, SluiceImageError> {
    let instructions = instructions(text);
    let last_from = instructions
        .iter()
        .rposition(|i| {
            i.split_whitespace()
                .next()
                .is_some_and(|w| w.eq_ignore_ascii_case("FROM"))
        })
        .ok_or_else(|| SluiceImageError::Dockerfile("no FROM".into()))?;
    let mut runtime = DockerfileRuntime {
        base: instructions[last_from]
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_string(),
        user: String::new(),
        entrypoint: Vec::new(),
        ports: Vec::new(),
        copied_to: Vec::new(),
    };
    for inst in &instructions[last_from + 1..] {
        runtime.take(inst)?;
    }
    Ok(runtime)
}

/// A Dockerfile's instructions, one a string: comments and blank lines
/// dropped, `\` continuations joined.
fn instructions(text: &str) -> Vec<String> {
    let mut instructions = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if pending.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        if let Some(head) = trimmed.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        if trimmed.starts_with('#') {
            continue;
        }
        pending.push_str(trimmed);
        instructions.push(std::mem::take(&mut pending));
    }
    instructions
}

/// A distroless user or group name as its id (a number stays itself).
fn distroless_id(name: &str) -> Option<String> {
    match name {
        "nonroot" => Some("65532".to_string()),
        "root" => Some("0".to_string()),
        "nobody" => Some("65534".to_string()),
        n if n.chars().all(|c| c.is_ascii_digit()) => Some(n.to_string()),
        _ => None,
    }
}

impl DockerfileRuntime {
    /// Takes in one instruction of the final stage: `USER`, `ENTRYPOINT`,
    /// `EXPOSE`, `COPY` and `ADD` count, the rest not.
    fn take(&mut self, inst: &str) -> Result<(), SluiceImageError> {
        let bad = |m: String| SluiceImageError::Dockerfile(m);
        let (word, args) = inst.split_once(char::is_whitespace).unwrap_or((inst, ""));
        let args = args.trim();
        match word.to_ascii_uppercase().as_str() {
            "USER" => {
                let ids: Option<Vec<String>> = args.split(':').map(distroless_id).collect();
                let ids = ids.ok_or_else(|| bad(format!("USER {args}: not a distroless user name or id")))?;
                self.user = match ids.as_slice() {
                    [u] => u.clone(),
                    [u, g] => format!("{u}:{g}"),
                    _ => return Err(bad(format!("USER {args}: expected user[:group]"))),
                };
            }
            "ENTRYPOINT" => {
                self.entrypoint = serde_json::from_str(args)
                    .map_err(|e| bad(format!("ENTRYPOINT {args}: not the exec (JSON array) form: {e}")))?;
            }
            "EXPOSE" => {
                for port in args.split_whitespace() {
                    let number = port.strip_suffix("/tcp").unwrap_or(port);
                    self.ports.push(
                        number
                            .parse()
                            .map_err(|_| bad(format!("EXPOSE {port}: not a TCP port")))?,
                    );
                }
            }
            "COPY" | "ADD" => {
                let dest = args
                    .split_whitespace()
                    .last()
                    .ok_or_else(|| bad(format!("{inst}: no destination")))?;
                self.copied_to.push(dest.to_string());
            }
            _ => {}
        }
        Ok(())
    }
}

/// Checks a Dockerfile's final stage against a contract; returns every
/// disagreement.
pub fn check_dockerfile(text: &str, contract: &RuntimeContract) -> Result<Vec<String>, SluiceImageError> {
    let d = dockerfile_runtime(text)?;
    let mut problems = Vec::new();
    if !d.base.contains("distroless") || !d.base.ends_with(":nonroot") {
        problems.push(format!(
            "FROM {}: the final stage is not a distroless :nonroot image (which has the {} user {} and a CA bundle at {})",
            d.base, contract.user_name, contract.uid, contract.ca_bundle
        ));
    }
    if d.user != contract.user {
        problems.push(format!(
            "USER is {:?} ({}), the contract says {}",
            d.user, "distroless ids", contract.user
        ));
    }
    if d.entrypoint != contract.entrypoint {
        problems.push(format!(
            "ENTRYPOINT is {:?}, the contract says {:?}",
            d.entrypoint, contract.entrypoint
        ));
    }
    let mut ports = d.ports.clone();
    ports.sort();
    if ports != contract.ports {
        problems.push(format!(
            "EXPOSE is {:?}, the contract says {:?}",
            d.ports, contract.ports
        ));
    }
    if !d.copied_to.iter().any(|dest| dest == contract.binary) {
        problems.push(format!(
            "no COPY to {} (copies go to {:?})",
            contract.binary, d.copied_to
        ));
    }
    Ok(problems)
}

/// Checks a loaded image against a contract without running it: config
/// (user, entrypoint, ports, `SSL_CERT_FILE`, working dir), the passwd and
/// group entries, `/tmp`, the CA bundle, the entrypoint binary, its ELF
/// interpreter and every `DT_NEEDED` library in the loader's default
/// directories. Returns every problem found.
pub fn check_image(image: &LoadedImage, contract: &RuntimeContract) -> Vec<String> {
    let mut problems = config_problems(image, contract);
    problems.extend(file_problems(image, contract));
    problems.extend(binary_problems(image, contract));
    problems
}

/// The config: user, entrypoint, ports, `SSL_CERT_FILE` and a `PATH` with
/// `/usr/local/bin`.
fn config_problems(image: &LoadedImage, contract: &RuntimeContract) -> Vec<String> {
    let mut problems = Vec::new();
    let show = |v: Option<&serde_json::Value>| v.map_or("absent".to_string(), |v| v.to_string());
    let ports: serde_json::Map<_, _> = contract.ports.iter().map(|p| (format!("{p}/tcp"), json!({}))).collect();
    for (key, want) in [
        ("User", json!(contract.user)),
        ("Entrypoint", json!(contract.entrypoint)),
        ("ExposedPorts", json!(ports)),
    ] {
        let got = image.runtime(key);
        if got != Some(&want) {
            problems.push(format!("config {key} is {}, want {want}", show(got)));
        }
    }
    let env: Vec<&str> = image
        .runtime("Env")
        .and_then(|e| e.as_array())
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str())
        .collect();
    let ssl = format!("SSL_CERT_FILE={}", contract.ca_bundle);
    if !env.contains(&ssl.as_str()) {
        problems.push(format!("config Env {env:?} lacks {ssl}"));
    }
    if !env
        .iter()
        .any(|e| e.starts_with("PATH=") && e.split([':', '=']).any(|d| d == "/usr/local/bin"))
    {
        problems.push(format!("config Env {env:?} has no PATH with /usr/local/bin"));
    }
    problems
}

/// The files the runtime needs: passwd and group entries, `/tmp`, the
/// working dir, the CA bundle.
fn file_problems(image: &LoadedImage, contract: &RuntimeContract) -> Vec<String> {
    let mut problems = Vec::new();
    let mut expect = |ok: bool, what: String| {
        if !ok {
            problems.push(what);
        }
    };
    let text = |path: &str| {
        image
            .resolve(path)
            .map(|e| String::from_utf8_lossy(&e.data).into_owned())
    };
    let (uid, gid, name) = (contract.uid, contract.gid, contract.user_name);
    let passwd = text("/etc/passwd").unwrap_or_default();
    expect(
        passwd.lines().any(|l| l.starts_with(&format!("{name}:x:{uid}:{gid}:"))),
        format!("/etc/passwd has no {name}:x:{uid}:{gid} entry"),
    );
    expect(
        passwd.lines().any(|l| l.starts_with("root:x:0:0:")),
        "/etc/passwd has no root entry".into(),
    );
    let group = text("/etc/group").unwrap_or_default();
    expect(
        group.lines().any(|l| l.starts_with(&format!("{name}:x:{gid}:"))),
        format!("/etc/group has no {name}:x:{gid}"),
    );
    let tmp = image.resolve("/tmp");
    expect(
        tmp.is_some_and(|t| t.kind == Some(Kind::Dir) && t.mode & 0o7777 == 0o1777),
        "/tmp is not a directory with mode 1777".into(),
    );
    if let Some(Some(dir)) = image.runtime("WorkingDir").map(|d| d.as_str()) {
        let home = image.resolve(dir);
        expect(
            home.is_some_and(|h| h.kind == Some(Kind::Dir)),
            format!("WorkingDir {dir} is not a directory"),
        );
    }
    let ca = text(contract.ca_bundle).unwrap_or_default();
    expect(
        ca.contains("BEGIN CERTIFICATE"),
        format!("{} holds no PEM certificate", contract.ca_bundle),
    );
    problems
}

/// Where the loader looks for `DT_NEEDED` libraries by default.
const LIBRARY_DIRS: [&str; 8] = [
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
];

/// The entrypoint binary: a file executable by all and writable by none
/// but its owner, with its ELF interpreter and every library it needs.
fn binary_problems(image: &LoadedImage, contract: &RuntimeContract) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(bin) = image.resolve(contract.binary).filter(|b| b.kind == Some(Kind::File)) else {
        problems.push(format!("{} is not a file in the image", contract.binary));
        return problems;
    };
    if bin.mode & 0o111 != 0o111 {
        problems.push(format!(
            "{} is not executable by all (mode {:o})",
            contract.binary, bin.mode
        ));
    }
    if bin.mode & 0o022 != 0 {
        problems.push(format!(
            "{} is writable by others (mode {:o})",
            contract.binary, bin.mode
        ));
    }
    let needs = match libs::elf_needs(&bin.data, contract.binary) {
        Err(e) => {
            problems.push(e.to_string());
            return problems;
        }
        Ok(needs) => needs,
    };
    if let Some(interp) = &needs.interpreter
        && image.resolve(interp).is_none_or(|e| e.kind != Some(Kind::File))
    {
        problems.push(format!(
            "the ELF interpreter {interp} of {} is not in the image",
            contract.binary
        ));
    }
    let dirs = LIBRARY_DIRS;
    for lib in &needs.needed {
        if !dirs.iter().any(|d| {
            image
                .resolve(&format!("{d}/{lib}"))
                .is_some_and(|e| e.kind == Some(Kind::File))
        }) {
            problems.push(format!("{} needs {lib}, which is in none of {dirs:?}", contract.binary));
        }
    }
    problems
}

/// Whether this process can `chroot` (it is root).
pub fn can_chroot() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Extracts the image's layers into `dir` (which must be empty or absent)
/// with their modes and owners. Needs root to set owners.
pub fn extract(image: &LoadedImage, dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{PermissionsExt, lchown, symlink};
    std::fs::create_dir_all(dir)?;
    for layer in &image.layers {
        for e in layer {
            let path = dir.join(&e.path);
            match e.kind {
                Some(Kind::Dir) => {
                    std::fs::create_dir_all(&path)?;
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(e.mode))?;
                }
                Some(Kind::File) => {
                    std::fs::write(&path, &e.data)?;
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(e.mode))?;
                }
                Some(Kind::Symlink) => symlink(&e.link, &path)?,
                None => continue,
            }
            lchown(&path, Some(e.uid), Some(e.gid))?;
        }
    }
    Ok(())
}

/// Runs the image's entrypoint with `args` in a chroot of its extracted
/// layers, as the config's user (`chroot --userspec`), and returns its
/// stdout. Needs root; `dir` is removed afterwards.
pub fn run_in_chroot(image: &LoadedImage, dir: &Path, args: &[&str]) -> Result<String, String> {
    let _ = std::fs::remove_dir_all(dir);
    let result = (|| {
        extract(image, dir).map_err(|e| format!("extracting the image into {}: {e}", dir.display()))?;
        let entrypoint: Vec<String> = serde_json::from_value(image.runtime("Entrypoint").cloned().unwrap_or_default())
            .map_err(|e| format!("config Entrypoint: {e}"))?;
        let user = image.runtime("User").and_then(|u| u.as_str()).unwrap_or("0:0");
        let output = Command::new("chroot")
            .arg(format!("--userspec={user}"))
            .arg(dir)
            .args(&entrypoint)
            .args(args)
            .env_clear()
            .env("PATH", DEFAULT_PATH)
            .output()
            .map_err(|e| format!("running chroot: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "`chroot --userspec={user} {} {} {}` exited with {}: {}",
                dir.display(),
                entrypoint.join(" "),
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    })();
    let _ = std::fs::remove_dir_all(dir);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOCKERFILE: &str = "# syntax=docker/dockerfile:1\n\
        FROM rust:1 AS build\nUSER root\nRUN cargo build \\\n  --profile dist\n\
        FROM gcr.io/distroless/cc-debian12:nonroot\n\
        COPY --from=build /out/sluice /usr/local/bin/sluice\n\
        # a comment\nUSER nonroot:nonroot\nEXPOSE 8080 9443\nENTRYPOINT [\"/usr/local/bin/sluice\"]\n";

    #[test]
    fn the_final_stage_is_read() {
        let d = dockerfile_runtime(DOCKERFILE).unwrap();
        assert_eq!(d.base, "gcr.io/distroless/cc-debian12:nonroot");
        assert_eq!(d.user, "65532:65532");
        assert_eq!(d.entrypoint, ["/usr/local/bin/sluice"]);
        assert_eq!(d.ports, [8080, 9443]);
        assert_eq!(d.copied_to, ["/usr/local/bin/sluice"]);
        assert_eq!(check_dockerfile(DOCKERFILE, &SLUICE).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn every_disagreement_is_reported() {
        let changed = DOCKERFILE
            .replace("USER nonroot:nonroot", "USER root")
            .replace("EXPOSE 8080 9443", "EXPOSE 8080")
            .replace("ENTRYPOINT [\"/usr/local/bin/sluice\"]", "ENTRYPOINT [\"/sluice\"]")
            .replace("/usr/local/bin/sluice\n", "/sluice\n");
        let problems = check_dockerfile(&changed, &SLUICE).unwrap();
        assert_eq!(problems.len(), 4, "{problems:#?}");
        assert!(problems[0].starts_with("USER is \"0\""), "{problems:#?}");
        assert!(problems[1].starts_with("ENTRYPOINT"), "{problems:#?}");
        assert!(problems[2].starts_with("EXPOSE"), "{problems:#?}");
        assert!(
            problems[3].starts_with("no COPY to /usr/local/bin/sluice"),
            "{problems:#?}"
        );
        let err = dockerfile_runtime("FROM x\nENTRYPOINT /bin/sh -c x\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not the exec (JSON array) form"), "{err}");
    }
}
