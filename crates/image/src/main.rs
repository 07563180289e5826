//! `sluice-image`: builds docker-archive images offline (see the crate docs).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use sluice_image::sluice::{self, DEFAULT_TAG, HOST_CA_BUNDLE, SLUICE};
use sluice_image::{Image, Layer, Written, read_docker_archive};

#[derive(Parser)]
#[command(
    name = "sluice-image",
    version,
    about = "Builds container images (docker archives) offline: no base image, no registry"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The Sluice image: the binary, its shared libraries, CA bundle,
    /// passwd/group with nonroot (65532), /tmp; user, entrypoint and ports
    /// as in the Dockerfile.
    Sluice {
        /// The sluice binary.
        #[arg(long, default_value = "target/dist/sluice")]
        binary: PathBuf,
        /// name:tag, repeatable.
        #[arg(long = "tag", default_value = DEFAULT_TAG)]
        tags: Vec<String>,
        #[arg(long, short, default_value = "target/image/sluice.tar")]
        output: PathBuf,
        #[arg(long, default_value = HOST_CA_BUNDLE)]
        ca_bundle: PathBuf,
    },
    /// Any image, from host files.
    Build(Box<BuildArgs>),
    /// Checks a docker archive against the Sluice runtime contract; with
    /// --run, as root, runs `<entrypoint> --version` in a chroot of it as
    /// the image's user.
    Check {
        archive: PathBuf,
        #[arg(long)]
        run: bool,
    },
}

#[derive(clap::Args)]
struct BuildArgs {
    /// name:tag, repeatable.
    #[arg(long = "tag", required = true)]
    tags: Vec<String>,
    #[arg(long, short)]
    output: PathBuf,
    /// IMAGE_PATH=HOST_PATH: a host executable and the shared libraries
    /// (and loader) `ldd` says it needs, at their host paths.
    #[arg(long, value_name = "DEST=SRC")]
    exec: Vec<String>,
    /// IMAGE_PATH=HOST_PATH: a host file, with its permission bits.
    #[arg(long, value_name = "DEST=SRC")]
    file: Vec<String>,
    /// IMAGE_PATH or IMAGE_PATH=OCTAL_MODE (root-owned).
    #[arg(long, value_name = "DEST[=MODE]")]
    dir: Vec<String>,
    /// IMAGE_PATH=TARGET.
    #[arg(long, value_name = "DEST=TARGET")]
    symlink: Vec<String>,
    /// /etc/passwd and /etc/group with root, nobody and nonroot
    /// (65532), /tmp (1777), /root and /home/nonroot, as distroless.
    #[arg(long)]
    nonroot_base: bool,
    /// Copy this CA bundle to /etc/ssl/certs/ca-certificates.crt and set
    /// SSL_CERT_FILE.
    #[arg(long)]
    ca_bundle: Option<PathBuf>,
    /// One entrypoint argument, repeatable (in order).
    #[arg(long, allow_hyphen_values = true)]
    entrypoint: Vec<String>,
    /// One cmd argument, repeatable (in order).
    #[arg(long, allow_hyphen_values = true)]
    cmd: Vec<String>,
    /// uid:gid.
    #[arg(long)]
    user: Option<String>,
    /// KEY=value, repeatable (PATH is set unless given).
    #[arg(long)]
    env: Vec<String>,
    /// 8080 or 8080/tcp or 53/udp, repeatable.
    #[arg(long)]
    port: Vec<String>,
    #[arg(long)]
    workdir: Option<String>,
    /// key=value, repeatable.
    #[arg(long)]
    label: Vec<String>,
}

fn pair<'a>(flag: &str, value: &'a str) -> Result<(&'a str, &'a str)> {
    value
        .split_once('=')
        .with_context(|| format!("--{flag} {value}: expected DEST=VALUE"))
}

fn report(output: &Path, w: &Written) {
    println!(
        "wrote {} ({} MiB layer): {} id {}",
        output.display(),
        w.layer_size.div_ceil(1 << 20),
        w.repo_tags.join(", "),
        w.image_id
    );
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Sluice {
            binary,
            tags,
            output,
            ca_bundle,
        } => {
            let image = sluice::sluice_image(&binary, &ca_bundle)
                .with_context(|| format!("building the Sluice image from {}", binary.display()))?;
            let written = image.write_docker_archive_file(&output, &tags)?;
            report(&output, &written);
        }
        Command::Build(args) => build(*args)?,
        Command::Check { archive, run } => check(&archive, run)?,
    }
    Ok(())
}

/// `build`: the layer from the flags, then the config, written.
fn build(args: BuildArgs) -> Result<()> {
    let BuildArgs {
        tags,
        output,
        exec,
        file,
        dir,
        symlink,
        nonroot_base,
        ca_bundle,
        entrypoint,
        cmd,
        user,
        env,
        port,
        workdir,
        label,
    } = args;
    let mut image = Image::default();
    let layer = &mut image.layer;
    if nonroot_base {
        sluice::add_nonroot_base(layer, &SLUICE)?;
    }
    add_dirs(layer, &dir)?;
    for f in &file {
        let (dest, src) = pair("file", f)?;
        layer.host_file(dest, Path::new(src))?;
    }
    for e in &exec {
        let (dest, src) = pair("exec", e)?;
        layer.host_executable(dest, Path::new(src))?;
    }
    for s in &symlink {
        let (dest, target) = pair("symlink", s)?;
        layer.symlink(dest, target)?;
    }
    if let Some(ca) = &ca_bundle {
        layer.host_file(SLUICE.ca_bundle, ca)?;
        image.config.env.push(format!("SSL_CERT_FILE={}", SLUICE.ca_bundle));
    }
    set_env(&mut image.config.env, env)?;
    for p in port {
        image.config.exposed_ports.push(exposed_port(p)?);
    }
    for l in &label {
        let (k, v) = pair("label", l)?;
        image.config.labels.insert(k.to_string(), v.to_string());
    }
    image.config.entrypoint = entrypoint;
    image.config.cmd = cmd;
    image.config.user = user;
    image.config.working_dir = workdir;
    let written = image.write_docker_archive_file(&output, &tags)?;
    report(&output, &written);
    Ok(())
}

/// `--dir PATH[=MODE]` (octal; 0755 by default), owned by root.
fn add_dirs(layer: &mut Layer, dirs: &[String]) -> Result<()> {
    for d in dirs {
        let (path, mode) = match d.split_once('=') {
            Some((p, m)) => (
                p,
                u32::from_str_radix(m, 8).with_context(|| format!("--dir {d}: {m} is not an octal mode"))?,
            ),
            None => (d.as_str(), 0o755),
        };
        layer.dir(path, mode, 0, 0)?;
    }
    Ok(())
}

/// `--env KEY=value`, after what is there; a `PATH=` among them replaces
/// the default PATH.
fn set_env(config_env: &mut Vec<String>, env: Vec<String>) -> Result<()> {
    if env.iter().any(|e| e.starts_with("PATH=")) {
        config_env.retain(|e| !e.starts_with("PATH="));
    }
    for e in env {
        if !e.contains('=') {
            bail!("--env {e}: expected KEY=value");
        }
        config_env.push(e);
    }
    Ok(())
}

/// `--port N[/PROTO]`, TCP unless said.
fn exposed_port(p: String) -> Result<String> {
    let number = p.split('/').next().unwrap_or_default();
    number
        .parse::<u16>()
        .with_context(|| format!("--port {p}: not a port number"))?;
    Ok(if p.contains('/') { p } else { format!("{p}/tcp") })
}

/// `check`: the archive against the runtime contract, and with `--run`
/// the binary run in a chroot.
fn check(archive: &Path, run: bool) -> Result<()> {
    let bytes = std::fs::read(archive).with_context(|| format!("reading {}", archive.display()))?;
    let image = read_docker_archive(&bytes).with_context(|| format!("reading {}", archive.display()))?;
    let problems = sluice::check_image(&image, &SLUICE);
    if !problems.is_empty() {
        bail!(
            "{} breaks the Sluice runtime contract:\n  {}",
            archive.display(),
            problems.join("\n  ")
        );
    }
    println!(
        "{}: {} {} keeps the Sluice runtime contract",
        archive.display(),
        image.repo_tags.join(", "),
        image.image_id
    );
    if run {
        if !sluice::can_chroot() {
            bail!("--run needs root (chroot)");
        }
        let dir = std::env::temp_dir().join(format!("sluice-image-check-{}", std::process::id()));
        let out = sluice::run_in_chroot(&image, &dir, &["--version"]).map_err(anyhow::Error::msg)?;
        println!("in a chroot as {}: {}", SLUICE.user, out.trim());
    }
    Ok(())
}
