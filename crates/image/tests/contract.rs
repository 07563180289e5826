//! The Sluice runtime contract (`sluice_image::sluice::SLUICE`): the
//! `Dockerfile` keeps it, and so does the image `sluice-image` builds. A
//! small host binary (`/bin/true`) stands in for `sluice` so that this runs
//! in `cargo test --workspace`; `.ci/run` builds and checks the real image.

use std::path::{Path, PathBuf};
use std::process::Command;

use sluice_image::sluice::{self, HOST_CA_BUNDLE, SLUICE};
use sluice_image::tar::Kind;
use sluice_image::{Image, LoadedImage, read_docker_archive};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("sluice-image-{name}-{}", std::process::id()))
}

/// The stand-in binary, or `None` (with a message) where this host cannot
/// build the image at all.
fn stand_in() -> Option<&'static Path> {
    let ok = Path::new("/bin/true").exists()
        && Path::new(HOST_CA_BUNDLE).exists()
        && Command::new("ldd").arg("--version").output().is_ok();
    if !ok {
        eprintln!("skipped: needs /bin/true, ldd and {HOST_CA_BUNDLE} (Debian: coreutils, libc-bin, ca-certificates)");
    }
    ok.then_some(Path::new("/bin/true"))
}

fn build(binary: &Path) -> (Vec<u8>, LoadedImage) {
    let image: Image = sluice::sluice_image(binary, Path::new(HOST_CA_BUNDLE)).unwrap();
    let mut bytes = Vec::new();
    image.write_docker_archive(&mut bytes, &["sluice:test".into()]).unwrap();
    let loaded = read_docker_archive(&bytes).unwrap();
    (bytes, loaded)
}

#[test]
fn the_dockerfile_keeps_the_runtime_contract() {
    let path = repo_root().join("Dockerfile");
    let text = std::fs::read_to_string(&path).unwrap();
    let d = sluice::dockerfile_runtime(&text).unwrap();
    // The contract's values, spelled out once more so that a change to the
    // contract itself shows up here.
    assert_eq!(SLUICE.user, "65532:65532");
    assert_eq!(SLUICE.entrypoint, ["/usr/local/bin/sluice"]);
    assert_eq!(SLUICE.ports, [8080, 9443]);
    assert_eq!(SLUICE.ca_bundle, "/etc/ssl/certs/ca-certificates.crt");
    assert_eq!(d.user, SLUICE.user, "USER nonroot:nonroot is 65532:65532 in distroless");
    assert_eq!(
        sluice::check_dockerfile(&text, &SLUICE).unwrap(),
        Vec::<String>::new(),
        "{}",
        path.display()
    );
}

#[test]
fn an_image_from_a_host_binary_keeps_the_runtime_contract() {
    let Some(binary) = stand_in() else { return };
    let (bytes, image) = build(binary);
    assert_eq!(sluice::check_image(&image, &SLUICE), Vec::<String>::new());

    // What the check covers, asserted directly.
    assert_eq!(image.repo_tags, ["sluice:test"]);
    assert_eq!(image.runtime("User").unwrap(), "65532:65532");
    assert_eq!(
        image.runtime("Entrypoint").unwrap(),
        &serde_json::json!(["/usr/local/bin/sluice"])
    );
    assert_eq!(
        image.runtime("ExposedPorts").unwrap(),
        &serde_json::json!({"8080/tcp": {}, "9443/tcp": {}})
    );
    let bin = image.file("/usr/local/bin/sluice").unwrap();
    assert_eq!((bin.kind, bin.mode, bin.uid, bin.gid), (Some(Kind::File), 0o755, 0, 0));
    assert_eq!(bin.data, std::fs::read(binary).unwrap());
    let passwd = String::from_utf8(image.file("/etc/passwd").unwrap().data.clone()).unwrap();
    assert!(
        passwd.contains("nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"),
        "{passwd}"
    );
    let tmp = image.file("/tmp").unwrap();
    assert_eq!((tmp.kind, tmp.mode), (Some(Kind::Dir), 0o1777));
    let home = image.file("/home/nonroot").unwrap();
    assert_eq!((home.uid, home.gid, home.mode), (65532, 65532, 0o700));
    assert_eq!(
        image.file(SLUICE.ca_bundle).unwrap().data,
        std::fs::read(HOST_CA_BUNDLE).unwrap()
    );
    // Every library ldd names is there (links reproduced), the loader too.
    for lib in sluice_image::libs::shared_libraries(binary).unwrap() {
        let entry = image
            .resolve(&lib.to_string_lossy())
            .unwrap_or_else(|| panic!("{} missing", lib.display()));
        assert_eq!(entry.data, std::fs::read(&lib).unwrap(), "{}", lib.display());
    }
    let interp = sluice_image::libs::elf_needs(&bin.data, "true")
        .unwrap()
        .interpreter
        .unwrap();
    assert!(
        image.resolve(&interp).is_some_and(|e| e.kind == Some(Kind::File)),
        "{interp}"
    );
    // Nothing else: no shell, no package manager.
    let files: Vec<&str> = image.layers[0]
        .iter()
        .filter(|e| e.kind == Some(Kind::File))
        .map(|e| e.path.as_str())
        .collect();
    assert!(
        files
            .iter()
            .all(|f| f.starts_with("etc/") || f.starts_with("usr/local/bin/") || f.contains("lib")),
        "{files:?}"
    );
    assert!(image.resolve("/bin/sh").is_none());

    // Deterministic: the same inputs, the same bytes and image id.
    assert_eq!(build(binary).0, bytes);
}

#[test]
fn a_broken_image_is_reported_field_by_field() {
    let Some(binary) = stand_in() else { return };
    let mut image = sluice::sluice_image(binary, Path::new(HOST_CA_BUNDLE)).unwrap();
    image.config.user = Some("0:0".into());
    image.config.exposed_ports.pop();
    image.layer.file(SLUICE.ca_bundle, b"".to_vec(), 0o644).unwrap();
    image
        .layer
        .file("/etc/passwd", b"root:x:0:0:root:/root:/sbin/nologin\n".to_vec(), 0o644)
        .unwrap();
    let mut bytes = Vec::new();
    image
        .write_docker_archive(&mut bytes, &["sluice:broken".into()])
        .unwrap();
    let problems = sluice::check_image(&read_docker_archive(&bytes).unwrap(), &SLUICE);
    assert_eq!(problems.len(), 4, "{problems:#?}");
    assert!(
        problems[0] == "config User is \"0:0\", want \"65532:65532\"",
        "{problems:#?}"
    );
    assert!(problems[1].starts_with("config ExposedPorts"), "{problems:#?}");
    assert!(
        problems[2].contains("/etc/passwd has no nonroot:x:65532:65532 entry"),
        "{problems:#?}"
    );
    assert!(
        problems[3].contains("/etc/ssl/certs/ca-certificates.crt holds no PEM certificate"),
        "{problems:#?}"
    );
}

#[test]
fn the_image_runs_in_a_chroot_as_nonroot() {
    let Some(binary) = stand_in() else { return };
    if !sluice::can_chroot() {
        eprintln!("skipped: not root, cannot chroot into the extracted image");
        return;
    }
    let (_, image) = build(binary);
    let out = sluice::run_in_chroot(&image, &scratch("chroot"), &["--version"]).unwrap();
    // `true --version` from coreutils: the loader and libc in the image work.
    assert!(out.contains("true"), "{out}");
}

/// The general tool: a static busybox with `/bin/sh`, through the CLI.
#[test]
fn the_cli_builds_a_static_busybox_image() {
    let busybox = Path::new("/bin/busybox");
    let static_busybox = std::fs::read(busybox)
        .ok()
        .and_then(|b| sluice_image::libs::elf_needs(&b, "busybox").ok())
        .is_some_and(|n| n.interpreter.is_none());
    if !static_busybox || stand_in().is_none() {
        eprintln!("skipped: no static /bin/busybox (Debian: busybox-static)");
        return;
    }
    let dir = scratch("busybox");
    let out = dir.join("busybox.tar");
    let status = Command::new(env!("CARGO_BIN_EXE_sluice-image"))
        .args(["build", "--tag", "busybox:test", "--output"])
        .arg(&out)
        .args([
            "--exec",
            "/bin/busybox=/bin/busybox",
            "--symlink",
            "/bin/sh=busybox",
            "--nonroot-base",
        ])
        .args([
            "--entrypoint",
            "/bin/sh",
            "--cmd",
            "-c",
            "--cmd",
            "echo hello from $(id -u)",
            "--user",
            "65532:65532",
        ])
        .status()
        .unwrap();
    assert!(status.success());
    let image = read_docker_archive(&std::fs::read(&out).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(image.repo_tags, ["busybox:test"]);
    assert_eq!(
        image.runtime("Cmd").unwrap(),
        &serde_json::json!(["-c", "echo hello from $(id -u)"])
    );
    // Static: no loader, no libraries.
    assert!(
        image.layers[0].iter().all(|e| !e.path.contains("lib")),
        "{:?}",
        image.layers[0]
    );
    assert_eq!(image.resolve("/bin/sh").unwrap().data, std::fs::read(busybox).unwrap());
    if sluice::can_chroot() {
        let out =
            sluice::run_in_chroot(&image, &scratch("busybox-chroot"), &["-c", "echo hello from $(id -u)"]).unwrap();
        assert_eq!(out, "hello from 65532\n");
    }
}
